// The MPI half of `bench comm`: rank 0 drives, every rank measures.
//
// Protocol, per sample: rank 0 broadcasts a control message (status, sample
// index, every device's dim sum and delay); every rank times its all-to-alls;
// rank 0 gathers the per-rank medians and appends one record. Only rank 0
// touches the file, and nothing assumes shared memory, so a hostfile spreading
// the ranks over many hosts works unchanged.
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
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/comm.h"
#include "embshard/util/error.h"
#include "embshard/util/progress.h"
#include "embshard/util/record_file.h"

namespace embshard {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

enum Status : int { kMeasure = 0, kDone = 1, kSetupError = 2 };

[[noreturn]] void abort_run(int rank, const std::string& what) {
  std::fprintf(stderr, "bench comm: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // MPI_Abort does not return; in case it does
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// MPI_Init .. MPI_Finalize around one run; errors come back as return codes
// so that the watchdog can name the failing operation.
class MpiSession {
 public:
  MpiSession() {
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
  ~MpiSession() {
    if (owned_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

// Runs every collective non-blocking and waits for it with a deadline.
class Watchdog {
 public:
  Watchdog(int rank, double timeout_s) : rank_(rank), timeout_s_(timeout_s) {}

  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    abort_run(rank_, fmt::format("{} failed: {}", what, text));
  }

  // Spins (yielding) while the wait is short, so that timings stay precise,
  // then polls every 0.2 ms: a long wait is a straggler or a dead peer, and
  // oversubscribed ranks need the core.
  void wait(MPI_Request& request, const char* what) const {
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const auto now = Clock::now();
      if (now > deadline) {
        abort_run(rank_, fmt::format("{} did not complete within {} s (a rank died or hangs)",
                                     what, timeout_s_));
      }
      if (now - start < std::chrono::milliseconds(50)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }

  void barrier(const char* what) const {
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), what);
    wait(request, what);
  }
  void bcast(void* data, int count, MPI_Datatype type, const char* what) const {
    MPI_Request request;
    check(MPI_Ibcast(data, count, type, 0, MPI_COMM_WORLD, &request), what);
    wait(request, what);
  }
  void gather(const void* send, int count, MPI_Datatype type, void* recv, const char* what) const {
    MPI_Request request;
    check(MPI_Igather(send, count, type, recv, count, type, 0, MPI_COMM_WORLD, &request), what);
    wait(request, what);
  }
  int rank() const { return rank_; }

 private:
  int rank_;
  double timeout_s_;
};

// Message rank 0 broadcasts before each sample: [status, index, dim sums (N),
// delays in ms (N)]; doubles hold the integers exactly.
std::vector<double> control_message(int status, int64_t index, const CommSample* sample, int n) {
  std::vector<double> message(2 + 2 * static_cast<size_t>(n), 0.0);
  message[0] = status;
  message[1] = static_cast<double>(index);
  if (sample != nullptr) {
    for (int d = 0; d < n; ++d) {
      message[2 + d] = static_cast<double>(sample->dim_sums[d]);
      message[2 + n + d] = sample->delays_ms[d];
    }
  }
  return message;
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

struct RankTiming {
  double fwd_ms = 0, bwd_ms = 0;
};

void inject_fault(const CommBenchOptions& o, int rank, int64_t index) {
  if (o.fault == CommFault::kNone || rank != o.fault_rank || index != o.fault_sample) return;
  std::fprintf(stderr, "bench comm: rank %d: test fault: %s at sample %lld\n", rank,
               o.fault == CommFault::kExit ? "exiting" : "hanging",
               static_cast<long long>(index));
  std::fflush(stderr);
  if (o.fault == CommFault::kExit) ::_exit(1);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

RankTiming time_alltoalls(const Watchdog& dog, const CommBenchOptions& o,
                          const std::vector<int>& dim_sums, double delay_ms) {
  const int me = dog.rank(), n = static_cast<int>(dim_sums.size());
  const int rows_per_rank = static_cast<int>(o.batch / n);
  MPI_Datatype column;
  dog.check(MPI_Type_contiguous(rows_per_rank, MPI_FLOAT, &column), "MPI_Type_contiguous");
  dog.check(MPI_Type_commit(&column), "MPI_Type_commit");
  Layout fwd, bwd;
  make_layouts(dim_sums, me, fwd, bwd);
  int64_t total_columns = 0;
  for (int s : dim_sums) total_columns += s;
  // Buffer a: my pooled columns for every peer; buffer b: every peer's columns
  // for my rows. At least one float each, so that data() is never null.
  std::vector<float> a(std::max<int64_t>(1, int64_t{n} * dim_sums[me] * rows_per_rank), 1.0f);
  std::vector<float> b(std::max<int64_t>(1, total_columns * rows_per_rank), 1.0f);
  const auto delay = std::chrono::duration<double, std::milli>(delay_ms);
  std::vector<double> fwd_ms, bwd_ms;
  for (int run = 0; run < o.warmup + o.repeats; ++run) {
    MPI_Request request;
    dog.barrier("forward barrier");
    // The device "finishes its compute" after its delay; its forward
    // communication time runs from then until its all-to-all completes.
    if (delay_ms > 0) std::this_thread::sleep_until(Clock::now() + delay);
    auto start = Clock::now();
    dog.check(MPI_Ialltoallv(a.data(), fwd.send_counts.data(), fwd.send_displs.data(), column,
                             b.data(), fwd.recv_counts.data(), fwd.recv_displs.data(), column,
                             MPI_COMM_WORLD, &request),
              "forward all-to-all");
    dog.wait(request, "forward all-to-all");
    const double f = ms_between(start, Clock::now());
    dog.barrier("backward barrier");
    start = Clock::now();
    dog.check(MPI_Ialltoallv(b.data(), bwd.send_counts.data(), bwd.send_displs.data(), column,
                             a.data(), bwd.recv_counts.data(), bwd.recv_displs.data(), column,
                             MPI_COMM_WORLD, &request),
              "backward all-to-all");
    dog.wait(request, "backward all-to-all");
    const double g = ms_between(start, Clock::now());
    if (run < o.warmup) continue;
    fwd_ms.push_back(f);
    bwd_ms.push_back(g);
  }
  MPI_Type_free(&column);
  return {median(fwd_ms), median(bwd_ms)};
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

// Rank 0: checks options, opens (or resumes) the file. Returns the next sample.
int64_t open_output(const CommBenchOptions& o, int n, const std::vector<std::string>& hosts,
                    std::unique_ptr<RecordFile>& out) {
  check_comm_options(o, n);
  out = std::make_unique<RecordFile>(o.out_path, comm_bench_header(o, n, hosts),
                                     comm_bench_must_match());
  if (out->dropped_bytes() > 0) {
    fmt::print(stderr, "bench comm: dropped a torn last record ({} bytes) from {}\n",
               out->dropped_bytes(), o.out_path);
  }
  const auto& existing = out->records();
  for (size_t i = 0; i < existing.size(); ++i) {
    ES_CHECK(existing[i].value("sample", int64_t{-1}) == static_cast<int64_t>(i),
             "{}: record {} has sample {}, expected {}: the file is not a clean run", o.out_path,
             i + 1, existing[i].value("sample", json()).dump(), i);
  }
  return static_cast<int64_t>(existing.size());
}

// Rank 0's side of one sample: draw, broadcast, measure, gather, append.
void drive_sample(const Watchdog& dog, const CommBenchOptions& o, int n, int64_t index,
                  RecordFile& out, Progress& progress) {
  const CommSample sample = draw_comm_sample(o, n, index);
  std::vector<double> message = control_message(kMeasure, index, &sample, n);
  dog.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, "control broadcast");
  std::vector<int> dim_sums(sample.dim_sums.begin(), sample.dim_sums.end());
  inject_fault(o, 0, index);
  const RankTiming mine = time_alltoalls(dog, o, dim_sums, sample.delays_ms[0]);
  const double send[2] = {mine.fwd_ms, mine.bwd_ms};
  std::vector<double> all(2 * static_cast<size_t>(n));
  dog.gather(send, 2, MPI_DOUBLE, all.data(), "gathering timings");
  std::vector<double> fwd(n), bwd(n);
  for (int r = 0; r < n; ++r) {
    fwd[r] = all[2 * r];
    bwd[r] = all[2 * r + 1];
  }
  out.append({{"sample", index},
              {"dim_sums", sample.dim_sums},
              {"num_tables", sample.num_tables},
              {"move_share", sample.move_share},
              {"delays_ms", sample.delays_ms},
              {"fwd_ms", fwd},
              {"bwd_ms", bwd}});
  progress.update(static_cast<uint64_t>(index + 1),
                  fmt::format("last max fwd {:.2f} ms, max bwd {:.2f} ms",
                              *std::max_element(fwd.begin(), fwd.end()),
                              *std::max_element(bwd.begin(), bwd.end())));
}

int64_t run_root(const Watchdog& dog, const CommBenchOptions& o, int n) {
  const std::vector<std::string> hosts = gather_hosts(dog, n);
  std::unique_ptr<RecordFile> out;
  int64_t next = 0;
  try {
    next = open_output(o, n, hosts, out);
  } catch (...) {
    // Let the other ranks leave cleanly before reporting the error.
    std::vector<double> stop = control_message(kSetupError, 0, nullptr, n);
    dog.bcast(stop.data(), static_cast<int>(stop.size()), MPI_DOUBLE, "control broadcast");
    throw;
  }
  try {
    Progress progress("bench comm", static_cast<uint64_t>(std::max(next, o.samples)),
                      static_cast<uint64_t>(next));
    for (; next < o.samples; ++next) drive_sample(dog, o, n, next, *out, progress);
    progress.finish();
  } catch (const std::exception& e) {
    // The peers wait in a collective: only an abort ends them promptly.
    abort_run(dog.rank(), fmt::format("error: {}", e.what()));
  }
  std::vector<double> done = control_message(kDone, next, nullptr, n);
  dog.bcast(done.data(), static_cast<int>(done.size()), MPI_DOUBLE, "control broadcast");
  return next;
}

// Ranks > 0: follow rank 0's control messages. Returns false on a setup error
// (rank 0 reports it).
bool run_follower(const Watchdog& dog, const CommBenchOptions& o, int n) {
  gather_hosts(dog, n);
  try {
    for (;;) {
      std::vector<double> message = control_message(kMeasure, 0, nullptr, n);
      dog.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE,
                "control broadcast");
      const int status = static_cast<int>(message[0]);
      if (status == kDone) return true;
      if (status == kSetupError) return false;
      const auto index = static_cast<int64_t>(message[1]);
      std::vector<int> dim_sums(n);
      for (int d = 0; d < n; ++d) dim_sums[d] = static_cast<int>(message[2 + d]);
      inject_fault(o, dog.rank(), index);
      const RankTiming mine = time_alltoalls(dog, o, dim_sums, message[2 + n + dog.rank()]);
      const double send[2] = {mine.fwd_ms, mine.bwd_ms};
      dog.gather(send, 2, MPI_DOUBLE, nullptr, "gathering timings");
    }
  } catch (const std::exception& e) {
    abort_run(dog.rank(), fmt::format("error: {}", e.what()));
  }
}

}  // namespace

CommBenchResult run_comm_bench(const CommBenchOptions& options) {
  MpiSession mpi;
  // A bad --timeout-s is reported by rank 0's option check; until then, 60 s.
  const Watchdog dog(mpi.rank(), options.timeout_s > 0 ? options.timeout_s : 60);
  CommBenchResult result;
  result.rank = mpi.rank();
  result.num_ranks = mpi.size();
  if (mpi.rank() == 0) {
    result.records = run_root(dog, options, mpi.size());
  } else {
    result.setup_failed = !run_follower(dog, options, mpi.size());
  }
  return result;
}

}  // namespace embshard
