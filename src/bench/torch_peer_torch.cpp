// The libtorch peer of `bench kernel`: one torch::embedding_bag per table
// (sparse gradient), outputs concatenated into [B, sum of dims], autograd
// backward, and an SGD step p -= lr * grad on the sparse gradients.
#include <torch/torch.h>

#include "embshard/bench/kernel_bench.h"

namespace embshard {
namespace {

class TorchKernelPeer : public KernelPeer {
 public:
  explicit TorchKernelPeer(int num_threads) : num_threads_(num_threads) {}

  std::string name() const override { return "libtorch"; }
  std::string about() const override {
    return "ATen's embedding_bag, one call per table, sparse gradients, SGD step by add_; in "
           "this process, timed by its clock";
  }

  void prepare(const FusedBatch& batch, const float* grad_output,
               const KernelBenchOptimizers& optimizers) override {
    torch::set_num_threads(num_threads_);
    grad_output_ = grad_output;
    sgd_learning_rate_ = optimizers.sgd.learning_rate;
    batch_size_ = batch.batch_size;
    total_dim_ = batch.total_dim();
    mode_ = batch.pooling == PoolingMode::kMean ? 1 : 0;
    tables_.clear();
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    for (const TableBatch& t : batch.tables) {
      Table tt;
      // Shares the benchmark's memory: both implementations gather the same
      // DRAM-resident rows.
      tt.weight = torch::from_blob(t.weights, {t.rows, t.dim}, f32).requires_grad_(true);
      const int64_t nnz = t.offsets[batch.batch_size];
      tt.indices = torch::from_blob(const_cast<int64_t*>(t.indices), {nnz}, i64);
      tt.offsets = torch::from_blob(const_cast<int64_t*>(t.offsets), {batch.batch_size + 1}, i64);
      if (t.per_sample_weights != nullptr) {
        tt.per_sample_weights =
            torch::from_blob(const_cast<float*>(t.per_sample_weights), {nnz}, f32);
      }
      tables_.push_back(std::move(tt));
    }
  }

  // Forward and SGD only (has()'s default): the harness times the calls.
  double run(KernelOp op) override {
    if (op == KernelOp::kForward) {
      forward();
    } else {
      forward_backward_sgd();
    }
    return -1.0;
  }

  std::vector<float> forward_output() override {
    torch::NoGradGuard no_grad;
    torch::Tensor out = pooled().contiguous();
    return {out.data_ptr<float>(), out.data_ptr<float>() + out.numel()};
  }

 private:
  struct Table {
    torch::Tensor weight, indices, offsets, per_sample_weights;
  };

  void forward() {
    torch::NoGradGuard no_grad;
    torch::Tensor out = pooled();
    sink_ += out.size(0);
  }

  void forward_backward_sgd() {
    torch::Tensor out = pooled();
    torch::Tensor grad = torch::from_blob(const_cast<float*>(grad_output_),
                                          {batch_size_, total_dim_}, torch::kFloat32);
    out.backward(grad);
    torch::NoGradGuard no_grad;
    for (Table& t : tables_) {
      t.weight.add_(t.weight.grad(), -sgd_learning_rate_);
      t.weight.mutable_grad() = torch::Tensor();
    }
  }

  torch::Tensor pooled() {
    std::vector<torch::Tensor> parts;
    parts.reserve(tables_.size());
    for (Table& t : tables_) {
      parts.push_back(std::get<0>(torch::embedding_bag(
          t.weight, t.indices, t.offsets, /*scale_grad_by_freq=*/false, mode_,
          /*sparse=*/true, t.per_sample_weights, /*include_last_offset=*/true)));
    }
    return parts.size() == 1 ? parts[0] : torch::cat(parts, 1);
  }

  int num_threads_;
  const float* grad_output_ = nullptr;
  float sgd_learning_rate_ = 0.0f;
  int64_t batch_size_ = 0, total_dim_ = 0;
  int64_t mode_ = 0;
  std::vector<Table> tables_;
  int64_t sink_ = 0;
};

}  // namespace

std::unique_ptr<KernelPeer> make_torch_kernel_peer(int num_threads) {
  return std::make_unique<TorchKernelPeer>(num_threads);
}

}  // namespace embshard
