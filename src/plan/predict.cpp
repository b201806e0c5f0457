// Predicted per-device costs of a plan.
#include "embshard/plan/predict.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "embshard/util/error.h"

namespace embshard {

TableFeatures piece_features(const TableSpec& table, int cols, int64_t rows,
                             double lookup_share) {
  TableFeatures f;
  f.rows = rows;
  f.dim = cols;
  f.pooling_factor = table.pooling_factor * lookup_share;
  f.row_reuse = table.row_reuse;
  f.lookup_reuse = table.lookup_reuse;
  return f;
}

ShardCosts::ShardCosts(const PlanTask& task, const CostModel& model)
    : task_(task), model_(model) {
  ES_CHECK(model_.compute && model_.comm, "cost model '{}' lacks its {} model", model_.name,
           model_.compute ? "communication" : "compute");
}

int ShardCosts::shard_id(const Shard& s) {
  const TableSpec& spec = task_.tables[s.table];
  double share = static_cast<double>(s.rows) / static_cast<double>(spec.rows);
  // A replica serves only its device's slice of the batch.
  if (s.replica) share = 1.0 / task_.num_devices();
  return shard_id(s.table, s.cols, s.rows, share);
}

int ShardCosts::shard_id(int table, int cols, int64_t rows, double lookup_share) {
  // Key: table (20 bits), cols (12 bits), rows (31 bits) and whether the share
  // is a replica's: enough for 1M tables and the dims the executor supports.
  const bool replica = lookup_share < 1.0 && rows == task_.tables[table].rows;
  const uint64_t key = (static_cast<uint64_t>(table) << 44) ^ (static_cast<uint64_t>(cols) << 32) ^
                       (static_cast<uint64_t>(rows) << 1) ^ (replica ? 1u : 0u);
  const auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const int id = compute().add_table(piece_features(task_.tables[table], cols, rows, lookup_share));
  ES_CHECK(id >= 0, "compute model {} returned table id {}", compute().name(), id);
  if (static_cast<int>(single_ms_.size()) <= id) single_ms_.resize(id + 1, -1.0);
  ids_.emplace(key, id);
  return id;
}

double ShardCosts::single_ms(int id) {
  if (single_ms_[id] < 0) single_ms_[id] = compute().compute_ms(std::span<const int>(&id, 1));
  return single_ms_[id];
}

void finish_prediction(const CommModel& comm, PlanPrediction& p) {
  const size_t n = p.devices.size();
  std::vector<double> dims(n), delays(n, 0.0), fwd(n), bwd(n);
  for (size_t d = 0; d < n; ++d) dims[d] = p.devices[d].dim_sum;
  comm.comm_ms(dims, delays, fwd, bwd);
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t d = 0; d < n; ++d) fastest = std::min(fastest, p.devices[d].compute_ms + bwd[d]);
  for (size_t d = 0; d < n; ++d) delays[d] = p.devices[d].compute_ms + bwd[d] - fastest;
  std::vector<double> bwd_unused(n);
  comm.comm_ms(dims, delays, fwd, bwd_unused);
  p.cost_ms = 0;
  double sum = 0;
  for (size_t d = 0; d < n; ++d) {
    DeviceCosts& c = p.devices[d];
    c.fwd_comm_ms = fwd[d];
    c.bwd_comm_ms = bwd[d];
    sum += c.total_ms();
    if (d == 0 || c.total_ms() > p.cost_ms) {
      p.cost_ms = c.total_ms();
      p.critical_device = static_cast<int>(d);
    }
  }
  p.imbalance = sum > 0 ? p.cost_ms / (sum / n) : 1.0;
}

PlanPrediction predict_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs) {
  PlanPrediction p;
  p.devices.resize(task.num_devices());
  std::vector<std::vector<int>> ids(task.num_devices());
  for (const Shard& s : plan.shards) {
    DeviceCosts& c = p.devices[s.device];
    c.memory_bytes += task.memory.shard_bytes(s.rows, s.cols);
    ++c.num_shards;
    // Replicas need no all-to-all: each device pools its own samples.
    if (!s.replica) c.dim_sum += s.cols;
    const TableSpec& spec = task.tables[s.table];
    const double share = s.replica ? 1.0 / task.num_devices()
                                   : static_cast<double>(s.rows) / static_cast<double>(spec.rows);
    c.input_bytes += spec.pooling_factor * share * static_cast<double>(task.batch_size) * 8.0;
    if (!s.replica) c.output_bytes += static_cast<double>(task.batch_size) * s.cols * 4.0;
    ids[s.device].push_back(costs.shard_id(s));
  }
  for (int d = 0; d < task.num_devices(); ++d) {
    p.devices[d].compute_ms = ids[d].empty() ? 0.0 : costs.compute().compute_ms(ids[d]);
  }
  finish_prediction(costs.comm(), p);
  return p;
}

}  // namespace embshard
