// The one shard timer: a workload's shards timed on an executor with the
// workload's real traces. bench compute, the measured model, eval and the
// ranking check all measure through it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "embshard/kernel/executor.h"
#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"

namespace embshard {

// One table of a shard: which workload table, at which dim.
struct ShardTable {
  int table = 0;
  int dim = 0;
};

struct ShardTiming {
  double fwd_ms = 0, bwd_ms = 0, total_ms = 0;  // medians over the timed steps
};

struct ShardTimerOptions {
  int warmup = 5;    // untimed steps
  int repeats = 10;  // timed steps (medians)
  PoolingMode pooling = PoolingMode::kSum;
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
};

class ShardTimer {
 public:
  // `workload` must have a trace; both it and `executor` must outlive the timer.
  ShardTimer(const Workload& workload, Executor& executor, ShardTimerOptions options);
  ~ShardTimer();

  // Prepares the shard on the executor and times it. Error naming the table
  // when a table id or dim is invalid.
  ShardTiming time(const std::vector<ShardTable>& shard);

  const Workload& workload() const { return workload_; }
  Executor& executor() { return executor_; }

 private:
  const TableTrace& trace(int table);

  const Workload& workload_;
  Executor& executor_;
  ShardTimerOptions options_;
  std::unique_ptr<TraceReader> reader_;
  // Traces stay in memory across shards while they fit a budget.
  std::map<int, TableTrace> traces_;
  uint64_t trace_bytes_ = 0;
};

}  // namespace embshard
