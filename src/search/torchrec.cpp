// A TorchRec-style planner: analytic per-shard perf estimates (bytes over
// bandwidth with TorchRec's empirical constants, torchrec/distributed/planner
// constants.py and shard_estimators.py: _get_tw/_rw/_dp_sharding_perf), a few
// proposals (all table-wise, column-wise halves for wide tables, column-wise
// halves for all; as its UniformProposer, every table row-wise and every
// table data-parallel; as its GreedyProposer, each table's option of the
// lowest total perf), each partitioned greedily (shards by descending perf,
// each to the device with the lowest perf so far that has room; replicas on
// every device), and the proposal TorchRec's own estimates rate best. The
// cost model is not consulted: that is the point of the comparison.
//
// One host: TorchRec's table_row_wise splits a table's rows over the ranks of
// a host, which on one host is every rank, the row_wise plan; so it is not a
// separate proposal here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "pieces.h"
#include "search/planners.h"

namespace embshard {
namespace {

using search::Piece;

// TorchRec's constants for the fused kernel on CPU.
constexpr double kDdrMemBwBytesPerS = 51e9;
constexpr double kCpuKernelBwFactor = 0.5;  // kernel_bw_lookup: ("cpu", FUSED)
constexpr double kIntraNodeBwBytesPerS = 600e9;
constexpr double kCrossNodeBwBytesPerS = 12.5e9;
constexpr double kBatchedCopyPerfFactor = 2.455;
constexpr double kDpElementwiseKernelsPerfFactor = 9.22;
constexpr double kBwdComputeMultiplier = 2.0;
constexpr double kHalfBlockPenalty = 1.15;
constexpr double kQuarterBlockPenalty = 1.75;
constexpr int kFullBlockDim = 128;
constexpr double kIndexBytes = 8;   // int64 ids
constexpr double kOutputBytes = 4;  // fp32 pooled outputs; rows in the table's type

// Table-wise (or one column shard's) perf estimate, ms, as _get_tw_sharding_perf.
double shard_perf_ms(const TableSpec& t, int cols, int64_t batch) {
  const double b = static_cast<double>(batch);
  const double input_read = b * t.pooling_factor * kIndexBytes;
  const double lookup = b * t.pooling_factor * data_type_row_bytes(t.data_type, cols);
  const double output_write = b * cols * kOutputBytes;
  double penalty = 1.0;
  if (cols < kFullBlockDim) penalty = cols >= kFullBlockDim / 2 ? kHalfBlockPenalty
                                                                : kQuarterBlockPenalty;
  const double device_bw = kDdrMemBwBytesPerS * kCpuKernelBwFactor;
  const double fwd_compute = (input_read + lookup * penalty + output_write) / device_bw;
  const double fwd_comms = output_write / kIntraNodeBwBytesPerS;
  return 1e3 * (fwd_compute * (1 + kBwdComputeMultiplier) + 2 * fwd_comms);
}

constexpr double kDeviceBw = kDdrMemBwBytesPerS * kCpuKernelBwFactor;

// One row shard of a table split over `ranks` devices, as _get_rw_sharding_perf
// (TorchRec assumes the lookups spread evenly over the shards): it reads
// 1/ranks of the lookups and writes partial sums for the whole batch, which a
// reduce-scatter sends forward and an all-gather returns.
double row_shard_perf_ms(const TableSpec& t, int cols, int64_t batch, int ranks) {
  const double b = static_cast<double>(batch);
  const double lookups = b * t.pooling_factor / ranks;
  const double output_write = b * cols * kOutputBytes;
  const double fwd_compute =
      (lookups * kIndexBytes + lookups * data_type_row_bytes(t.data_type, cols) + output_write) /
      kDeviceBw;
  const double fwd_comms = output_write / kIntraNodeBwBytesPerS;
  const double bwd_comms =
      output_write / kIntraNodeBwBytesPerS + output_write * kBatchedCopyPerfFactor / kDeviceBw;
  return 1e3 * (fwd_compute * (1 + kBwdComputeMultiplier) + fwd_comms + bwd_comms);
}

// One replica of a data-parallel table, as _get_dp_sharding_perf on one host:
// its 1/devices of the batch, the all-reduce of the table's gradient
// (bandwidth: cross-node x local world size) and the optimizer's elementwise kernels.
double replica_perf_ms(const TableSpec& t, int64_t batch, int devices) {
  const double b = static_cast<double>(batch) / devices;
  const double lookups = b * t.pooling_factor;
  const double fwd_compute =
      (lookups * kIndexBytes + lookups * data_type_row_bytes(t.data_type, t.dim) +
       b * t.dim * kOutputBytes) /
      kDeviceBw;
  const double table_bytes = static_cast<double>(t.weight_bytes());
  const double all_reduce = table_bytes / (kCrossNodeBwBytesPerS * devices);
  const double optimizer = table_bytes * kDpElementwiseKernelsPerfFactor / kDeviceBw;
  return 1e3 * (fwd_compute * (1 + kBwdComputeMultiplier) + all_reduce + optimizer);
}

double piece_perf_ms(const PlanTask& task, const Piece& p) {
  const TableSpec& t = task.tables[p.table];
  if (p.replica) return replica_perf_ms(t, task.batch_size, task.num_devices());
  if (p.row_piece()) {
    const int ranks = static_cast<int>((t.rows + p.rows - 1) / p.rows);
    return row_shard_perf_ms(t, p.cols, task.batch_size, std::max(2, ranks));
  }
  return shard_perf_ms(t, p.cols, task.batch_size);
}

// As TorchRec's GreedyProposer's first proposal: each table in the form of
// the lowest total perf (summed over its shards) that the task allows.
std::vector<Piece> greedy(const PlanTask& task, ShardCosts& costs, const std::vector<Piece>& base) {
  const int n = task.num_devices();
  const int64_t smallest = *std::min_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
  std::vector<Piece> out;
  for (size_t i = 0; i < base.size(); ++i) {
    const Piece& p = base[i];
    const TableSpec& t = task.tables[p.table];
    if (!p.full_rows() || p.cols != t.dim) {
      out.push_back(p);
      continue;
    }
    double best = shard_perf_ms(t, t.dim, task.batch_size);
    int form = 0;  // 0 table-wise, 1 column halves, 2 row-wise, 3 replica
    if (task.splittable(p.table) && task.split.can_halve(t.dim) &&
        task.types.allows(ShardingType::kColumnWise) &&
        2 * shard_perf_ms(t, t.dim / 2, task.batch_size) < best) {
      best = 2 * shard_perf_ms(t, t.dim / 2, task.batch_size), form = 1;
    }
    if (task.row_splittable(p.table, n) && n * row_shard_perf_ms(t, t.dim, task.batch_size, n) < best) {
      best = n * row_shard_perf_ms(t, t.dim, task.batch_size, n), form = 2;
    }
    if (task.types.allows(ShardingType::kDataParallel) && task.pinned_device[p.table] < 0 &&
        p.mem_bytes <= smallest && n * replica_perf_ms(t, task.batch_size, n) < best) {
      form = 3;
    }
    if (form == 1) {
      const Piece half = search::make_piece(task, costs, p.table, t.dim / 2);
      out.push_back(half);
      out.push_back(half);
    } else if (form == 2) {
      for (const Piece& r : search::split_rows(task, costs, p, n, out)) out.push_back(r);
    } else if (form == 3) {
      out.push_back(search::make_replica(task, costs, p.table));
    } else {
      out.push_back(p);
    }
  }
  return out;
}

// Every table that can be row-wise, row-wise over every device at full
// width (also one that the base halved to fit: TorchRec enumerates every
// type per table).
std::vector<Piece> all_rows(const PlanTask& task, ShardCosts& costs,
                            const std::vector<Piece>& base) {
  std::vector<Piece> out;
  const int n = task.num_devices();
  std::vector<uint8_t> done(task.tables.size(), 0);
  for (const Piece& p : base) {
    if (!task.row_splittable(p.table, n)) {
      out.push_back(p);
      continue;
    }
    if (done[p.table]) continue;
    done[p.table] = 1;
    const Piece whole = search::make_piece(task, costs, p.table, task.tables[p.table].dim);
    for (const Piece& r : search::split_rows(task, costs, whole, n, out)) out.push_back(r);
  }
  return out;
}

class TorchRecPlanner : public Planner {
 public:
  std::string name() const override { return "torchrec"; }

  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    const std::vector<Piece> base = search::initial_pieces(task, costs);
    std::vector<std::vector<Piece>> proposals{base};
    // Column-wise proposals: halve the widest pieces (dim >= min_dim), or all.
    if (task.types.allows(ShardingType::kColumnWise)) {
      for (int min_dim : {kFullBlockDim, 64, 8}) proposals.push_back(halve(task, costs, base, min_dim));
    }
    if (task.types.allows(ShardingType::kRowWise)) proposals.push_back(all_rows(task, costs, base));
    if (task.types.allows(ShardingType::kDataParallel)) {
      proposals.push_back(replicate(task, costs, base, false));
      proposals.push_back(replicate(task, costs, base, true));
    }
    if (task.types.any_row_split() || task.types.allows(ShardingType::kDataParallel)) {
      proposals.push_back(greedy(task, costs, base));
    }
    double best_ms = std::numeric_limits<double>::infinity();
    Plan best;
    std::string last_error;
    for (std::vector<Piece>& pieces : proposals) {
      if (!search::types_allowed(task, pieces)) continue;
      try {
        std::vector<int> device_of;
        const double ms = partition(task, costs, pieces, device_of);
        if (ms < best_ms) {
          best_ms = ms;
          best = search::plan_from_pieces(task, pieces, device_of);
        }
      } catch (const Error& e) {
        last_error = e.what();
      }
    }
    ES_CHECK(std::isfinite(best_ms), "{}", last_error);
    return best;
  }

