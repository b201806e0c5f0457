// The MPI pieces shared by `bench comm` and `eval` (alltoall_mpi.h).
#include "embshard/bench/alltoall_mpi.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "embshard/measure/interleaved.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/reporter.h"
#include "embshard/util/statistics.h"

namespace embshard::mpi {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}


// The all-to-all layout of one direction: counts and displacements in units
// of one "column" (rows_per_rank floats), so that counts stay small ints.
struct Layout {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

std::vector<int> prefix_sums(const std::vector<int>& counts) {
  std::vector<int> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

// Forward: rank r sends its pooled columns for every peer's rows (dim_sums[r]
// columns to each) and receives dim_sums[p] columns from peer p. Backward is
// the same exchange reversed.
void make_layouts(const std::vector<int>& dim_sums, int me, Layout& fwd, Layout& bwd) {
  const size_t n = dim_sums.size();
  fwd.send_counts.assign(n, dim_sums[me]);
  fwd.recv_counts = dim_sums;
  fwd.send_displs = prefix_sums(fwd.send_counts);
  fwd.recv_displs = prefix_sums(fwd.recv_counts);
  bwd.send_counts = fwd.recv_counts;
  bwd.send_displs = fwd.recv_displs;
  bwd.recv_counts = fwd.send_counts;
  bwd.recv_displs = fwd.send_displs;
}

}  // namespace

void abort_run(Reporter& reporter, const std::string& tool, int rank, const std::string& what) {
  reporter.note(fmt::format("{}: rank {}: {}", tool, rank, what));
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // MPI_Abort does not return; in case it does
}

Session::Session() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    owned_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() {
  if (owned_) MPI_Finalize();
}

void Watchdog::check(int rc, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  abort_run(*reporter_, tool_, rank_, fmt::format("{} failed: {}", what, text));
}

void Watchdog::wait(MPI_Request& request, const char* what) const {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    const auto now = Clock::now();
    if (now > deadline) {
      abort_run(*reporter_, tool_, rank_,
                fmt::format("{} did not complete within {} s (a rank died or hangs)", what,
                            timeout_s_));
    }
    if (!oversubscribed_ && now - start < std::chrono::milliseconds(50)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

bool Watchdog::host_oversubscribed() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks = local != nullptr ? std::atoi(local) : 1;
  return ranks > static_cast<int>(std::thread::hardware_concurrency());
}

void Watchdog::barrier(const char* what) const {
  MPI_Request request;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &request), what);
  wait(request, what);
}

void Watchdog::bcast(void* data, int count, MPI_Datatype type, const char* what) const {
  MPI_Request request;
  check(MPI_Ibcast(data, count, type, 0, MPI_COMM_WORLD, &request), what);
  wait(request, what);
}

void Watchdog::gather(const void* send, int count, MPI_Datatype type, void* recv,
                      const char* what) const {
  MPI_Request request;
  check(MPI_Igather(send, count, type, recv, count, type, 0, MPI_COMM_WORLD, &request), what);
  wait(request, what);
}

std::vector<double> control_message(int status, int64_t index, const std::vector<double>& dim_sums,
                                    const std::vector<double>& delays_ms, int n, double spare) {
  std::vector<double> message(3 + 2 * static_cast<size_t>(n), 0.0);
  message.back() = spare;
  message[0] = status;
  message[1] = static_cast<double>(index);
  for (size_t d = 0; d < dim_sums.size() && d < static_cast<size_t>(n); ++d) {
    message[2 + d] = dim_sums[d];
  }
  for (size_t d = 0; d < delays_ms.size() && d < static_cast<size_t>(n); ++d) {
    message[2 + n + d] = delays_ms[d];
  }
  return message;
}

namespace {

// One placement's buffers and exchanges on this rank.
class Exchange {
 public:
  Exchange(const Watchdog& dog, const AllToAllTiming& o, const std::vector<int>& dim_sums)
      : dog_(dog) {
    const int me = dog.rank(), n = static_cast<int>(dim_sums.size());
    const int rows_per_rank = static_cast<int>(o.batch / n);
    dog.check(MPI_Type_contiguous(rows_per_rank, MPI_FLOAT, &column_), "MPI_Type_contiguous");
    dog.check(MPI_Type_commit(&column_), "MPI_Type_commit");
    make_layouts(dim_sums, me, fwd_, bwd_);
    int64_t total_columns = 0;
    for (int d : dim_sums) total_columns += d;
    // Buffer a: my pooled columns for every peer; buffer b: every peer's
    // columns for my rows. At least one float each, so that data() is never null.
    a_.assign(std::max<int64_t>(1, int64_t{n} * dim_sums[me] * rows_per_rank), 1.0f);
    b_.assign(std::max<int64_t>(1, total_columns * rows_per_rank), 1.0f);
  }
  ~Exchange() { MPI_Type_free(&column_); }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // The forward exchange from now until it completes, in ms.
  double forward(const char* what) { return run(a_.data(), fwd_, b_.data(), what); }
  double backward(const char* what) { return run(b_.data(), bwd_, a_.data(), what); }

