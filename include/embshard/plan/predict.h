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
// not depend on which columns) times a row range; row pieces and replicas
// scale the pooling factor by the share of lookups they serve, assuming
// lookups spread evenly over rows and samples.
class ShardCosts {
 public:
  ShardCosts(const PlanTask& task, const CostModel& model);

  int piece_id(int table, int cols) { return shard_id(table, cols, task_.tables[table].rows, 1.0); }
  int shard_id(const Shard& s);
  // Fused cost of one piece alone (cached).
  double single_ms(int id);

  const CostModel& model() const { return model_; }
  ComputeModel& compute() const { return *model_.compute; }
  const CommModel& comm() const { return *model_.comm; }
  const PlanTask& task() const { return task_; }

 private:
  int shard_id(int table, int cols, int64_t rows, double lookup_share);

  const PlanTask& task_;
  CostModel model_;
  std::unordered_map<uint64_t, int> ids_;
  std::vector<double> single_ms_;  // by id; < 0 until computed
};

// The features a cost model gets for a piece of `table`: `cols` columns,
// `rows` rows, serving `lookup_share` of its lookups.
TableFeatures piece_features(const TableSpec& table, int cols, int64_t rows,
                             double lookup_share);

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
};

// Communication and totals from per-device compute and dim sums (filled in
// `devices`); scratch-free so the search can call it in its loop.
void finish_prediction(const CommModel& comm, PlanPrediction& p);

PlanPrediction predict_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs);

}  // namespace embshard
