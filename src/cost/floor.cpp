#include "embshard/cost/floor.h"

#include <algorithm>

#include "embshard/measure/alltoall.h"

namespace embshard {

WorkBytes fused_work_bytes(const TableFeatures& piece, int64_t batch, DataType type,
                           int64_t state_bytes_per_row) {
  const double lookups = static_cast<double>(batch) * piece.pooling_factor;
  const double distinct = estimate_distinct_rows(piece, lookups);
  const double samples = static_cast<double>(batch) / std::max(1, piece.batch_slices);
  WorkBytes b;
  b.rows = 2.0 * distinct * static_cast<double>(data_type_row_bytes(type, piece.dim));
  b.state = 2.0 * distinct * static_cast<double>(state_bytes_per_row);
  b.outputs = 2.0 * samples * piece.dim * 4.0;  // fp32 pooled outputs and their gradients
  return b;
}

double floor_ms(double bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e6) : 0.0; }

double alltoall_floor_bytes(double dim_sum, double total_dim, int devices, int64_t batch) {
  if (devices <= 1) return 0.0;
  return alltoall_bytes(dim_sum, total_dim, devices, static_cast<double>(batch)).busiest();
}

FloorCheck check_floor(double ms, double floor) {
  if (floor <= 0) return FloorCheck::kWithin;
  if (ms < floor) return FloorCheck::kUnder;
  if (ms > kFarOverFloor * floor) return FloorCheck::kFarOver;
  return FloorCheck::kWithin;
}

}  // namespace embshard