 private:
  double run(float* send, const Layout& layout, float* recv, const char* what) {
    const auto start = Clock::now();
    MPI_Request request;
    dog_.check(MPI_Ialltoallv(send, layout.send_counts.data(), layout.send_displs.data(), column_,
                              recv, layout.recv_counts.data(), layout.recv_displs.data(), column_,
                              MPI_COMM_WORLD, &request),
               what);
    dog_.wait(request, what);
    return ms_between(start, Clock::now());
  }

  const Watchdog& dog_;
  MPI_Datatype column_ = MPI_DATATYPE_NULL;
  Layout fwd_, bwd_;
  std::vector<float> a_, b_;
};

// The reference exchange: o.probe_dim columns on every rank, no delay.
double reference_run(const Watchdog& dog, Exchange& reference) {
  dog.barrier("reference barrier");
  return reference.forward("reference all-to-all");
}

// The reference exchange's quiet time on every rank: `runs` collective runs,
// each rank's 15th percentile (measure/interleaved.h explains why a low
// quantile). Every rank gets its own; rank 0 gets all in `all`.
double estimate_exchange_reference(const Watchdog& dog, const AllToAllTiming& o, int n, int runs,
                                   std::vector<double>* all) {
  ES_CHECK(runs >= 1, "reference exchange: runs {} must be >= 1", runs);
  Exchange reference(dog, o, std::vector<int>(n, o.probe_dim));
  for (int w = 0; w < o.warmup; ++w) reference_run(dog, reference);
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) ms.push_back(reference_run(dog, reference));
  const double mine = quantile(ms, 0.15);
  std::vector<double> gathered(dog.rank() == 0 ? static_cast<size_t>(n) : 1);
  dog.gather(&mine, 1, MPI_DOUBLE, gathered.data(), "gathering references");
  if (all != nullptr && dog.rank() == 0) *all = gathered;
  return mine;
}

}  // namespace

double shared_exchange_reference(const Watchdog& dog, const AllToAllTiming& o, int n, int runs,
                                 std::vector<double>& all) {
  double known = all.empty() ? 0 : 1;
  dog.bcast(&known, 1, MPI_DOUBLE, "reference broadcast");
  if (known == 0) return estimate_exchange_reference(dog, o, n, runs, &all);
  std::vector<double> everyone(n);
  if (dog.rank() == 0) everyone = all;
  dog.bcast(everyone.data(), n, MPI_DOUBLE, "reference broadcast");
  return everyone[dog.rank()];
}

