// The neural models' features, named.
#include "embshard/cost/neural/features.h"

#include <algorithm>
#include <cmath>

#include "embshard/measure/alltoall.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

constexpr int kComputeScalarFeatures = 9;

std::vector<std::string> make_compute_names() {
  std::vector<std::string> names = {"log_rows",           "log_dim",
                                    "log1p_pooling",      "log1p_dim_x_pooling",
                                    "log1p_lookups",      "log1p_unique_rows_est",
                                    "log1p_dim_x_unique", "log_weight_bytes",
                                    "unique_over_rows"};
  for (int k = 0; k < kReuseBins; ++k) names.push_back("row_reuse_" + std::to_string(k));
  for (int k = 0; k < kReuseBins; ++k) names.push_back("lookup_reuse_" + std::to_string(k));
  names.push_back("log_bytes_per_weight");
  return names;
}

const std::vector<std::string>& compute_names() {
  static const std::vector<std::string> names = make_compute_names();
  return names;
}

}  // namespace

std::vector<std::string> ComputeFeatureSet::names() const {
  const std::vector<std::string>& all = compute_names();
  return {all.begin(), all.begin() + size()};
}

int ComputeFeatureSet::size() const {
  return static_cast<int>(compute_names().size()) - (data_type ? 0 : 1);
}

const std::vector<std::string>& comm_fwd_feature_names() {
  static const std::vector<std::string> names = {"log1p_own_dim_sum",
                                                 "log1p_others_dim_sum",
                                                 "log1p_others_max_dim_sum",
                                                 "log1p_others_mean_dim_sum",
                                                 "log1p_others_min_dim_sum",
                                                 "log_devices",
                                                 "log1p_send_mb",
                                                 "log1p_recv_mb",
                                                 "log1p_busiest_device_mb",
                                                 "own_delay_ms",
                                                 "wait_ms",
                                                 "max_delay_ms",
                                                 "log1p_wait_ms"};
  return names;
}

const std::vector<std::string>& comm_bwd_feature_names() {
  static const std::vector<std::string> names(comm_fwd_feature_names().begin(),
                                              comm_fwd_feature_names().begin() + 9);
  return names;
}

void compute_raw_features(const TableFeatures& t, int64_t batch, float* out,
                          const ComputeFeatureSet& set) {
  const int reuse_tail_bin = set.reuse_tail_bin;
  ES_CHECK(reuse_tail_bin >= 1 && reuse_tail_bin <= kNoReuseTail,
           "neural cost model: reuse tail bin {} (must be 1 .. {})", reuse_tail_bin, kNoReuseTail);
  ES_CHECK(t.rows > 0 && t.dim > 0 && std::isfinite(t.pooling_factor) && t.pooling_factor >= 0,
           "neural cost model: invalid table (rows {}, dim {}, pooling factor {})", t.rows, t.dim,
           t.pooling_factor);
  for (int k = 0; k < kReuseBins; ++k) {
    ES_CHECK(std::isfinite(t.row_reuse[k]) && std::isfinite(t.lookup_reuse[k]),
             "neural cost model: table (rows {}, dim {}) has a non-finite reuse share in bin {}",
             t.rows, t.dim, k);
  }
  const double unique = estimate_distinct_rows(t, static_cast<double>(batch) * t.pooling_factor);
  const double rows = static_cast<double>(t.rows), dim = t.dim;
  // Bytes of a stored row: by type where the network reads the type, else fp32.
  const double row_bytes = static_cast<double>(
      data_type_row_bytes(set.data_type ? t.data_type : DataType::kFp32, t.dim));
  const double scalars[kComputeScalarFeatures] = {
      std::log(rows),
      std::log(dim),
      std::log1p(t.pooling_factor),
      std::log1p(dim * t.pooling_factor),
      std::log1p(static_cast<double>(batch) * t.pooling_factor),
      std::log1p(unique),
      std::log1p(dim * unique),
      std::log(rows * row_bytes),
      unique / rows};
  for (int i = 0; i < kComputeScalarFeatures; ++i) out[i] = static_cast<float>(scalars[i]);
  float* const row = out + kComputeScalarFeatures;
  float* const lookup = row + kReuseBins;
  for (int k = 0; k < kReuseBins; ++k) {
    row[k] = static_cast<float>(t.row_reuse[k]);
    lookup[k] = static_cast<float>(t.lookup_reuse[k]);
  }
  for (int k = reuse_tail_bin + 1; k < kReuseBins; ++k) {
    row[reuse_tail_bin] += row[k];
    lookup[reuse_tail_bin] += lookup[k];
    row[k] = lookup[k] = 0;
  }
  if (set.data_type) out[set.size() - 1] = static_cast<float>(std::log(row_bytes / dim));
}

void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out) {
  const size_t n = dim_sums.size();
  ES_CHECK(n >= 1 && delays_ms.size() == n && device >= 0 && static_cast<size_t>(device) < n,
           "neural cost model: comm of device {} with {} dim sums and {} delays", device, n,
           delays_ms.size());
  double others_sum = 0, others_max = 0, others_min = n > 1 ? 1e300 : 0, max_delay = 0;
  for (size_t d = 0; d < n; ++d) {
    ES_CHECK(std::isfinite(dim_sums[d]) && dim_sums[d] >= 0 && std::isfinite(delays_ms[d]) &&
                 delays_ms[d] >= 0,
             "neural cost model: device {} has dim sum {} and delay {} ms (must be finite, >= 0)",
             d, dim_sums[d], delays_ms[d]);
    max_delay = std::max(max_delay, delays_ms[d]);
    if (d == static_cast<size_t>(device)) continue;
    others_sum += dim_sums[d];
    others_max = std::max(others_max, dim_sums[d]);
    others_min = std::min(others_min, dim_sums[d]);
  }
  // Bytes this device sends and receives (alltoall_bytes), and what the
  // busiest device moves in and out together.
  const double total = others_sum + dim_sums[device], devices = static_cast<double>(n);
  const AllToAllBytes mine = alltoall_bytes(dim_sums[device], total, devices, batch);
  double busiest_mb = 0;
  for (size_t d = 0; d < n; ++d) {
    const AllToAllBytes b = alltoall_bytes(dim_sums[d], total, devices, batch);
    busiest_mb = std::max(busiest_mb, (b.sent + b.received) / 1e6);
  }
  const double own = dim_sums[device], wait = max_delay - delays_ms[device];
  const double values[] = {std::log1p(own),
                           std::log1p(others_sum),
                           std::log1p(others_max),
                           std::log1p(n > 1 ? others_sum / (n - 1) : 0.0),
                           std::log1p(others_min),
                           std::log(static_cast<double>(n)),
                           std::log1p(mine.sent / 1e6),
                           std::log1p(mine.received / 1e6),
                           std::log1p(busiest_mb),
                           delays_ms[device],
                           wait,
                           max_delay,
                           std::log1p(wait)};
  static_assert(sizeof(values) / sizeof(values[0]) == 13);
  for (int i = 0; i < 13; ++i) out[i] = static_cast<float>(values[i]);
}

}  // namespace embshard
