// Scalar reference TBE kernels: the plainest correct code, one bag and one
// element at a time, against which the optimized kernels are tested.
#include <cmath>
#include <algorithm>
#include <map>
#include <vector>

#include "embshard/kernel/precision.h"
#include "kernel/tbe_common.h"

namespace embshard {
namespace {

float occurrence_scale(const FusedBatch& batch, const TableBatch& t, int64_t bag, int64_t i) {
  if (batch.pooling == PoolingMode::kMean) {
    return detail::mean_scale(t.offsets[bag + 1] - t.offsets[bag]);
  }
  return t.per_sample_weights != nullptr ? t.per_sample_weights[i] : 1.0f;
}

// Row `row` as fp32 values, whatever the table stores.
std::vector<float> read_row(const TableBatch& t, int64_t row) {
  std::vector<float> values(t.dim);
  unpack_rows(t.type, t.row_data(row), 1, t.dim, values.data());
  return values;
}

void apply_update(const TableBatch& t, int table, int64_t row, const std::vector<float>& grad,
                  const OptimizerConfig& opt) {
  std::vector<float> w = read_row(t, row);
  if (opt.type == OptimizerType::kSgd) {
    for (int d = 0; d < t.dim; ++d) w[d] -= opt.learning_rate * grad[d];
  } else if (opt.type == OptimizerType::kRowWiseAdagrad) {
    float sum_sq = 0.0f;
    for (int d = 0; d < t.dim; ++d) sum_sq += grad[d] * grad[d];
    t.momentum[row] += sum_sq / static_cast<float>(t.dim);
    const float step = opt.learning_rate / (std::sqrt(t.momentum[row]) + opt.eps);
    for (int d = 0; d < t.dim; ++d) w[d] -= step * grad[d];
  } else {
    const detail::AdamStep adam(opt);
    for (int d = 0; d < t.dim; ++d) {
      adam.apply(grad[d], w[d], t.exp_avg[row * t.dim + d], t.exp_avg_sq[row * t.dim + d]);
    }
  }
  if (t.type == DataType::kFp32) {
    std::copy(w.begin(), w.end(), t.weights + row * t.dim);
    return;
  }
  uint16_t* h = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(t.packed) + row * t.row_bytes());
  for (int d = 0; d < t.dim; ++d) {
    const uint32_t random =
        opt.stochastic_rounding ? rounding_random(opt.seed, opt.step, table, row, d) : 0;
    h[d] = round_half(t.type, w[d], opt.stochastic_rounding, random);
  }
}

}  // namespace

Status tbe_forward_ref(const FusedBatch& batch, float* output) {
  Status s = detail::check_arguments(batch, nullptr);
  if (!s.ok()) return s;
  s = detail::check_indices(batch);
  if (!s.ok()) return s;
  const int64_t total_dim = batch.total_dim();
  for (int t = 0; t < static_cast<int>(batch.tables.size()); ++t) {
    const TableBatch& tb = batch.tables[t];
    const int64_t column = batch.column_offset(t);
    for (int64_t b = 0; b < batch.batch_size; ++b) {
      float* out = output + b * total_dim + column;
      for (int d = 0; d < tb.dim; ++d) out[d] = 0.0f;
      for (int64_t i = tb.offsets[b]; i < tb.offsets[b + 1]; ++i) {
        const std::vector<float> row = read_row(tb, tb.indices[i]);
        const float w = tb.per_sample_weights != nullptr ? tb.per_sample_weights[i] : 1.0f;
        for (int d = 0; d < tb.dim; ++d) out[d] += w * row[d];
      }
      if (batch.pooling == PoolingMode::kMean) {
        const float scale = detail::mean_scale(tb.offsets[b + 1] - tb.offsets[b]);
        for (int d = 0; d < tb.dim; ++d) out[d] *= scale;
      }
    }
  }
  return {};
}

Status tbe_backward_update_ref(const FusedBatch& batch, const float* grad_output,
                               const OptimizerConfig& optimizer) {
  Status s = detail::check_arguments(batch, &optimizer);
  if (!s.ok()) return s;
  s = detail::check_indices(batch);  // before any write: a bad call updates nothing
  if (!s.ok()) return s;
  const int64_t total_dim = batch.total_dim();
  for (int t = 0; t < static_cast<int>(batch.tables.size()); ++t) {
    const TableBatch& tb = batch.tables[t];
    const int64_t column = batch.column_offset(t);
    // Ordered by row; each row's gradient summed in position order.
    std::map<int64_t, std::vector<float>> grads;
    for (int64_t b = 0; b < batch.batch_size; ++b) {
      const float* g = grad_output + b * total_dim + column;
      for (int64_t i = tb.offsets[b]; i < tb.offsets[b + 1]; ++i) {
        std::vector<float>& acc = grads[tb.indices[i]];
        if (acc.empty()) acc.assign(tb.dim, 0.0f);
        const float scale = occurrence_scale(batch, tb, b, i);
        for (int d = 0; d < tb.dim; ++d) acc[d] += scale * g[d];
      }
    }
    for (const auto& [row, grad] : grads) apply_update(tb, t, row, grad, optimizer);
  }
  return {};
}

}  // namespace embshard