namespace {

// Rounds of `run_work` (returning its ms; warmed up by the caller)
// interleaved, in an order drawn from o.seed and `index` alike on every rank,
// with the reference exchange; normalized by this rank's quiet time of it.
InterleavedResult interleave_with_reference(const Watchdog& dog, const AllToAllTiming& o, int n,
                                            const std::function<double()>& run_work,
                                            double reference_ms, int64_t index) {
  Exchange reference(dog, o, std::vector<int>(n, o.probe_dim));
  InterleavedOptions io;
  io.warmup_rounds = 0;
  io.min_rounds = io.max_rounds = 2 * o.repeats;  // fixed: every rank runs the same rounds
  io.target_relative_half_width = 1e9;
  io.seed = item_seed(o.seed, static_cast<uint64_t>(index));
  io.max_ratio = 1e6;
  // A reference exchange of microseconds on an idle host takes milliseconds
  // when ranks outnumber cores and the scheduler decides; so does the work,
  // and the ratio holds. Only an absurd drift is an error here.
  io.probe_drift_bound = 1e4;
  io.drift_retries = 0;  // a rank measuring again alone would wait on the others forever
  io.label = fmt::format("{}: rank {}: placement {}", dog.tool(), dog.rank(), index);
  return measure_interleaved(run_work, {[&] { return reference_run(dog, reference); }},
                             {reference_ms}, io);
}

// The index all-to-all of row-wise input distribution, in bytes: device d
// receives index_recv_bytes[d] / (N - 1) from every peer.
class IndexExchange {
 public:
  IndexExchange(const Watchdog& dog, const std::vector<double>& recv_bytes) : dog_(dog) {
    const int me = dog.rank(), n = static_cast<int>(recv_bytes.size());
    // What each peer sends device d; d receives its own share from each peer.
    std::vector<int> share(n, 0);
    for (int d = 0; d < n && n > 1; ++d) {
      const double bytes = std::round(recv_bytes[d] / (n - 1));
      ES_CHECK(bytes >= 0 && bytes < std::numeric_limits<int>::max(),
               "index all-to-all: device {} receives {} bytes from each peer, past MPI's int",
               d, bytes);
      share[d] = static_cast<int>(bytes);
    }
    send_counts_ = share;
    send_counts_[me] = 0;
    recv_counts_.assign(n, share[me]);
    recv_counts_[me] = 0;
    send_displs_ = prefix_sums(send_counts_);
    recv_displs_ = prefix_sums(recv_counts_);
    send_.assign(std::max<size_t>(1, send_displs_.back() + size_t(send_counts_.back())), 1);
    recv_.assign(std::max<size_t>(1, recv_displs_.back() + size_t(recv_counts_.back())), 0);
  }
  void run() {
    MPI_Request request;
    dog_.check(MPI_Ialltoallv(send_.data(), send_counts_.data(), send_displs_.data(), MPI_BYTE,
                              recv_.data(), recv_counts_.data(), recv_displs_.data(), MPI_BYTE,
                              MPI_COMM_WORLD, &request),
               "index all-to-all");
    dog_.wait(request, "index all-to-all");
  }

