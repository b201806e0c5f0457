// The CPU executor: the fused kernels of tbe.h on huge-page buffers.
#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "embshard/util/huge_buffer.h"
#include "kernel/executor_common.h"

namespace embshard {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class CpuShard : public PreparedShard {
 public:
  CpuShard(const ShardInput& in, int threads) : threads_(threads) {
    fused_.batch_size = in.batch_size;
    fused_.pooling = in.pooling;
    optimizer_.type = in.optimizer;
    for (size_t i = 0; i < in.tables.size(); ++i) {
      const ShardTableInput& t = in.tables[i];
      ES_CHECK(t.rows > 0 && t.dim >= 1 && t.dim <= 1024 && t.offsets && t.indices,
               "cpu executor: table {} of the shard has rows {}, dim {} (must be > 0 and 1..1024) "
               "or no trace",
               i, t.rows, t.dim);
      const size_t count = static_cast<size_t>(t.rows) * t.dim;
      weights_.push_back(std::make_unique<HugeBuffer>(count * sizeof(float)));
      fill_pattern(weights_.back()->floats(), count, i);
      momentum_.push_back(std::make_unique<HugeBuffer>(t.rows * int64_t{sizeof(float)}));
      std::fill_n(momentum_.back()->floats(), t.rows, 0.0f);
      TableBatch b;
      b.weights = weights_.back()->floats();
      b.momentum = momentum_.back()->floats();
      b.rows = t.rows;
      b.dim = t.dim;
      b.offsets = t.offsets;
      b.indices = t.indices;
      fused_.tables.push_back(b);
    }
    const size_t outputs = static_cast<size_t>(in.batch_size * fused_.total_dim());
    output_ = std::make_unique<HugeBuffer>(std::max<size_t>(1, outputs) * sizeof(float));
    grad_ = std::make_unique<HugeBuffer>(std::max<size_t>(1, outputs) * sizeof(float));
    fill_pattern(grad_->floats(), outputs, 7);
  }

  StepTiming step() override {
    StepTiming t;
    auto start = Clock::now();
    Status s = tbe_forward(fused_, output_->floats(), threads_);
    t.fwd_ms = ms_since(start);
    ES_CHECK(s.ok(), "cpu executor: forward failed: {}", s.message());
    start = Clock::now();
    s = tbe_backward_update(fused_, grad_->floats(), optimizer_, threads_, workspace_);
    t.bwd_ms = ms_since(start);
    ES_CHECK(s.ok(), "cpu executor: backward failed: {}", s.message());
    return t;
  }

 private:
  int threads_;
  FusedBatch fused_;
  OptimizerConfig optimizer_;
  std::vector<std::unique_ptr<HugeBuffer>> weights_, momentum_;
  std::unique_ptr<HugeBuffer> output_, grad_;
  TbeWorkspace workspace_;
};

class CpuExecutor : public Executor {
 public:
  explicit CpuExecutor(int threads) : threads_(threads) {}
  std::string name() const override {
    return fmt::format("cpu ({} thread{})", threads_, threads_ == 1 ? "" : "s");
  }
  std::unique_ptr<PreparedShard> prepare(const ShardInput& shard) override {
    return std::make_unique<CpuShard>(shard, threads_);
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const ExecutorOptions& options) {
  ES_CHECK(options.threads >= 1, "cpu executor: threads is {}, must be >= 1", options.threads);
  return std::make_unique<CpuExecutor>(options.threads);
}

}  // namespace embshard
