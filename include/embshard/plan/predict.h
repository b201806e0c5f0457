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
#include <limits>
#include <span>
#include <string>
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
// Its model's communication is the given one with the task's hosts
// (with_topology): what every search and prediction of the task prices.
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

// The features a cost model gets for a shard of a task (its share of the
// lookups, its source in the workload for the measured model).
TableFeatures shard_features(const PlanTask& task, const Shard& s);

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
  // Physical floors (cost/floor.h; 0 where the model set gives no bandwidth):
  // its shards' fused work bytes over the memory bandwidth, and the busier
  // direction of its pooled all-to-all, forward and backward, over the link's
  // (with hosts, or its host's over the inter-host link, whichever is more).
  double compute_floor_ms = 0, comm_floor_ms = 0;
  double total_ms() const { return compute_ms + fwd_comm_ms + bwd_comm_ms; }
};

struct PlanPrediction {
  std::vector<DeviceCosts> devices;
  double cost_ms = 0;       // the critical device's total
  int critical_device = 0;
  double imbalance = 0;     // max total / mean total (1: perfectly balanced)
  CollectiveLoad collectives;  // row-wise and data-parallel traffic (empty: none)
};

// An iteration's cost from each device's compute: the one formula of a plan's
// prediction (finish_prediction) and the search's costing of a layout. The
// backward all-to-all needs no delays; the forward one starts on each device
// as late as its compute and backward exceed the fastest device's. The
// collectives' backward ms count in the delays (they precede the next
// forward), their forward ms in the forward. Keeps its buffers between calls.
class IterationCost {
 public:
  IterationCost(const CommModel& comm, size_t devices);
  // Per device: `compute_ms`, and `a2a_dims` the columns of its pooled
  // all-to-all; `collectives` null or empty for none. Returns the slowest
  // device's compute + forward + backward ms. Once the slowest device's
  // compute and backward alone reach `prune_at`, returns that without costing
  // the forward (the forward only adds); fwd_ms() is then stale.
  double operator()(std::span<const double> compute_ms, std::span<const double> a2a_dims,
                    const CollectiveLoad* collectives,
                    double prune_at = std::numeric_limits<double>::infinity());
  // Per device, of the last call: forward and backward communication ms,
  // the collectives' included.
  std::span<const double> fwd_ms() const { return fwd_; }
  std::span<const double> bwd_ms() const { return bwd_; }

 private:
  const CommModel& comm_;
  std::vector<double> zero_, delays_, fwd_, bwd_, extra_fwd_, extra_bwd_;
};

// Communication and totals (IterationCost) from per-device compute and dim
// sums (filled in `devices`) and the collectives.
void finish_prediction(const CommModel& comm, PlanPrediction& p);

PlanPrediction predict_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs);

// A shard's physical floor at `memory_gbps` (cost/floor.h): its fused work's
// bytes under the task's memory model over the bandwidth; 0 for none.
double shard_floor_ms(const PlanTask& task, const Shard& shard, double memory_gbps);

// A plan's predictions against their physical floors (predict_plan's
// compute_floor_ms and comm_floor_ms), one line each, naming what to look at:
// each device predicted under its compute or all-to-all floor; the devices
// more than kFarOverFloor over their compute floors (how many, the
// farthest); the shards whose own prediction is under their own floor, and
// where a device is far over, those far over theirs (how many, the three
// farthest). Empty: none, or the model set gives no bandwidths.
std::vector<std::string> floor_warnings(const PlanTask& task, const Plan& plan,
                                        const PlanPrediction& prediction, ShardCosts& costs);

}  // namespace embshard