 private:
  const Watchdog& dog_;
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
  std::vector<char> send_, recv_;
};

void allreduce(const Watchdog& dog, std::vector<float>& gradients) {
  MPI_Request request;
  dog.check(MPI_Iallreduce(MPI_IN_PLACE, gradients.data(), static_cast<int>(gradients.size()),
                           MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
            "all-reduce");
  dog.wait(request, "all-reduce");
}

// This rank's forward all-to-all of pooled embeddings (from the end of its
// delay until its all-to-all completes, so waiting for stragglers counts) and
// backward all-to-all of their gradients (after a barrier), interleaved with
// the reference exchange (AllToAllTiming) and normalized by `reference_ms`,
// this rank's quiet time of it; `max_delay_ms` is the largest delay of any
// rank. `index` seeds the order (alike on every rank).
RankTiming time_alltoalls(const Watchdog& dog, const AllToAllTiming& o,
                          const std::vector<int>& dim_sums, double delay_ms, double max_delay_ms,
                          double reference_ms, int64_t index) {
  const int n = static_cast<int>(dim_sums.size());
  Exchange work(dog, o, dim_sums);
  const auto delay = std::chrono::duration<double, std::milli>(delay_ms);
  const double wait_ms = std::max(0.0, max_delay_ms - delay_ms);
  std::vector<double> fwd_ms, bwd_ms, transfer_ms;
  // One run of the placement: the device "finishes its compute" after its
  // delay; its forward runs from then until its all-to-all completes (so the
  // wait for stragglers counts); the backward after a barrier.
  const auto run_work = [&] {
    dog.barrier("forward barrier");
    if (delay_ms > 0) std::this_thread::sleep_until(Clock::now() + delay);
    const double f = work.forward("forward all-to-all");
    dog.barrier("backward barrier");
    const double g = work.backward("backward all-to-all");
    fwd_ms.push_back(f);
    bwd_ms.push_back(g);
    // The wait is the plan's, not the machine's: only the transfer drifts.
    transfer_ms.push_back(std::max(kMinExchangeMs, f - wait_ms));
    return transfer_ms.back() + g;
  };
  for (int w = 0; w < o.warmup; ++w) run_work();
  fwd_ms.clear(), bwd_ms.clear(), transfer_ms.clear();
  const InterleavedResult r = interleave_with_reference(dog, o, n, run_work, reference_ms, index);
  const double factor = r.normalized_ms / r.raw_ms;
  RankTiming t;
  t.raw_fwd_ms = median(fwd_ms);
  t.raw_bwd_ms = median(bwd_ms);
  t.fwd_ms = wait_ms + median(transfer_ms) * factor;
  t.bwd_ms = t.raw_bwd_ms * factor;
  t.probe_ms = r.probe_median_ms;
  t.ratio_mad = r.dispersion;
  return t;
}

// This rank's row-wise and data-parallel collectives of `load` (comm_model.h),
// timed like the pooled all-to-all: forward, the index all-to-all (every rank
// sends device d index_recv_bytes[d] / (N - 1) bytes) and the reduce-scatter of
// row shards' partial sums; backward, the all-gather of their gradients and the
// all-reduce (MPI_Iallreduce) of replicated tables' gradients. The
// reduce-scatter moves what the analytic model counts (each rank sends
// batch / N rows of its row-shard columns to every peer and receives its own
// rows of theirs: an all-to-all of partial sums, summed on arrival), so that
// unequal row groups need no communicator of their own; the all-gather is the
// same exchange reversed. A collective without load is skipped.
RankTiming time_collectives(const Watchdog& dog, const AllToAllTiming& o,
                            const CollectiveLoad& load, double reference_ms, int64_t index) {
  const int n = static_cast<int>(load.rw_dim_sums.size());
  std::vector<int> rw(n);
  bool any_rw = false, any_index = false;
  for (int d = 0; d < n; ++d) {
    rw[d] = static_cast<int>(load.rw_dim_sums[d]);
    any_rw = any_rw || rw[d] > 0;
    any_index = any_index || load.index_recv_bytes[d] > 0;
  }
  const double floats = std::ceil(load.allreduce_bytes / 4);
  ES_CHECK(floats < std::numeric_limits<int>::max(),
           "all-reduce of {} bytes: past MPI's int count of floats", load.allreduce_bytes);
  Exchange partial_sums(dog, o, rw);
  IndexExchange indices(dog, load.index_recv_bytes);
  std::vector<float> gradients(std::max<size_t>(1, static_cast<size_t>(floats)), 1.0f);
  std::vector<double> fwd_ms, bwd_ms;
  const auto run_work = [&] {
    dog.barrier("forward barrier");
    auto start = Clock::now();
    if (any_index) indices.run();
    if (any_rw) partial_sums.forward("reduce-scatter");
    const double f = ms_between(start, Clock::now());
    dog.barrier("backward barrier");
    start = Clock::now();
    if (any_rw) partial_sums.backward("all-gather");
    if (floats > 0) allreduce(dog, gradients);
    const double g = ms_between(start, Clock::now());
    fwd_ms.push_back(f);
    bwd_ms.push_back(g);
    return std::max(kMinExchangeMs, f + g);
  };
  for (int w = 0; w < o.warmup; ++w) run_work();
  fwd_ms.clear(), bwd_ms.clear();
  const InterleavedResult r = interleave_with_reference(dog, o, n, run_work, reference_ms, index);
  const double factor = r.normalized_ms / r.raw_ms;
  RankTiming t;
  t.raw_fwd_ms = median(fwd_ms);
  t.raw_bwd_ms = median(bwd_ms);
  t.fwd_ms = t.raw_fwd_ms * factor;
  t.bwd_ms = t.raw_bwd_ms * factor;
  t.probe_ms = r.probe_median_ms;
  t.ratio_mad = r.dispersion;
  return t;
}

// This rank's timings of what a control message carries: a placement's
// all-to-alls or (kMeasureCollectives) its collectives.
RankTiming time_message(const Watchdog& dog, const AllToAllTiming& o,
                        const std::vector<double>& message, int n, double reference_ms) {
  const auto index = static_cast<int64_t>(message[1]);
  if (static_cast<int>(message[0]) == kMeasureCollectives) {
    CollectiveLoad load;
    load.reset(n);
    for (int d = 0; d < n; ++d) {
      load.rw_dim_sums[d] = message[2 + d];
      load.index_recv_bytes[d] = message[2 + n + d];
    }
    load.allreduce_bytes = message.back();
    return time_collectives(dog, o, load, reference_ms, index);
  }
  std::vector<int> dims(n);
  double max_delay = 0;
  for (int d = 0; d < n; ++d) {
    dims[d] = static_cast<int>(message[2 + d]);
    max_delay = std::max(max_delay, message[2 + n + d]);
  }
  return time_alltoalls(dog, o, dims, message[2 + n + dog.rank()], max_delay, reference_ms, index);
}

std::vector<double> as_doubles(const RankTiming& t) {
  return {t.fwd_ms, t.bwd_ms, t.raw_fwd_ms, t.raw_bwd_ms, t.probe_ms, t.ratio_mad};
}

// Rank 0: broadcast a control message, time it here too, gather every rank's.
std::vector<RankTiming> measure_message(const Watchdog& dog, const AllToAllTiming& o, int n,
                                        std::vector<double>& message, double reference_ms,
                                        const std::function<void(int64_t)>& before_timing) {
  dog.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, "control broadcast");
  if (before_timing) before_timing(static_cast<int64_t>(message[1]));
  const std::vector<double> mine = as_doubles(time_message(dog, o, message, n, reference_ms));
  std::vector<double> all(kRankTimingFields * static_cast<size_t>(n));
  dog.gather(mine.data(), kRankTimingFields, MPI_DOUBLE, all.data(), "gathering timings");
  std::vector<RankTiming> out(n);
  for (int r = 0; r < n; ++r) {
    const double* v = all.data() + kRankTimingFields * r;
    out[r] = {v[0], v[1], v[2], v[3], v[4], v[5]};
  }
  return out;
}

}  // namespace

