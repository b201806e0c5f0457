// `mpirun -np N embshard eval`: rank 0 runs the evaluation; the all-to-alls
// of every plan are timed across all N ranks (embshard/bench/alltoall_mpi.h).
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall_mpi.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

// Each comm_ms call is one measurement on every rank; `raw`: its raw medians
// instead of the normalized figures. `measurements` counts the calls of every
// model on the same ranks (it seeds each measurement's order).
class MpiCommModel : public CommModel {
 public:
  MpiCommModel(const mpi::Watchdog& dog, AllToAllTiming timing, int ranks, double reference_ms,
               bool raw, std::shared_ptr<int64_t> measurements)
      : dog_(dog), timing_(timing), ranks_(ranks), reference_ms_(reference_ms), raw_(raw),
        measurements_(std::move(measurements)) {}
  bool measures_network() const override { return true; }
  std::string name() const override {
    return fmt::format("MPI collectives, {} ranks{}", ranks_, raw_ ? ", raw clock" : "");
  }
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override {
    ES_CHECK(static_cast<int>(dim_sums.size()) == ranks_,
             "eval: a plan for {} devices, but {} MPI ranks", dim_sums.size(), ranks_);
    for (double d : dim_sums) {
      ES_CHECK(d >= 0 && d == std::floor(d) && d < std::numeric_limits<int>::max(),
               "eval: dim sum {} is not a whole number of columns", d);
    }
    const std::vector<mpi::RankTiming> t = mpi::measure_alltoalls(
        dog_, timing_, ranks_, (*measurements_)++,
        std::vector<double>(dim_sums.begin(), dim_sums.end()),
        std::vector<double>(delays_ms.begin(), delays_ms.end()), reference_ms_);
    for (int d = 0; d < ranks_; ++d) {
      if (!fwd_ms.empty()) fwd_ms[d] = raw_ ? t[d].raw_fwd_ms : t[d].fwd_ms;
      if (!bwd_ms.empty()) bwd_ms[d] = raw_ ? t[d].raw_bwd_ms : t[d].bwd_ms;
    }
  }
  // The row-wise and data-parallel collectives, measured (mpi::time_collectives).
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) const override {
    if (load.empty()) return;
    const std::vector<mpi::RankTiming> t = mpi::measure_collectives(
        dog_, timing_, ranks_, (*measurements_)++, load, reference_ms_);
    for (int d = 0; d < ranks_; ++d) {
      fwd_ms[d] += raw_ ? t[d].raw_fwd_ms : t[d].fwd_ms;
      bwd_ms[d] += raw_ ? t[d].raw_bwd_ms : t[d].bwd_ms;
    }
  }

 private:
  const mpi::Watchdog& dog_;
  AllToAllTiming timing_;
  int ranks_;
  double reference_ms_;  // rank 0's quiet time of the reference exchange
  bool raw_;
  std::shared_ptr<int64_t> measurements_;
};

// Runs of the reference exchange its quiet time is taken from.
constexpr int kReferenceRuns = 200;

// Every rank's reference exchange time recorded in an evaluation file that a
// run resumes (empty: none yet).
std::vector<double> comm_references_in(const std::string& path, int n) {
  if (!has_records(path)) return {};
  nlohmann::json header;
  RecordFile::read_all(path, &header, nullptr);
  // A file of a single-process run holds a null comm_probe: none either.
  if (const auto it = header.find("comm_probe"); it == header.end() || it->is_null()) return {};
  const nlohmann::json* recorded =
      json_optional(header, "/comm_probe/reference_ms", JsonKind::kNumbers, path);
  const auto ms = recorded ? recorded->get<std::vector<double>>() : std::vector<double>{};
  ES_CHECK(ms.empty() || static_cast<int>(ms.size()) == n,
           "{}: comm_probe.reference_ms holds {} ranks' times, the run has {} ranks", path,
           ms.size(), n);
  return ms;
}

// A rank > 0: waits for rank 0's setup, then serves its measurements until
// told to stop.
void serve_rank(const mpi::Session& session, const mpi::Watchdog& dog, int n, Reporter& reporter) {
  // Rank 0 loads, plans and measures compute between measurements, for as
  // long as that takes: control messages have no deadline (if rank 0 dies,
  // mpirun ends the job); every collective of a measurement has one.
  const mpi::Watchdog control = dog.with_timeout(std::numeric_limits<double>::infinity());
  double setup[4];
  control.bcast(setup, 4, MPI_DOUBLE, "setup broadcast");
  if (static_cast<int>(setup[0]) != mpi::kMeasure) return;
  AllToAllTiming timing;
  timing.batch = static_cast<int64_t>(setup[1]);
  timing.warmup = static_cast<int>(setup[2]);
  timing.repeats = static_cast<int>(setup[3]);
  try {
    std::vector<double> unused;
    const double reference_ms =
        mpi::shared_exchange_reference(dog, timing, n, kReferenceRuns, unused);
    mpi::serve_alltoalls(control, dog, timing, n, reference_ms);
  } catch (const std::exception& e) {
    mpi::abort_run(reporter, "eval", session.rank(), fmt::format("error: {}", e.what()));
  }
}

