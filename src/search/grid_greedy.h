// NeuroShard's inner search: greedy placement (pieces in the given order,
// each to the device with the lowest predicted fused cost that has memory
// left and stays under a per-device dim-sum cap) repeated over a grid of caps,
// keeping the placement the cost model rates best.
//
// Why it is fast: the runs of the grid are identical until a cap first
// changes a decision, so they run as one and fork only there; fused costs are
// cached under a multiset hash of the device's pieces, so the same device
// contents are costed once across caps, beam candidates and beam steps; a
// cache miss costs "device + piece" from the model's incremental state
// (CostModel::state_size), not from the device's whole list of tables; and
// per-device state (pieces, memory, dim sum, compute, model state) is kept
// incrementally in buffers reused from run to run (no allocation in the inner
// loop). With
// `prune_monotone`, devices are tried in ascending order of their compute and
// the scan stops at the first whose compute alone is no better than the best
// fused cost found, and a run is abandoned once its dearest device's compute
// plus the comm model's floor (CommModel::floor_ms) reaches the best cost
// found (or the caller's cutoff): both exact when adding a piece never makes
// a device cheaper and the floor holds (the assumptions lower_bound() makes
// too); off, every device of every run is costed.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "embshard/search/planner.h"
#include "embshard/util/random.h"
#include "pieces.h"

namespace embshard::search {

// A piece id's mix: a device's key is the sum (a multiset hash: two halves of
// one table have the same id) of its pieces' mixes.
inline uint64_t piece_key(int id) { return splitmix64(static_cast<uint64_t>(id)); }

// Direct-mapped cache of fused compute costs. A 64-bit key collision would
// return another device's cost; at 2^-64 per pair it is not guarded against.
class CostCache {
 public:
  explicit CostCache(int log2_entries);
  bool find(uint64_t key, double& ms) const {
    const Entry& e = entries_[key & mask_];
    if (e.key != key) return false;
    ms = e.ms;
    return true;
  }
  void put(uint64_t key, double ms) { entries_[key & mask_] = {key, ms}; }
  uint64_t hits = 0, misses = 0;

 private:
  struct Entry {
    uint64_t key = 0;
    double ms = 0;
  };
  std::vector<Entry> entries_;
  uint64_t mask_;
};

// One greedy placement in progress.
struct Layout {
  // Per device: piece ids (one spare slot); empty where the model has a state.
  std::vector<std::vector<int>> ids;
  std::vector<uint64_t> key;          // per device: multiset hash of ids
  std::vector<int64_t> mem_bytes;
  std::vector<double> dim_sum;        // every piece's columns but replicas' (the caps')
  std::vector<double> a2a_dim;        // of which the pooled all-to-all's (not row pieces')
  CollectiveLoad collectives;         // row pieces' and replicas'
  std::vector<uint8_t> group_on;      // [group x device]: a piece of the row group is there
  std::vector<double> compute_ms;     // with the uncertainty's penalty
  std::vector<double> sum_sq_ms;      // per device: its pieces' squared costs alone, summed
  std::vector<int> device_of;         // per piece, -1 until placed
  std::vector<int> by_compute;        // devices by ascending (compute_ms, index)
  std::vector<double> state;          // per device: the model's state (state_size each)

  void reset(int devices, size_t pieces, size_t state_size, size_t groups);
  void copy_from(const Layout& other);
  void place(size_t index, int d, const Piece& p, double fused_ms, const ComputeModel& model);
  bool group_taken(const Piece& p, int d) const {
    return p.group >= 0 && group_on[static_cast<size_t>(p.group) * ids.size() + d] != 0;
  }
};

class GridGreedy {
 public:
  GridGreedy(const PlanTask& task, const CostModel& model, const PlannerOptions& options);

  // Places `pieces` under every cap of the grid (mean dim sum x cap_low ..
  // cap_high); returns the best cost (infinity if no run fits the memory) and
  // that run's devices in `device_of`. With pruning on, runs that cannot end
  // below `cutoff_ms` are abandoned early, and infinity is returned when no
  // run does: the caller only needs costs under the cutoff.
  double run(const std::vector<Piece>& pieces, std::vector<int>& device_of,
             double cutoff_ms = std::numeric_limits<double>::infinity());

  const CostCache& cache() const { return cache_; }
  // Whether the last run found nothing because every run of the grid ran out
  // of memory (none was abandoned for its cost): another order of the same
  // pieces may place.
  bool out_of_memory() const { return !found_ && !over_cutoff_; }

  // The caps of the next runs: `steps` from `low` to `high` x the mean dim
  // sum (the options' grid until set); the cost cache is the same whatever
  // the grid.
  void set_grid(int steps, double low, double high);
  // The cap of the last run's best placement, x the mean dim sum (of the
  // caps that led to it, the middle one).
  double best_cap() const { return best_cap_; }

 private:
  void descend(Layout& layout, size_t next, std::vector<int> caps);
  bool choose(Layout& layout, const Piece& p, const std::vector<int>& caps,
              std::vector<int>& choice);
  double fused_ms(Layout& layout, int d, const Piece& p);
  double model_ms(Layout& layout, int d, const Piece& p);
  double total_ms(const Layout& layout);
  Layout& acquire();

  const PlanTask& task_;
  ComputeModel& compute_;
  const CommModel& comm_;
  CostCache cache_;
  int grid_steps_;
  double cap_low_, cap_high_;
  bool prune_;
  int patience_;
  double uncertainty_;
  std::vector<double> caps_;                  // this run's dim-sum caps
  double best_cap_ = 0;
  const std::vector<Piece>* pieces_ = nullptr;
  std::vector<std::unique_ptr<Layout>> pool_;  // pool_[depth] for forks
  size_t depth_ = 0;
  std::vector<double> cand_ms_;               // per device, this step
  size_t state_size_;                         // the model's incremental state, 0: none
  std::vector<double> scratch_state_;
  IterationCost iteration_;
  double allreduce_bytes_ = 0;       // this run's replicas' gradients
  size_t groups_ = 0;
  double comm_floor_ms_ = 0;         // CommModel::floor_ms of this run's all-to-all
  double best_ms_ = 0;
  bool found_ = false;
  bool over_cutoff_ = false;  // the last run abandoned or rejected a run for its cost
  std::vector<int>* best_device_of_ = nullptr;
};

}  // namespace embshard::search
