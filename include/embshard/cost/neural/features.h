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

// Communication feature names in order: what the manifest records and load checks.
const std::vector<std::string>& comm_fwd_feature_names();
const std::vector<std::string>& comm_bwd_feature_names();  // a prefix of the fwd names

constexpr int kNoReuseTail = kReuseBins - 1;
constexpr int kDefaultReuseTailBin = 8;  // rows accessed more than 128 times in a batch

// What a compute network reads (its manifest records it; loading checks it):
//   reuse_tail_bin: the reuse bin the histograms' tail is merged into (bins
//     above it read 0 and it holds their sum, so that rows accessed more often
//     than its lower bound count alike); kNoReuseTail: nothing merged, as
//     networks whose manifest names no reuse_tail_bin read them;
//   data_type: the last feature, log bytes per stored weight, and the weight
//     bytes counted by type; networks trained before it read every table as
//     fp32 (their manifests name one feature fewer).
struct ComputeFeatureSet {
  int reuse_tail_bin = kNoReuseTail;
  bool data_type = true;
  // The names in order.
  std::vector<std::string> names() const;
  int size() const;
};

// Raw (unnormalised) features of one table at `batch` bags; `out` gets
// set.size() floats. Error if the table is invalid or the set's tail bin is
// outside 1 .. kNoReuseTail.
void compute_raw_features(const TableFeatures& table, int64_t batch, float* out,
                          const ComputeFeatureSet& set);
// Raw features of `device`; `out` gets comm_fwd_feature_names().size() floats
// (the bwd model reads the first comm_bwd_feature_names().size()).
void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out);

}  // namespace embshard