 private:
  static std::vector<Piece> halve(const PlanTask& task, ShardCosts& costs,
                                  const std::vector<Piece>& base, int min_dim) {
    std::vector<Piece> out;
    for (const Piece& p : base) {
      if (p.full_rows() && p.cols >= min_dim && task.splittable(p.table) &&
          task.split.can_halve(p.cols)) {
        const Piece half = search::make_piece(task, costs, p.table, p.cols / 2);
        out.push_back(half);
        out.push_back(half);
      } else {
        out.push_back(p);
      }
    }
    return out;
  }

  // Every table-wise table that fits each device replicated (or only those
  // whose replica's perf beats its table-wise perf: `only_cheaper`).
  static std::vector<Piece> replicate(const PlanTask& task, ShardCosts& costs,
                                      const std::vector<Piece>& base, bool only_cheaper) {
    const int64_t smallest = *std::min_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
    std::vector<Piece> out;
    for (const Piece& p : base) {
      const bool whole = p.full_rows() && p.cols == task.tables[p.table].dim;
      const bool cheaper = replica_perf_ms(task.tables[p.table], task.batch_size, task.num_devices()) <
                           piece_perf_ms(task, p);
      if (whole && task.pinned_device[p.table] < 0 && p.mem_bytes <= smallest &&
          (!only_cheaper || cheaper)) {
        out.push_back(search::make_replica(task, costs, p.table));
      } else {
        out.push_back(p);
      }
    }
    return out;
  }

