// Predicted per-device costs of a plan.
#include "embshard/plan/predict.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

// Whether a shard is a row piece (fewer rows than its table, not a replica).
bool is_row_piece(const PlanTask& task, const Shard& s) {
  return !s.replica && s.rows < task.tables[s.table].rows;
}

// What a shard adds to the collectives beyond the pooled all-to-all: a row
// piece its columns (reduce-scatter / all-gather) and its lookups' indices
// (index all-to-all), a replica its table's gradient (all-reduce, counted once,
// by the copy on device 0). `load` must be reset to the task's devices.
void add_collective_load(const PlanTask& task, const Shard& s, CollectiveLoad& load) {
  const TableSpec& spec = task.tables[s.table];
  if (s.replica) {
    if (s.device == 0) {
      load.allreduce_bytes += static_cast<double>(spec.weight_bytes());
    }
    return;
  }
  if (s.rows >= spec.rows) return;
  load.add_row_shard(s.device, s.cols,
                     index_exchange_bytes(spec.pooling_factor, task.batch_size,
                                          task.lookup_share(s.table, s.row_offset, s.rows)));
}

// The features a cost model gets for a piece of `table`: `cols` columns,
// `rows` rows, serving `lookup_share` of its lookups.
TableFeatures piece_features(const TableSpec& table, int cols, int64_t rows,
                             double lookup_share) {
  TableFeatures f;
  f.rows = rows;
  f.dim = cols;
  f.pooling_factor = table.pooling_factor * lookup_share;
  f.row_reuse = table.row_reuse;
  f.lookup_reuse = table.lookup_reuse;
  f.data_type = table.data_type;
  return f;
}

// Each device's physical floors (DeviceCosts::compute_floor_ms, comm_floor_ms).
void add_floors(const PlanTask& task, const Plan& plan, const Bandwidths& b, PlanPrediction& p) {
  if (b.memory_gbps > 0) {
    for (const Shard& s : plan.shards) {
      p.devices[s.device].compute_floor_ms += shard_floor_ms(task, s, b.memory_gbps);
    }
  }
  if (b.link_gbps > 0) {
    double total_dim = 0;
    for (const DeviceCosts& c : p.devices) total_dim += c.dim_sum;
    for (DeviceCosts& c : p.devices) {
      c.comm_floor_ms = floor_ms(
          2 * alltoall_floor_bytes(c.dim_sum, total_dim, task.num_devices(), task.batch_size),
          b.link_gbps);
    }
  }
  // The host's link carries its devices' traffic to other hosts, forward and back.
  if (task.topology.hierarchical(task.num_devices())) {
    std::vector<double> dims;
    for (const DeviceCosts& c : p.devices) dims.push_back(c.dim_sum);
    const HostBytes host = alltoall_host_bytes(task.topology, dims, task.batch_size);
    for (int d = 0; d < task.num_devices(); ++d) {
      const int h = task.topology.host_of(d);
      p.devices[d].comm_floor_ms = std::max(
          p.devices[d].comm_floor_ms, floor_ms(2 * host.busiest(h), task.topology.inter_host_gbps));
    }
  }
}

}  // namespace

ShardCosts::ShardCosts(const PlanTask& task, const CostModel& model)
    : task_(task), model_(model) {
  ES_CHECK(model_.compute && model_.comm, "cost model '{}' lacks its {} model", model_.name,
           model_.compute ? "communication" : "compute");
  model_.comm = with_topology(model_.comm, task.topology, task.batch_size, task.num_devices());
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
  f.data_type = spec.data_type;
  f.source_table = source;
  f.source_row_offset = s.row_offset;
  f.row_piece = row_piece;
  if (s.replica) f.batch_slice = s.device, f.batch_slices = task.num_devices();
  return f;
}

double shard_floor_ms(const PlanTask& task, const Shard& s, double memory_gbps) {
  const WorkBytes bytes =
      fused_work_bytes(shard_features(task, s), task.batch_size, task.tables[s.table].data_type,
                       task.memory.state_bytes_per_row(s.cols));
  return floor_ms(bytes.total(), memory_gbps);
}

