// The fused table-batched embedding-bag operator (CPU).
//
// One forward call pools the bags of every table placed on a device into one
// row-major output [batch_size, sum of dims] (table t occupies the columns
// [column_offset(t), column_offset(t) + dim_t)). One backward call takes the
// gradient of that output and applies an exact optimizer update: every
// distinct row of every table is updated exactly once from the sum of the
// gradients of all its occurrences; no dense gradient is materialised.
//
// Semantics (match torch.nn.functional.embedding_bag + autograd):
//   sum:  out[b] = sum_{i in bag b} w_i * W[idx_i]      (w_i = 1 without weights)
//   mean: out[b] = (1/|bag b|) sum_{i in bag b} W[idx_i] (empty bag -> zeros)
//   grad of W[r] = sum over occurrences i of r: w_i * g[bag(i)]  (sum)
//                                       or  g[bag(i)] / |bag(i)|  (mean)
//   SGD:               W[r] -= lr * grad_r
//   row-wise Adagrad:  m[r] += mean_d(grad_r[d]^2); W[r] -= lr * grad_r / (sqrt(m[r]) + eps)
// Per-sample weights are per index (as in torch) and only with sum pooling.
//
// The kernels never throw: they return a Status. An index outside [0, rows)
// is reported (table, position, value) and nothing is written for that call's
// update. `tbe_*_ref` are the scalar reference implementations the optimized
// kernels are tested against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embshard {

enum class PoolingMode { kSum, kMean };
enum class OptimizerType { kSgd, kRowWiseAdagrad };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kSgd;
  float learning_rate = 0.01f;
  float eps = 1e-8f;  // row-wise Adagrad only
};

// One table of a device's shard. Pointers are borrowed, not owned.
struct TableBatch {
  float* weights = nullptr;         // [rows, dim], row-major
  float* momentum = nullptr;        // [rows]; row-wise Adagrad only
  int64_t rows = 0;
  int dim = 0;                      // 1..1024
  const int64_t* offsets = nullptr;  // [batch_size + 1], local, offsets[0] == 0
  const int64_t* indices = nullptr;  // [offsets[batch_size]]
  const float* per_sample_weights = nullptr;  // [offsets[batch_size]] or null
};

struct FusedBatch {
  int64_t batch_size = 0;
  PoolingMode pooling = PoolingMode::kSum;
  std::vector<TableBatch> tables;

  int64_t total_dim() const;
  int64_t column_offset(size_t table) const;
};

struct Status {
  enum class Code { kOk, kIndexOutOfRange, kInvalidArgument };
  Code code = Code::kOk;
  int table = -1;
  int64_t position = -1;  // position in the table's indices
  int64_t value = 0;      // the offending index or argument
  std::string detail;

  bool ok() const { return code == Code::kOk; }
  std::string message() const;
};

// Scratch memory reused across backward calls (sorting buffers, per-thread
// accumulators), so that a timed loop does not page-fault fresh allocations.
class TbeWorkspace {
 public:
  TbeWorkspace();
  ~TbeWorkspace();
  TbeWorkspace(const TbeWorkspace&) = delete;
  TbeWorkspace& operator=(const TbeWorkspace&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Impl* impl_;
};

// `output` is [batch_size, total_dim]; it is fully overwritten.
Status tbe_forward(const FusedBatch& batch, float* output, int num_threads);
Status tbe_backward_update(const FusedBatch& batch, const float* grad_output,
                           const OptimizerConfig& optimizer, int num_threads,
                           TbeWorkspace& workspace);

Status tbe_forward_ref(const FusedBatch& batch, float* output);
Status tbe_backward_update_ref(const FusedBatch& batch, const float* grad_output,
                               const OptimizerConfig& optimizer);

}  // namespace embshard
