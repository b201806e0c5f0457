// The MPI pieces shared by `bench comm` and `eval` (alltoall_mpi.h).
#include "embshard/bench/alltoall_mpi.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "embshard/util/reporter.h"

namespace embshard::mpi {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
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
    if (now - start < std::chrono::milliseconds(50)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
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
                                    const std::vector<double>& delays_ms, int n) {
  std::vector<double> message(2 + 2 * static_cast<size_t>(n), 0.0);
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

RankTiming time_alltoalls(const Watchdog& dog, const AllToAllTiming& o,
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
  // One all-to-all of `layout` from `send` into `recv`, in ms.
  auto exchange = [&](float* send, const Layout& layout, float* recv, const char* what) {
    const auto start = Clock::now();
    MPI_Request request;
    dog.check(MPI_Ialltoallv(send, layout.send_counts.data(), layout.send_displs.data(), column,
                             recv, layout.recv_counts.data(), layout.recv_displs.data(), column,
                             MPI_COMM_WORLD, &request),
              what);
    dog.wait(request, what);
    return ms_between(start, Clock::now());
  };
  std::vector<double> fwd_ms, bwd_ms;
  for (int run = 0; run < o.warmup + o.repeats; ++run) {
    dog.barrier("forward barrier");
    // The device "finishes its compute" after its delay; its forward
    // communication time runs from then until its all-to-all completes.
    if (delay_ms > 0) std::this_thread::sleep_until(Clock::now() + delay);
    const double f = exchange(a.data(), fwd, b.data(), "forward all-to-all");
    dog.barrier("backward barrier");
    const double g = exchange(b.data(), bwd, a.data(), "backward all-to-all");
    if (run < o.warmup) continue;
    fwd_ms.push_back(f);
    bwd_ms.push_back(g);
  }
  MPI_Type_free(&column);
  return {median(fwd_ms), median(bwd_ms)};
}

namespace {

// This rank's timings of the placement a control message carries.
RankTiming time_message(const Watchdog& dog, const AllToAllTiming& o,
                        const std::vector<double>& message, int n) {
  std::vector<int> dims(n);
  for (int d = 0; d < n; ++d) dims[d] = static_cast<int>(message[2 + d]);
  return time_alltoalls(dog, o, dims, message[2 + n + dog.rank()]);
}

}  // namespace

void measure_alltoalls(const Watchdog& dog, const AllToAllTiming& o, int n, int64_t index,
                       const std::vector<double>& dim_sums, const std::vector<double>& delays_ms,
                       std::vector<double>& fwd, std::vector<double>& bwd,
                       const std::function<void(int64_t)>& before_timing) {
  std::vector<double> message = control_message(kMeasure, index, dim_sums, delays_ms, n);
  dog.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE, "control broadcast");
  if (before_timing) before_timing(index);
  const RankTiming mine = time_message(dog, o, message, n);
  const double send[2] = {mine.fwd_ms, mine.bwd_ms};
  std::vector<double> all(2 * static_cast<size_t>(n));
  dog.gather(send, 2, MPI_DOUBLE, all.data(), "gathering timings");
  fwd.assign(n, 0.0);
  bwd.assign(n, 0.0);
  for (int r = 0; r < n; ++r) {
    fwd[r] = all[2 * r];
    bwd[r] = all[2 * r + 1];
  }
}

bool serve_alltoalls(const Watchdog& control, const Watchdog& dog, const AllToAllTiming& o,
                     int n, const std::function<void(int64_t)>& before_timing) {
  for (;;) {
    std::vector<double> message = control_message(kMeasure, 0, {}, {}, n);
    control.bcast(message.data(), static_cast<int>(message.size()), MPI_DOUBLE,
                  "control broadcast");
    const int status = static_cast<int>(message[0]);
    if (status == kDone) return true;
    if (status == kSetupError) return false;
    if (before_timing) before_timing(static_cast<int64_t>(message[1]));
    const RankTiming mine = time_message(dog, o, message, n);
    const double send[2] = {mine.fwd_ms, mine.bwd_ms};
    dog.gather(send, 2, MPI_DOUBLE, nullptr, "gathering timings");
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
