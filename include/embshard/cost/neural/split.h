// Which measured records a neural model trains, validates and is tested on.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "embshard/cost/cost_data.h"

namespace embshard {

// Which records of a compute file go where. Tables are held out by pool id:
// records made only of held-out tables form `unseen`; records mixing both are
// dropped (they would leak held-out tables into no split cleanly).
struct ComputeSplit {
  std::vector<int> train, val, test, unseen;
  std::vector<int> holdout_pool_ids;
  int64_t dropped_mixed = 0;
};
ComputeSplit split_compute_records(const ComputeData& data, uint64_t seed, double holdout_tables,
                                   double val_share, double test_share);
// Records of comm files split by sample (per file, seeded).
struct CommSplit {
  std::vector<std::pair<int, int>> train, val, test;  // (file, record)
};
CommSplit split_comm_records(const std::vector<CommData>& files, uint64_t seed, double val_share,
                             double test_share);

}  // namespace embshard