size_t ShardCosts::KeyHash::operator()(const Key& k) const {
  uint64_t h = splitmix64(static_cast<uint64_t>(k.table));
  for (uint64_t v : {static_cast<uint64_t>(k.cols), static_cast<uint64_t>(k.replica),
                     static_cast<uint64_t>(k.row_offset), static_cast<uint64_t>(k.rows)}) {
    h = splitmix64(h ^ v);
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


double ShardCosts::single_ms(int id) {
  if (single_ms_[id] < 0) single_ms_[id] = compute().compute_ms(std::span<const int>(&id, 1));
  return single_ms_[id];
}

IterationCost::IterationCost(const CommModel& comm, size_t devices)
    : comm_(comm),
      zero_(devices, 0.0),
      delays_(devices),
      fwd_(devices),
      bwd_(devices),
      extra_fwd_(devices),
      extra_bwd_(devices) {}

double IterationCost::operator()(std::span<const double> compute_ms,
                                 std::span<const double> a2a_dims,
                                 const CollectiveLoad* collectives, double prune_at) {
  const size_t n = zero_.size();
  ES_CHECK(compute_ms.size() == n && a2a_dims.size() == n,
           "iteration cost of {} devices given {} compute and {} all-to-all figures", n,
           compute_ms.size(), a2a_dims.size());
  const bool extra = collectives != nullptr && collectives->rw_dim_sums.size() == n &&
                     !collectives->empty();
  std::fill(extra_fwd_.begin(), extra_fwd_.end(), 0.0);
  std::fill(extra_bwd_.begin(), extra_bwd_.end(), 0.0);
  if (extra) comm_.collective_ms(*collectives, extra_fwd_, extra_bwd_);
  comm_.comm_ms(a2a_dims, zero_, {}, bwd_);
  double fastest = std::numeric_limits<double>::infinity(), slowest = 0;
  for (size_t d = 0; d < n; ++d) {
    if (extra) bwd_[d] += extra_bwd_[d];
    fastest = std::min(fastest, compute_ms[d] + bwd_[d]);
    slowest = std::max(slowest, compute_ms[d] + bwd_[d]);
  }
  if (slowest >= prune_at) return slowest;
  for (size_t d = 0; d < n; ++d) delays_[d] = compute_ms[d] + bwd_[d] - fastest;
  comm_.comm_ms(a2a_dims, delays_, fwd_, {});
  double worst = 0;
  for (size_t d = 0; d < n; ++d) {
    if (extra) fwd_[d] += extra_fwd_[d];
    worst = std::max(worst, compute_ms[d] + fwd_[d] + bwd_[d]);
  }
  return worst;
}

void finish_prediction(const CommModel& comm, PlanPrediction& p) {
  const size_t n = p.devices.size();
  std::vector<double> compute(n), dims(n);
  for (size_t d = 0; d < n; ++d) {
    compute[d] = p.devices[d].compute_ms;
    dims[d] = p.devices[d].dim_sum;
  }
  IterationCost cost(comm, n);
  cost(compute, dims, &p.collectives);
  p.cost_ms = 0;
  double sum = 0;
  for (size_t d = 0; d < n; ++d) {
    DeviceCosts& c = p.devices[d];
    c.fwd_comm_ms = cost.fwd_ms()[d];
    c.bwd_comm_ms = cost.bwd_ms()[d];
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
    c.memory_bytes += task.piece_bytes(s.table, s.rows, s.cols);
    ++c.num_shards;
    // Replicas need no all-to-all: each device pools its own samples. Row
    // pieces' partial sums go through the reduce-scatter instead.
    if (!s.replica && !is_row_piece(task, s)) c.dim_sum += s.cols;
    add_collective_load(task, s, p.collectives);
    const TableSpec& spec = task.tables[s.table];
    const double share = s.replica ? 1.0 / task.num_devices()
                                   : task.lookup_share(s.table, s.row_offset, s.rows);
    c.input_bytes += index_exchange_bytes(spec.pooling_factor, task.batch_size, share);
    if (!s.replica) c.output_bytes += static_cast<double>(task.batch_size) * s.cols * 4.0;
    ids[s.device].push_back(costs.shard_id(s));
  }
  for (int d = 0; d < task.num_devices(); ++d) {
    p.devices[d].compute_ms = ids[d].empty() ? 0.0 : costs.compute().compute_ms(ids[d]);
  }
  finish_prediction(costs.comm(), p);
  add_floors(task, plan, costs.model().source.bandwidths, p);
  return p;
}

}  // namespace embshard
