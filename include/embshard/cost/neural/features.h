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

// Raw (unnormalised) features of one table at `batch` bags; `out` gets
// compute_feature_names().size() floats. Error if the table is invalid.
void compute_raw_features(const TableFeatures& table, int64_t batch, float* out);
// Raw features of `device`; `out` gets comm_fwd_feature_names().size() floats
// (the bwd model reads the first comm_bwd_feature_names().size()).
void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out);

}  // namespace embshard
