// The CUDA executor: CudaTbe (kernel/tbe_cuda.h) behind the Executor
// interface, timed with CUDA events.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embshard/kernel/executor.h"
#include "embshard/kernel/tbe_cuda.h"
#include "embshard/util/error.h"
#include "kernel/executor_common.h"

namespace embshard {
namespace {

class CudaShard : public PreparedShard {
 public:
  CudaShard(const ShardInput& in, int device) {
    // Weights are filled on the host and uploaded once; the host copies go
    // when the shard is on the GPU.
    ES_CHECK(!in.forward_only,
             "cuda executor: forward-only (inference) shards run on the cpu executor only");
    std::vector<std::vector<float>> weights(in.tables.size()), momentum(in.tables.size());
    FusedBatch fused;
    fused.batch_size = in.batch_size;
    fused.pooling = in.pooling;
    for (size_t i = 0; i < in.tables.size(); ++i) {
      const ShardTableInput& t = in.tables[i];
      check_shard_table(t, i, in.forward_only, "cuda executor");
      ES_CHECK(t.data_type == DataType::kFp32,
               "cuda executor: table {} of the shard is {}: the CUDA kernels store fp32 tables "
               "only",
               i, data_type_name(t.data_type));
      weights[i].resize(static_cast<size_t>(t.rows) * t.dim);
      fill_pattern(weights[i].data(), weights[i].size(), i);
      momentum[i].assign(static_cast<size_t>(t.rows), 0.0f);
      fused.tables.push_back(table_batch(t, weights[i].data(), momentum[i].data()));
    }
    OptimizerConfig optimizer;
    optimizer.type = in.optimizer;
    tbe_ = std::make_unique<CudaTbe>(fused, optimizer, device);
    ES_CHECK(tbe_->forward_status().ok(), "cuda executor: {}", tbe_->forward_status().message());
    ES_CHECK(tbe_->backward_status().ok(), "cuda executor: {}",
             tbe_->backward_status().message());
    std::vector<float> grad(static_cast<size_t>(std::max<int64_t>(1, tbe_->output_size())));
    fill_pattern(grad.data(), grad.size(), 7);
    tbe_->set_grad_output(grad.data());
  }

  StepTiming step() override { return tbe_->time_step(); }

 private:
  std::unique_ptr<CudaTbe> tbe_;
};

class CudaExecutor : public Executor {
 public:
  explicit CudaExecutor(int device) : device_(device), name_(cuda_device_name(device)) {}
  std::string name() const override { return fmt::format("cuda ({})", name_); }
  std::unique_ptr<PreparedShard> prepare(const ShardInput& shard) override {
    return std::make_unique<CudaShard>(shard, device_);
  }
  double copy_gbps() override { return cuda_d2d_copy_gb_per_s(kCopyBytes, kCopyRuns); }

 private:
  int device_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const ExecutorOptions& options) {
  std::string why;
  ES_CHECK(cuda_device_available(&why), "executor 'cuda': no usable GPU here: {}", why);
  return std::make_unique<CudaExecutor>(options.device);
}

}  // namespace embshard
