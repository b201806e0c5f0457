// Internal helpers shared by the optimized and the reference TBE kernels:
// argument checks (everything except index values) and status builders, so
// that both kernels reject exactly the same inputs with the same status.
#pragma once

#include <cmath>
#include <cstdint>

#include "embshard/kernel/tbe.h"

namespace embshard::detail {

// Limits of the optimized backward's packed sort keys (row << 32 | position).
constexpr int64_t kMaxTableRows = int64_t{1} << 31;
constexpr int64_t kMaxTableIndices = int64_t{1} << 32;
constexpr int kMaxDim = 1024;

// Checks shapes, pointers, offsets (first is 0, non-decreasing) and the
// pooling/weights combination; `optimizer` is null for the forward.
// Index values are not checked here (kernels check them in their own pass).
Status check_arguments(const FusedBatch& batch, const OptimizerConfig* optimizer);

inline Status invalid_argument(int table, int64_t value, std::string detail) {
  Status s;
  s.code = Status::Code::kInvalidArgument;
  s.table = table;
  s.value = value;
  s.detail = std::move(detail);
  return s;
}

Status index_out_of_range(int table, int64_t position, int64_t value, int64_t rows);

// The first out-of-range index in table order, then position order (both
// kernels' order); with `lookups`, also the batch's number of lookups.
Status check_indices(const FusedBatch& batch, int64_t* lookups = nullptr);

inline bool index_in_range(int64_t index, int64_t rows) {
  // One unsigned compare catches negative indices too.
  return static_cast<uint64_t>(index) < static_cast<uint64_t>(rows);
}

// Scale of one occurrence's gradient: its per-sample weight (sum), 1/|bag|
// (mean) or 1. Both kernels use this exact expression so they round alike.
inline float mean_scale(int64_t bag_length) {
  return bag_length > 0 ? 1.0f / static_cast<float>(bag_length) : 0.0f;
}

inline void prefetch_bytes(const void* at, int64_t bytes) {
  const char* p = static_cast<const char*>(at);
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 3);
}

inline void prefetch_row(const float* row, int dim) { prefetch_bytes(row, int64_t{dim} * 4); }

inline void prefetch_bytes_for_write(const void* at, int64_t bytes) {
  const char* p = static_cast<const char*>(at);
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 1, 3);
}

// Adam's bias corrections 1 - beta^step, and one element's update. Both
// kernels use these exact expressions so they round alike.
struct AdamStep {
  float lr, beta1, beta2, eps, correction1, correction2;
  explicit AdamStep(const OptimizerConfig& o)
      : lr(o.learning_rate),
        beta1(o.beta1),
        beta2(o.beta2),
        eps(o.eps),
        correction1(1.0f - std::pow(o.beta1, static_cast<float>(o.step))),
        correction2(1.0f - std::pow(o.beta2, static_cast<float>(o.step))) {}
  void apply(float g, float& w, float& m, float& v) const {
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * (g * g);
    w -= lr * (m / correction1) / (std::sqrt(v / correction2) + eps);
  }
};

}  // namespace embshard::detail