  // Greedy perf partitioner; returns the max device perf (TorchRec's rating).
  double partition(const PlanTask& task, ShardCosts& costs, std::vector<Piece>& pieces,
                   std::vector<int>& device_of) const {
    std::vector<double> perf(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      perf[i] = piece_perf_ms(task, pieces[i]);
    }
    std::vector<size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return perf[a] > perf[b]; });
    std::vector<Piece> sorted;
    std::vector<double> sorted_perf;
    for (size_t i : order) sorted.push_back(pieces[i]), sorted_perf.push_back(perf[i]);
    device_of = search::greedy_by_score(task, name(), costs, sorted, sorted_perf);
    std::vector<double> load(task.num_devices(), 0.0);
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (!sorted[i].replica) {
        load[device_of[i]] += sorted_perf[i];
        continue;
      }
      for (double& l : load) l += sorted_perf[i];
    }
    pieces.swap(sorted);
    return *std::max_element(load.begin(), load.end());
  }
};

}  // namespace

std::vector<Piece> search::torchrec_greedy_proposal(const PlanTask& task, ShardCosts& costs) {
  return greedy(task, costs, search::initial_pieces(task, costs));
}

std::vector<Piece> search::torchrec_row_wise_proposal(const PlanTask& task, ShardCosts& costs) {
  return all_rows(task, costs, search::initial_pieces(task, costs));
}

std::unique_ptr<Planner> make_torchrec_planner(const PlannerOptions&) {
  return std::make_unique<TorchRecPlanner>();
}

}  // namespace embshard