std::vector<RankTiming> measure_alltoalls(const Watchdog& dog, const AllToAllTiming& o, int n,
                                          int64_t index, const std::vector<double>& dim_sums,
                                          const std::vector<double>& delays_ms,
                                          double reference_ms,
                                          const std::function<void(int64_t)>& before_timing) {
  std::vector<double> message = control_message(kMeasure, index, dim_sums, delays_ms, n);
  return measure_message(dog, o, n, message, reference_ms, before_timing);
}

std::vector<RankTiming> measure_collectives(const Watchdog& dog, const AllToAllTiming& o, int n,
                                            int64_t index, const CollectiveLoad& load,
                                            double reference_ms) {
  ES_CHECK(static_cast<int>(load.rw_dim_sums.size()) == n &&
               static_cast<int>(load.index_recv_bytes.size()) == n,
           "collectives: a load for {} devices, but {} MPI ranks", load.rw_dim_sums.size(), n);
  for (int d = 0; d < n; ++d) {
    const double rw = load.rw_dim_sums[d];
    ES_CHECK(rw >= 0 && rw == std::floor(rw) && rw < std::numeric_limits<int>::max(),
             "collectives: device {} has {} row-shard columns, not a whole number", d, rw);
  }
  std::vector<double> message = control_message(kMeasureCollectives, index, load.rw_dim_sums,
                                                load.index_recv_bytes, n, load.allreduce_bytes);
  return measure_message(dog, o, n, message, reference_ms, {});
}

bool serve_alltoalls(const Watchdog& control, const Watchdog& dog, const AllToAllTiming& o,
                     int n, double reference_ms,
                     const std::function<void(int64_t)>& before_timing) {
  for (;;) {
    std::vector<double> message = control_message(kMeasure, 0, {}, {}, n);
    control.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE,
                  "control broadcast");
    const int status = static_cast<int>(message[0]);
    if (status == kDone) return true;
    if (status == kSetupError) return false;
    ES_CHECK(status == kMeasure || status == kMeasureCollectives,
             "control message with unknown status {}", status);
    if (before_timing) before_timing(static_cast<int64_t>(message[1]));
    const std::vector<double> mine = as_doubles(time_message(dog, o, message, n, reference_ms));
    dog.gather(mine.data(), kRankTimingFields, MPI_DOUBLE, nullptr, "gathering timings");
  }
}

void stop_serving(const Watchdog& dog, int status, int n) {
  std::vector<double> message = control_message(status, 0, {}, {}, n);
  dog.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, "control broadcast");
}

// Every rank's hostname, on rank 0 (empty elsewhere).
std::vector<std::string> gather_hosts(const Watchdog& dog, int n) {
  constexpr int kLength = 256;
  char host[kLength] = {};
  ::gethostname(host, kLength - 1);
  std::vector<char> all(dog.rank() == 0 ? static_cast<size_t>(kLength) * n : 1);
  dog.gather(host, kLength, MPI_CHAR, all.data(), "gathering hostnames");
  std::vector<std::string> hosts;
  if (dog.rank() == 0) {
    for (int r = 0; r < n; ++r) hosts.emplace_back(all.data() + static_cast<size_t>(r) * kLength);
  }
  return hosts;
}

}  // namespace embshard::mpi
