// The CPU executor: the fused kernels of tbe.h on huge-page buffers.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "embshard/kernel/executor.h"
#include "embshard/kernel/precision.h"
#include "embshard/util/error.h"
#include "embshard/util/huge_buffer.h"
#include "embshard/util/statistics.h"
#include "kernel/executor_common.h"

namespace embshard {
namespace {

// Milliseconds on the wall clock, or of the calling thread's CPU time.
double now_ms(bool thread_cpu_time) {
  timespec t{};
  const int rc = clock_gettime(thread_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  ES_CHECK(rc == 0, "cpu executor: clock_gettime failed");
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

class CpuShard : public PreparedShard {
 public:
  CpuShard(const ShardInput& in, int threads, bool thread_cpu_time)
      : threads_(threads), thread_cpu_time_(thread_cpu_time), forward_only_(in.forward_only) {
    fused_.batch_size = in.batch_size;
    fused_.pooling = in.pooling;
    optimizer_.type = in.optimizer;
    for (size_t i = 0; i < in.tables.size(); ++i) {
      const ShardTableInput& t = in.tables[i];
      check_shard_table(t, i, forward_only_, "cpu executor");
      fused_.tables.push_back(prepare_table(t, i, in.optimizer));
    }
    const size_t outputs = static_cast<size_t>(in.batch_size * fused_.total_dim());
    output_ = std::make_unique<HugeBuffer>(std::max<size_t>(1, outputs) * sizeof(float));
    if (forward_only_) return;
    grad_ = std::make_unique<HugeBuffer>(std::max<size_t>(1, outputs) * sizeof(float));
    fill_pattern(grad_->floats(), outputs, 7);
  }

  // The table's weights in its type and (training) its optimizer's state.
  TableBatch prepare_table(const ShardTableInput& t, size_t i, OptimizerType optimizer) {
    const size_t count = static_cast<size_t>(t.rows) * t.dim;
    weights_.push_back(std::make_unique<HugeBuffer>(count * sizeof(float)));
    fill_pattern(weights_.back()->floats(), count, i);
    TableBatch b = table_batch(t, weights_.back()->floats(), nullptr);
    b.type = t.data_type;
    if (t.data_type != DataType::kFp32) {
      // Packed into a buffer of the stored rows (a quantized row of a narrow
      // table is longer than its fp32 row), the fp32 one released.
      auto packed = std::make_unique<HugeBuffer>(
          static_cast<size_t>(t.rows * data_type_row_bytes(t.data_type, t.dim)));
      pack_rows(t.data_type, b.weights, t.rows, t.dim, packed->data());
      b.packed = packed->data();
      b.weights = nullptr;
      weights_.back() = std::move(packed);
    }
    if (forward_only_) return b;
    const auto state = [&](size_t floats) {
      weights_.push_back(std::make_unique<HugeBuffer>(std::max<size_t>(1, floats) * sizeof(float)));
      std::fill_n(weights_.back()->floats(), floats, 0.0f);
      return weights_.back()->floats();
    };
    if (optimizer == OptimizerType::kRowWiseAdagrad) b.momentum = state(t.rows);
    if (optimizer == OptimizerType::kAdam) b.exp_avg = state(count), b.exp_avg_sq = state(count);
    return b;
  }

  StepTiming step() override {
    StepTiming t;
    double start = now_ms(thread_cpu_time_);
    Status s = tbe_forward(fused_, output_->floats(), threads_);
    t.fwd_ms = now_ms(thread_cpu_time_) - start;
    ES_CHECK(s.ok(), "cpu executor: forward failed: {}", s.message());
    if (forward_only_) return t;
    start = now_ms(thread_cpu_time_);
    s = tbe_backward_update(fused_, grad_->floats(), optimizer_, threads_, workspace_);
    t.bwd_ms = now_ms(thread_cpu_time_) - start;
    ES_CHECK(s.ok(), "cpu executor: backward failed: {}", s.message());
    return t;
  }

 private:
  int threads_;
  bool thread_cpu_time_;
  bool forward_only_;
  FusedBatch fused_;
  OptimizerConfig optimizer_;
  std::vector<std::unique_ptr<HugeBuffer>> weights_;  // and optimizer state
  std::unique_ptr<HugeBuffer> output_, grad_;
  TbeWorkspace workspace_;
};

class CpuExecutor : public Executor {
 public:
  CpuExecutor(int threads, bool thread_cpu_time)
      : threads_(threads), thread_cpu_time_(thread_cpu_time) {}
  std::string name() const override { return cpu_executor_name(threads_, thread_cpu_time_); }
  std::unique_ptr<PreparedShard> prepare(const ShardInput& shard) override {
    return std::make_unique<CpuShard>(shard, threads_, thread_cpu_time_);
  }
  double copy_gbps() override { return 2 * host_memcpy_gb_per_s(kCopyBytes, kCopyRuns); }

 private:
  int threads_;
  bool thread_cpu_time_;
};

}  // namespace

double host_memcpy_gb_per_s(int64_t bytes, int runs) {
  ES_CHECK(bytes > 0 && runs >= 1, "host_memcpy_gb_per_s: bytes {} and runs {} must be > 0", bytes,
           runs);
  HugeBuffer from(bytes), to(bytes);
  std::memset(from.data(), 1, bytes);  // fault the pages in before timing
  std::memset(to.data(), 2, bytes);
  std::vector<double> gb_per_s;
  for (int run = -1; run < runs; ++run) {  // run -1: warm-up
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run >= 0) gb_per_s.push_back(static_cast<double>(bytes) / (s * 1e9));
  }
  return median(gb_per_s);
}

std::string cpu_executor_name(int threads, bool thread_cpu_time) {
  return fmt::format("cpu ({} thread{}{})", threads, threads == 1 ? "" : "s",
                     thread_cpu_time ? ", thread CPU time" : "");
}

std::unique_ptr<Executor> make_cpu_executor(const ExecutorOptions& options) {
  ES_CHECK(options.threads >= 1, "cpu executor: threads is {}, must be >= 1", options.threads);
  ES_CHECK(!options.thread_cpu_time || options.threads == 1,
           "cpu executor: thread CPU time counts the calling thread only; it needs 1 thread, not "
           "{}",
           options.threads);
  return std::make_unique<CpuExecutor>(options.threads, options.thread_cpu_time);
}

}  // namespace embshard