// Rank 0's checks and setup: the exchange timing and the reference exchange
// times (a resumed file's, else the cost model's, else none: measured now).
struct RootSetup {
  AllToAllTiming timing;
  std::vector<double> references;  // every rank's reference exchange time
  std::string reference_source = "measured in this run";
};

RootSetup set_up_root(const EvalOptions& o, int n, Reporter& reporter) {
  ES_CHECK(o.devices == n, "eval: --devices is {} but mpirun started {} ranks (one per device)",
           o.devices, n);
  check_eval_options(o, /*comm_measured=*/true);
  const EvalMeasurement& m = o.measure;
  ES_CHECK(m.comm_warmup >= 0 && m.comm_repeats >= 1 && m.comm_timeout_s > 0,
           "eval: --expert comm-warmup={}, comm-repeats={}, comm-timeout-s={}: need >= 0, >= 1 "
           "and > 0",
           m.comm_warmup, m.comm_repeats, m.comm_timeout_s);
  RootSetup r;
  std::string pool_dir;
  load_tasks(o.tasks_path, &pool_dir);
  r.timing.batch = load_workload(pool_dir).batch_size;
  r.timing.warmup = m.comm_warmup;
  r.timing.repeats = m.comm_repeats;
  ES_CHECK(r.timing.batch % n == 0,
           "eval: the pool's batch {} does not split evenly over {} ranks (each rank sends "
           "batch / N rows to each peer)",
           r.timing.batch, n);
  r.references = comm_references_in(o.out_path, n);
  if (!r.references.empty()) {
    r.reference_source = "the resumed file's";
  } else if (o.topology.hierarchical(n)) {
    // The model's reference exchange ran on one host: against it the links
    // between hosts would be normalized away.
    reporter.note(
        fmt::format("eval: timing the reference exchange now, on the {}", o.topology.str(n)));
  } else if (m.reference != EvalMeasurement::Reference::kNow) {
    const ReferenceScale scale = model_reference_scale(o.cost_model, o.model_dir,
                                                       /*executor=*/"", n, r.timing.batch);
    r.references = scale.exchange_ms;
    if (!r.references.empty()) {
      r.reference_source = "the cost model's (" + scale.source + ")";
    } else {
      reporter.note(fmt::format("eval: timing the reference exchange now: {}", scale.note));
    }
  }
  return r;
}

}  // namespace

MpiEvalResult run_eval_mpi(const EvalOptions& options, Reporter& reporter) {
  mpi::Session session;
  const int n = session.size();
  EvalOptions o = options;
  if (o.devices == 0) o.devices = n;
  MpiEvalResult result;
  result.devices = o.devices;
  const mpi::Watchdog dog("eval", session.rank(),
                          o.measure.comm_timeout_s > 0 ? o.measure.comm_timeout_s : 60, reporter);
  const std::vector<std::string> hosts = mpi::gather_hosts(dog, n);
  if (session.rank() != 0) {
    serve_rank(session, dog, n, reporter);
    return result;
  }
  result.root = true;
  // Rank 0 sends what the measurements need: [status, batch, warmup,
  // repeats] (kSetupError: rank 0 reports why).
  double setup[4] = {mpi::kSetupError, 0, 0, 0};
  RootSetup root;
  try {
    root = set_up_root(o, n, reporter);
  } catch (...) {
    dog.bcast(setup, 4, MPI_DOUBLE, "setup broadcast");  // the others leave; rank 0 reports
    throw;
  }
  const AllToAllTiming& timing = root.timing;
  setup[0] = mpi::kMeasure;
  setup[1] = static_cast<double>(timing.batch);
  setup[2] = timing.warmup;
  setup[3] = timing.repeats;
  dog.bcast(setup, 4, MPI_DOUBLE, "setup broadcast");
  try {
    const double reference_ms =
        mpi::shared_exchange_reference(dog, timing, n, kReferenceRuns, root.references);
    result.comm_source = fmt::format(
        "measured: MPI all-to-all, and the row-wise and data-parallel collectives, over {} "
        "ranks on {}",
        n, fmt::join(hosts, ","));
    const nlohmann::json comm_probe = {{"exchange_dim", kReferenceExchangeDim},
                                       {"reference_ms", root.references},
                                       {"reference_source", root.reference_source}};
    const auto measurements = std::make_shared<int64_t>(0);
    const auto comm = [&](bool raw) {
      return std::make_shared<MpiCommModel>(dog, timing, n, reference_ms, raw, measurements);
    };
    result.records = run_eval(o, reporter, comm(false), result.comm_source, comm_probe,
                              o.measure.raw_clock ? comm(true) : nullptr);
  } catch (...) {
    // The other ranks wait for a control message: let them leave, then report.
    mpi::stop_serving(dog, mpi::kSetupError, n);
    throw;
  }
  mpi::stop_serving(dog, mpi::kDone, n);
  return result;
}

}  // namespace embshard
