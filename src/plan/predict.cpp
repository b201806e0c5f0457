// Predicted per-device costs of a plan.
#include "embshard/plan/predict.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "embshard/util/error.h"
#include "embshard/workload/trace_shard.h"

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

TableFeatures shard_features(const PlanTask& task, const Shard& s) {
  const TableSpec& spec = task.tables[s.table];
  const int source =
      static_cast<size_t>(s.table) < task.source_table.size() ? task.source_table[s.table] : -1;
  const bool row_piece = is_row_piece(task, s);
  TableFeatures f;
  if ((row_piece || s.replica) && task.piece_stats && source >= 0) {
    // Measured on the piece's own lookups, as the models' training pieces were.
    f = table_features(task.piece_stats->piece(source, spec, s.row_offset, s.rows,
                                               s.replica ? s.device : 0,
                                               s.replica ? task.num_devices() : 1),
                       s.cols);
  } else {
    // A replica serves only its device's slice of the batch.
    const double share = s.replica ? 1.0 / task.num_devices()
                                   : task.lookup_share(s.table, s.row_offset, s.rows);
    f = piece_features(spec, s.cols, s.rows, share);
  }
  f.source_table = source;
  f.source_row_offset = s.row_offset;
  f.row_piece = row_piece;
  if (s.replica) f.batch_slice = s.device, f.batch_slices = task.num_devices();
  return f;
}

size_t ShardCosts::KeyHash::operator()(const Key& k) const {
  uint64_t h = static_cast<uint64_t>(k.table) * 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {static_cast<uint64_t>(k.cols), static_cast<uint64_t>(k.replica),
                     static_cast<uint64_t>(k.row_offset), static_cast<uint64_t>(k.rows)}) {
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return static_cast<size_t>(h);
}

int ShardCosts::shard_id(const Shard& s) {
  // Every replica of a table costs the same (its 1/N of the batch): one id;
  // the measured model measures the slice of device 0.
  Shard piece = s;
  piece.col_offset = 0;
  piece.device = 0;
  const Key key{s.table, s.cols, s.replica ? 1 : 0, s.row_offset, s.rows};
  const auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const int id = compute().add_table(shard_features(task_, piece));
  ES_CHECK(id >= 0, "compute model {} returned table id {}", compute().name(), id);
  if (static_cast<int>(single_ms_.size()) <= id) single_ms_.resize(id + 1, -1.0);
  ids_.emplace(key, id);
  return id;
}

void add_collective_load(const PlanTask& task, const Shard& s, CollectiveLoad& load) {
  const TableSpec& spec = task.tables[s.table];
  if (s.replica) {
    if (s.device == 0) {
      load.allreduce_bytes += static_cast<double>(spec.rows) * spec.dim * task.memory.bytes_per_weight;
    }
    return;
  }
  if (s.rows >= spec.rows) return;
  const int n = task.num_devices();
  load.rw_dim_sums[s.device] += s.cols;
  // The global batch's lookups in the shard's rows, 8-byte indices; 1/N of
  // them come from the device's own samples.
  const double bytes = spec.pooling_factor * static_cast<double>(task.batch_size) *
                       task.lookup_share(s.table, s.row_offset, s.rows) * 8.0;
  load.index_recv_bytes[s.device] += bytes * (n - 1) / n;
  for (int e = 0; e < n; ++e) {
    if (e != s.device) load.index_send_bytes[e] += bytes / n;
  }
}

double ShardCosts::single_ms(int id) {
  if (single_ms_[id] < 0) single_ms_[id] = compute().compute_ms(std::span<const int>(&id, 1));
  return single_ms_[id];
}

void finish_prediction(const CommModel& comm, PlanPrediction& p) {
  const size_t n = p.devices.size();
  std::vector<double> dims(n), delays(n, 0.0), fwd(n), bwd(n);
  for (size_t d = 0; d < n; ++d) dims[d] = p.devices[d].dim_sum;
  comm.comm_ms(dims, delays, {}, bwd);
  const bool collectives = p.collectives.rw_dim_sums.size() == n && !p.collectives.empty();
  std::vector<double> extra_fwd(n, 0.0), extra_bwd(n, 0.0);
  if (collectives) {
    comm.collective_ms(p.collectives, extra_fwd, extra_bwd);
    for (size_t d = 0; d < n; ++d) bwd[d] += extra_bwd[d];
  }
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t d = 0; d < n; ++d) fastest = std::min(fastest, p.devices[d].compute_ms + bwd[d]);
  for (size_t d = 0; d < n; ++d) delays[d] = p.devices[d].compute_ms + bwd[d] - fastest;
  comm.comm_ms(dims, delays, fwd, {});
  for (size_t d = 0; d < n; ++d) fwd[d] += extra_fwd[d];
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
  p.collectives.reset(task.num_devices());
  for (const Shard& s : plan.shards) {
    DeviceCosts& c = p.devices[s.device];
    c.memory_bytes += task.memory.shard_bytes(s.rows, s.cols);
    ++c.num_shards;
    // Replicas need no all-to-all: each device pools its own samples. Row
    // pieces' partial sums go through the reduce-scatter instead.
    if (!s.replica && !is_row_piece(task, s)) c.dim_sum += s.cols;
    add_collective_load(task, s, p.collectives);
    const TableSpec& spec = task.tables[s.table];
    const double share = s.replica ? 1.0 / task.num_devices()
                                   : task.lookup_share(s.table, s.row_offset, s.rows);
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
