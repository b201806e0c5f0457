// The placement-ranking check: does a cost model pick the truly fastest of a
// handful of feasible placements?
//
// For each task (random tables of a workload at random dims, a memory cap per
// device of `mem_headroom` x an even split), draw `placements` random feasible
// table-wise placements, predict each with the model under test and measure
// each for real: every device's fused forward + backward + update runs on the
// executor (the "measured" cost model). One process cannot run an
// all-to-all, so both sides take communication from the model under test:
// the check judges the model's ranking of compute, the part that differs
// between placements of the same tables. A task counts as a hit when the
// measured cost of the model's pick is within `tolerance` of the best
// measured cost.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "embshard/cost/cost_model.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct RankingOptions {
  int tasks = 200;
  int placements = 10;
  int devices = 4;
  int min_tables = 8, max_tables = 24;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  double mem_headroom = 1.3;
  // Tables heavier than this at their drawn dim are skipped: keeps the tasks
  // inside what the cost data covered (bench compute's --mem-cap per shard)
  // and the measurements quick.
  int64_t max_table_bytes = int64_t{32} << 20;
  double tolerance = 0.02;
  uint64_t seed = 0;
};

struct RankingTask {
  int tables = 0;
  std::vector<double> predicted_ms, measured_ms;  // per placement
  int pick = 0;       // argmin predicted
  int best = 0;       // argmin measured
  double regret = 0;  // measured[pick] / measured[best] - 1
};

struct RankingResult {
  std::vector<RankingTask> tasks;
  int hits = 0;
  double pick_within_tolerance_rate = 0;
  double mean_regret = 0;
};

// `measured` must be a "measured" ComputeModel over `workload`; progress goes
// to `reporter`.
RankingResult ranking_check(const CostModel& model, std::shared_ptr<ComputeModel> measured,
                            const Workload& workload, const RankingOptions& options,
                            Reporter& reporter);

}  // namespace embshard
