// The neural cost models' inputs: per-table compute features and per-device
// communication features, named (the manifest records the names and loading
// checks them, so that a model never meets features of another version).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embshard/cost/compute_model.h"

namespace embshard {

// Feature names in order: what the manifest records and load checks.
const std::vector<std::string>& compute_feature_names();
const std::vector<std::string>& comm_fwd_feature_names();
const std::vector<std::string>& comm_bwd_feature_names();  // a prefix of the fwd names

// The reuse bin a compute network merges the histograms' tail into (its
// manifest's reuse_tail_bin): bins above it read 0 and it holds their sum, so
// that rows accessed more often than bin `reuse_tail_bin`'s lower bound all
// count alike. The last bin (kReuseBins - 1): nothing merged, as networks
// whose manifest names no reuse_tail_bin read them.
constexpr int kNoReuseTail = kReuseBins - 1;
constexpr int kDefaultReuseTailBin = 8;  // rows accessed more than 128 times in a batch

// Raw (unnormalised) features of one table at `batch` bags; `out` gets
// compute_feature_names().size() floats, the reuse histograms' tail merged
// into bin `reuse_tail_bin` (1 .. kNoReuseTail). Error if the table is invalid.
void compute_raw_features(const TableFeatures& table, int64_t batch, float* out,
                          int reuse_tail_bin);
// Raw features of `device`; `out` gets comm_fwd_feature_names().size() floats
// (the bwd model reads the first comm_bwd_feature_names().size()).
void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out);

}  // namespace embshard
