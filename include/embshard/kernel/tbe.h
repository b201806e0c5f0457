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
//   Adam (step t >= 1): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//                      W -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// Per-sample weights are per index (as in torch) and only with sum pooling.
//
// Data types (workload/data_type.h): fp16 and bf16 tables are read into fp32
// accumulators and their rows updated in fp32 (optimizer state is fp32), then
// stored rounded to nearest even or, as an option, stochastically
// (kernel/precision.h). int8 and int4 tables are forward only: the backward
// refuses them.
//
// The kernels never throw: they return a Status. An index outside [0, rows)
// is reported (table, position, value) and nothing is written for that call's
// update. `tbe_*_ref` are the scalar reference implementations the optimized
// kernels are tested against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/workload/data_type.h"

namespace embshard {

enum class PoolingMode { kSum, kMean };
enum class OptimizerType { kSgd, kRowWiseAdagrad, kAdam };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kSgd;
  float learning_rate = 0.01f;
  float eps = 1e-8f;                   // row-wise Adagrad and Adam
  float beta1 = 0.9f, beta2 = 0.999f;  // Adam
  int64_t step = 1;  // Adam's bias correction (from 1); stochastic rounding's draw
  // fp16 and bf16 tables: round updated weights stochastically (seeded) instead
  // of to nearest even.
  bool stochastic_rounding = false;
  uint64_t seed = 0;
};

// One table of a device's shard. Pointers are borrowed, not owned.
struct TableBatch {
  DataType type = DataType::kFp32;
  float* weights = nullptr;  // fp32: [rows, dim], row-major
  // Other types: rows of data_type_row_bytes(type, dim) bytes each.
  void* packed = nullptr;
  float* momentum = nullptr;        // [rows]; row-wise Adagrad only
  float* exp_avg = nullptr;         // [rows, dim]; Adam only
  float* exp_avg_sq = nullptr;      // [rows, dim]; Adam only
  int64_t rows = 0;
  int dim = 0;                      // 1..1024

  // Where row r is stored and how many bytes a row takes.
  int64_t row_bytes() const { return data_type_row_bytes(type, dim); }
  const uint8_t* row_data(int64_t r) const {
    return type == DataType::kFp32 ? reinterpret_cast<const uint8_t*>(weights + r * dim)
                                   : static_cast<const uint8_t*>(packed) + r * row_bytes();
  }
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
