// What a cost model predicts for a plan: per-device memory, compute, forward
// and backward communication, and the plan's cost (the slowest device).
//
//   delay_d = (compute_d + bwd_d) - min over devices of (compute_p + bwd_p)
//   total_d = compute_d + fwd_d(dim sums, delays) + bwd_d(dim sums)
//   cost    = max over devices of total_d
//
// The forward all-to-all waits for stragglers, hence the delays; the backward
// all-to-all does not depend on them (NeuroShard's communication models).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "embshard/cost/cost_model.h"
#include "embshard/plan/plan.h"

namespace embshard {

// Registers the pieces of a task's tables with a cost model, once each, and
// hands back their ids. A piece is a column range (any offset: the cost does
// not depend on which columns) times a row range. Where the task has the
// trace (PlanTask::piece_stats), a row piece's or a replica's features are
// measured on its own lookups; else a row piece keeps its table's reuse
// histograms and scales the pooling factor by its share of the lookups
// (PlanTask::lookup_share), and a replica by its 1/N slice of the batch.
class ShardCosts {
 public:
  ShardCosts(const PlanTask& task, const CostModel& model);

  int piece_id(int table, int cols) { return shard_id(Shard{table, 0, cols, 0, task_.tables[table].rows, 0, false}); }
  int shard_id(const Shard& s);
  // Fused cost of one piece alone (cached).
  double single_ms(int id);

  const CostModel& model() const { return model_; }
  ComputeModel& compute() const { return *model_.compute; }
  const CommModel& comm() const { return *model_.comm; }
  const PlanTask& task() const { return task_; }

 private:
  struct Key {
    int table, cols, replica;
    int64_t row_offset, rows;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  const PlanTask& task_;
  CostModel model_;
  std::unordered_map<Key, int, KeyHash> ids_;
  std::vector<double> single_ms_;  // by id; < 0 until computed
};

// The features a cost model gets for a piece of `table`: `cols` columns,
// `rows` rows, serving `lookup_share` of its lookups.
TableFeatures piece_features(const TableSpec& table, int cols, int64_t rows,
                             double lookup_share);
// ... for a shard of a task (its share of the lookups, its source in the
// workload for the measured model).
TableFeatures shard_features(const PlanTask& task, const Shard& s);

// Whether a shard is a row piece (fewer rows than its table, not a replica).
inline bool is_row_piece(const PlanTask& task, const Shard& s) {
  return !s.replica && s.rows < task.tables[s.table].rows;
}
// What a shard adds to the collectives beyond the pooled all-to-all: a row
// piece its columns (reduce-scatter / all-gather) and its lookups' indices
// (index all-to-all), a replica its table's gradient (all-reduce, counted once,
// by the copy on device 0). `load` must be reset to the task's devices.
void add_collective_load(const PlanTask& task, const Shard& s, CollectiveLoad& load);

struct DeviceCosts {
  int64_t memory_bytes = 0;
  double compute_ms = 0;
  double fwd_comm_ms = 0;
  double bwd_comm_ms = 0;
  double dim_sum = 0;
  int num_shards = 0;
  // What TorchRec's stats table shows per rank: the lookup indices the
  // device's shards receive (8 bytes each) and the pooled embeddings it sends
  // forward (global batch x its dim sum x 4 bytes), per iteration.
  double input_bytes = 0, output_bytes = 0;
  double total_ms() const { return compute_ms + fwd_comm_ms + bwd_comm_ms; }
};

struct PlanPrediction {
  std::vector<DeviceCosts> devices;
  double cost_ms = 0;       // the critical device's total
  int critical_device = 0;
  double imbalance = 0;     // max total / mean total (1: perfectly balanced)
  CollectiveLoad collectives;  // row-wise and data-parallel traffic (empty: none)
};

// Communication and totals from per-device compute and dim sums (filled in
// `devices`) and the collectives; the collectives' backward ms count in the
// delays (they precede the next forward), their forward ms in the forward.
void finish_prediction(const CommModel& comm, PlanPrediction& p);

PlanPrediction predict_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs);

}  // namespace embshard
