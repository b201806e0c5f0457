// The MPI half of `bench comm`: rank 0 drives, every rank measures.
//
// Per sample, rank 0 draws a placement and every rank times its all-to-alls
// (alltoall_mpi.h), --passes times; rank 0 appends one record. Only rank 0
// touches the file.
//
// Watchdog: every collective is non-blocking and polled against a deadline
// (--timeout-s); a rank whose collective misses it prints which one and calls
// MPI_Abort, so a dead or hung peer ends the run instead of hanging it. Records
// appended before stay intact (each is one write + fdatasync).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall_mpi.h"
#include "embshard/bench/comm.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"

namespace embshard {
namespace {

using nlohmann::json;
using namespace mpi;

AllToAllTiming timing(const CommBenchOptions& o) {
  return {o.batch, o.warmup, o.repeats, o.seed, o.probe_dim};
}

void inject_fault(const CommBenchOptions& o, Reporter& reporter, int rank, int64_t index) {
  if (o.fault == CommFault::kNone || rank != o.fault_rank || index != o.fault_sample) return;
  reporter.note(fmt::format("bench comm: rank {}: test fault: {} at sample {}", rank,
                            o.fault == CommFault::kExit ? "exiting" : "hanging", index));
  if (o.fault == CommFault::kExit) ::_exit(1);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Rank 0: every rank's reference of an existing file (empty: none).
std::vector<double> references_in(const std::string& path, int n, int64_t batch, int probe_dim) {
  if (!has_records(path)) return {};
  json header;
  RecordFile::read_all(path, &header, nullptr);
  return exchange_references_of(header, path, n, batch, probe_dim);
}

// Rank 0: opens (or resumes) the file. Returns the next sample.
int64_t open_output(const CommBenchOptions& o, int n, const std::vector<std::string>& hosts,
                    const std::vector<double>& references, std::unique_ptr<RecordFile>& out,
                    Reporter& reporter) {
  out = std::make_unique<RecordFile>(o.out_path, comm_bench_header(o, n, hosts, references),
                                     comm_bench_must_match());
  if (out->dropped_bytes() > 0) {
    reporter.note(fmt::format("bench comm: dropped a torn last record ({} bytes) from {}",
                              out->dropped_bytes(), o.out_path));
  }
  out->check_numbered();
  return static_cast<int64_t>(out->records().size());
}

// Rank 0's side of one sample: draw it and measure it on every rank. Returns
// the record without its timings.
json measure_sample(const Watchdog& dog, const CommBenchOptions& o, int n, int64_t index,
                    double reference_ms, std::vector<RankTiming>& timings) {
  json record = {{"sample", index}};
  if (o.collectives) {
    inject_fault(o, dog.reporter(), 0, index);
    const CollectiveLoad load = draw_collective_load(o, n, index);
    timings = measure_collectives(dog, timing(o), n, index, load, reference_ms);
    record.update({{"rw_dim_sums", load.rw_dim_sums},
                   {"index_recv_bytes", load.index_recv_bytes},
                   {"index_send_bytes", load.index_send_bytes},
                   {"allreduce_bytes", load.allreduce_bytes}});
  } else {
    const CommSample sample = draw_comm_sample(o, n, index);
    timings = measure_alltoalls(dog, timing(o), n, index,
                                std::vector<double>(sample.dim_sums.begin(), sample.dim_sums.end()),
                                sample.delays_ms, reference_ms,
                                [&](int64_t i) { inject_fault(o, dog.reporter(), 0, i); });
    record.update({{"dim_sums", sample.dim_sums},
                   {"num_tables", sample.num_tables},
                   {"move_share", sample.move_share},
                   {"delays_ms", sample.delays_ms}});
  }
  return record;
}

// The timings of a sample's passes into its record: per rank, the mean of
// the fastest half of the passes of each figure (the fastest of up to three;
// the median of the probe's and the dispersion), and with several passes
// each pass's figures.
void add_timings(json& record, const std::vector<std::vector<RankTiming>>& passes) {
  using Combine = double (*)(std::span<const double>);
  const auto per_rank = [&](double RankTiming::*field, Combine combine) {
    std::vector<double> out;
    for (size_t k = 0; k < passes.front().size(); ++k) {
      std::vector<double> v;
      for (const auto& pass : passes) v.push_back(pass[k].*field);
      out.push_back(combine(v));
    }
    return out;
  };
  record.update({{"fwd_ms", per_rank(&RankTiming::fwd_ms, fastest_half_mean)},
                 {"bwd_ms", per_rank(&RankTiming::bwd_ms, fastest_half_mean)},
                 {"raw_fwd_ms", per_rank(&RankTiming::raw_fwd_ms, fastest_half_mean)},
                 {"raw_bwd_ms", per_rank(&RankTiming::raw_bwd_ms, fastest_half_mean)},
                 {"probe_ms", per_rank(&RankTiming::probe_ms, median)},
                 {"ratio_mad", per_rank(&RankTiming::ratio_mad, median)}});
  if (passes.size() == 1) return;
  const auto each_pass = [&](double RankTiming::*field) {
    json out = json::array();
    for (const auto& pass : passes) {
      std::vector<double> v;
      for (const RankTiming& r : pass) v.push_back(r.*field);
      out.push_back(v);
    }
    return out;
  };
  record.update({{"pass_fwd_ms", each_pass(&RankTiming::fwd_ms)},
                 {"pass_bwd_ms", each_pass(&RankTiming::bwd_ms)}});
}

// Measures the samples from `first` on: one pass over as many as take about
// --pass-block-s (one sample when --passes is 1), the other passes over the
// same block, then appends the block's records. Returns the next sample.
int64_t drive_block(const Watchdog& dog, const CommBenchOptions& o, int n, int64_t first,
                    double reference_ms, RecordFile& out, Progress& progress) {
  std::vector<json> records;
  std::vector<std::vector<std::vector<RankTiming>>> timings;  // [sample][pass][rank]
  uint64_t measured = static_cast<uint64_t>(first * o.passes);
  const auto start = std::chrono::steady_clock::now();
  const auto block = std::chrono::duration<double>(o.pass_block_s);
  do {
    timings.emplace_back(1);
    const int64_t index = first + int64_t(records.size());
    records.push_back(measure_sample(dog, o, n, index, reference_ms, timings.back()[0]));
    progress.update(++measured);
  } while (o.passes > 1 && first + int64_t(records.size()) < o.samples &&
           std::chrono::steady_clock::now() - start < block);
  for (int pass = 1; pass < o.passes; ++pass) {
    for (size_t i = 0; i < records.size(); ++i) {
      timings[i].emplace_back();
      measure_sample(dog, o, n, first + int64_t(i), reference_ms, timings[i].back());
      progress.update(++measured);
    }
  }
  for (size_t i = 0; i < records.size(); ++i) {
    add_timings(records[i], timings[i]);
    out.append(records[i]);
  }
  const auto top = [&](const char* field) {
    const auto x = records.back()[field].get<std::vector<double>>();
    return *std::max_element(x.begin(), x.end());
  };
  progress.update(measured, fmt::format("last max fwd {:.2f} ms, max bwd {:.2f} ms", top("fwd_ms"),
                                        top("bwd_ms")));
  return first + int64_t(records.size());
}

int64_t run_root(const Watchdog& dog, const CommBenchOptions& o, int n) {
  const std::vector<std::string> hosts = gather_hosts(dog, n);
  std::vector<double> references;
  try {
    check_comm_options(o, n);
    check_not_being_written(o.out_path);  // before the reference exchanges, not after
    // A resumed file keeps its scale; a new one takes --reference-from's.
    references = references_in(o.out_path, n, o.batch, o.probe_dim);
    if (references.empty() && !o.reference_from.empty()) {
      ES_CHECK(file_exists(o.reference_from), "--reference-from {}: no such file",
               o.reference_from);
      references = references_in(o.reference_from, n, o.batch, o.probe_dim);
    }
  } catch (...) {
    // Let the other ranks leave cleanly before reporting the error.
    stop_serving(dog, kSetupError, n);
    throw;
  }
  stop_serving(dog, kMeasure, n);  // the options and the file are good: go on
  if (references.empty()) {
    dog.reporter().note(fmt::format("bench comm: timing the reference exchange ({} runs)",
                                    o.reference_runs));
  }
  const double reference_ms = shared_exchange_reference(dog, timing(o), n, o.reference_runs, references);
  std::unique_ptr<RecordFile> out;
  int64_t next = 0;
  try {
    next = open_output(o, n, hosts, references, out, dog.reporter());
  } catch (...) {
    // The others wait for a control message: a clean stop, then the report.
    stop_serving(dog, kSetupError, n);
    throw;
  }
  try {
    // Progress in measurements: samples x passes.
    Progress progress(dog.reporter(), "bench comm",
                      static_cast<uint64_t>(std::max(next, o.samples) * o.passes),
                      static_cast<uint64_t>(next * o.passes));
    while (next < o.samples) next = drive_block(dog, o, n, next, reference_ms, *out, progress);
    progress.finish();
  } catch (const std::exception& e) {
    // The peers wait in a collective: only an abort ends them promptly.
    abort_run(dog.reporter(), dog.tool(), dog.rank(), fmt::format("error: {}", e.what()));
  }
  stop_serving(dog, kDone, n);
  return next;
}

// Ranks > 0: follow rank 0's control messages. Returns on a setup error too
// (rank 0 reports it).
void run_follower(const Watchdog& dog, const CommBenchOptions& o, int n) {
  gather_hosts(dog, n);
  // Rank 0's verdict on the options and the file.
  std::vector<double> verdict = control_message(kMeasure, 0, {}, {}, n);
  dog.bcast(verdict.data(), static_cast<int>(verdict.size()), MPI_DOUBLE, "control broadcast");
  if (static_cast<int>(verdict[0]) == kSetupError) return;
  std::vector<double> unused;
  const double reference_ms = shared_exchange_reference(dog, timing(o), n, o.reference_runs, unused);
  try {
    serve_alltoalls(dog, dog, timing(o), n, reference_ms,
                    [&](int64_t i) { inject_fault(o, dog.reporter(), dog.rank(), i); });
  } catch (const std::exception& e) {
    abort_run(dog.reporter(), dog.tool(), dog.rank(), fmt::format("error: {}", e.what()));
  }
}

}  // namespace

CommBenchResult run_comm_bench(const CommBenchOptions& options, Reporter& reporter) {
  mpi::Session mpi;
  // A bad --timeout-s is reported by rank 0's option check; until then, 60 s.
  const Watchdog dog("bench comm", mpi.rank(), options.timeout_s > 0 ? options.timeout_s : 60,
                     reporter);
  CommBenchResult result;
  result.rank = mpi.rank();
  result.num_ranks = mpi.size();
  if (mpi.rank() == 0) {
    result.records = run_root(dog, options, mpi.size());
  } else {
    run_follower(dog, options, mpi.size());
  }
  return result;
}

}  // namespace embshard
