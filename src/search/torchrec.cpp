// A TorchRec-style planner: analytic per-shard perf estimates (bytes over
// bandwidth with TorchRec's empirical constants, torchrec/distributed/planner
// constants.py and shard_estimators.py), a few proposals (all table-wise,
// column-wise halves for wide tables, column-wise halves for all), each
// partitioned greedily (shards by descending perf, each to the device with the
// lowest perf so far that has room), and the proposal TorchRec's own
// estimates rate best. The cost model is not consulted: that is the point of
// the comparison.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "pieces.h"

namespace embshard {
namespace {

using search::Piece;

// TorchRec's constants for the fused kernel on CPU.
constexpr double kDdrMemBwBytesPerS = 51e9;
constexpr double kCpuKernelBwFactor = 0.5;  // kernel_bw_lookup: ("cpu", FUSED)
constexpr double kIntraNodeBwBytesPerS = 600e9;
constexpr double kBwdComputeMultiplier = 2.0;
constexpr double kHalfBlockPenalty = 1.15;
constexpr double kQuarterBlockPenalty = 1.75;
constexpr int kFullBlockDim = 128;
constexpr double kIndexBytes = 8;   // int64 ids
constexpr double kValueBytes = 4;   // fp32 rows

// Table-wise (or one column shard's) perf estimate, ms, as _get_tw_sharding_perf.
double shard_perf_ms(const TableSpec& t, int cols, int64_t batch) {
  const double b = static_cast<double>(batch);
  const double input_read = b * t.pooling_factor * kIndexBytes;
  const double lookup = b * t.pooling_factor * cols * kValueBytes;
  const double output_write = b * cols * kValueBytes;
  double penalty = 1.0;
  if (cols < kFullBlockDim) penalty = cols >= kFullBlockDim / 2 ? kHalfBlockPenalty
                                                                : kQuarterBlockPenalty;
  const double device_bw = kDdrMemBwBytesPerS * kCpuKernelBwFactor;
  const double fwd_compute = (input_read + lookup * penalty + output_write) / device_bw;
  const double fwd_comms = output_write / kIntraNodeBwBytesPerS;
  return 1e3 * (fwd_compute * (1 + kBwdComputeMultiplier) + 2 * fwd_comms);
}

class TorchRecPlanner : public Planner {
 public:
  std::string name() const override { return "torchrec"; }

  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    const std::vector<Piece> base = search::initial_pieces(task, costs);
    // Column-wise proposals: halve the widest pieces (dim >= min_dim).
    const int proposals[] = {0, kFullBlockDim, 64, 1 << 30};
    double best_ms = std::numeric_limits<double>::infinity();
    Plan best;
    std::string last_error;
    for (int min_dim : proposals) {
      if (min_dim == 1 << 30) min_dim = 8;  // halve everything that can be halved
      std::vector<Piece> pieces = min_dim == 0 ? base : halve(task, costs, base, min_dim);
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
      if (p.cols >= min_dim && task.splittable(p.table) && task.split.can_halve(p.cols)) {
        const Piece half = search::make_piece(task, costs, p.table, p.cols / 2);
        out.push_back(half);
        out.push_back(half);
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
      perf[i] = shard_perf_ms(task.tables[pieces[i].table], pieces[i].cols, task.batch_size);
    }
    std::vector<size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return perf[a] > perf[b]; });
    std::vector<Piece> sorted;
    std::vector<double> sorted_perf;
    for (size_t i : order) sorted.push_back(pieces[i]), sorted_perf.push_back(perf[i]);
    device_of = search::greedy_by_score(task, name(), costs, sorted, sorted_perf);
    std::vector<double> load(task.num_devices(), 0.0);
    for (size_t i = 0; i < sorted.size(); ++i) load[device_of[i]] += sorted_perf[i];
    pieces.swap(sorted);
    return *std::max_element(load.begin(), load.end());
  }
};

}  // namespace

std::unique_ptr<Planner> make_torchrec_planner(const PlannerOptions&) {
  return std::make_unique<TorchRecPlanner>();
}

}  // namespace embshard
