// The beam search's states and their rating (neuroshard.cpp): a beam state,
// the ratings kept across a search, the order pieces are placed in, and the
// rating of one step's children on the grid search's threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "embshard/search/planner.h"
#include "grid_greedy.h"
#include "pieces.h"

namespace embshard::search {

struct BeamState {
  std::vector<Piece> pieces;  // placement order
  std::vector<int> device_of;
  double cost_ms = std::numeric_limits<double>::infinity();
  uint64_t signature = 0;     // multiset hash of the pieces
  size_t parent = 0;          // children: their beam state's index
  double cutoff_ms = 0;       // children: the cutoff they were rated against
  double cap = 0;             // the cap of its best placement (GridGreedy::best_cap)
  bool big_first = false;     // its pieces in PieceOrder's big-first order
};

// A piece set's rating on a grid: its cost, or infinity for a set rated over
// the cutoff it had (its cost is over `cutoff_ms`); with its placement.
struct Rating {
  double cost_ms = std::numeric_limits<double>::quiet_NaN();  // NaN: not rated
  double cutoff_ms = 0;
  double cap = 0;
  bool big_first = false;  // the order of the pieces device_of is for
  std::vector<int> device_of;
};

// Ratings by piece set and grid, kept for the search's whole run: the wider
// beam starts where the halvings' beam started and often follows it, so its
// halvings are children the first beam rated already.
class Ratings {
 public:
  // The rating a child with this cutoff would get, if known: a cost found, or
  // infinity when the child was over a cutoff no lower than this one.
  const Rating* find(uint64_t key, double cutoff) const {
    const auto it = ratings_.find(key);
    if (it == ratings_.end()) return nullptr;
    const Rating& r = it->second;
    return std::isfinite(r.cost_ms) || cutoff <= r.cutoff_ms ? &r : nullptr;
  }
  void add(uint64_t key, const BeamState& child) {
    Rating& r = ratings_[key];
    if (std::isfinite(r.cost_ms)) return;  // known exactly
    r.cost_ms = child.cost_ms;
    r.big_first = child.big_first;
    if (std::isfinite(child.cost_ms)) {
      r.cap = child.cap;
      r.device_of = child.device_of;
    } else {
      r.cutoff_ms = std::max(r.cutoff_ms, child.cutoff_ms);
    }
  }

 private:
  std::unordered_map<uint64_t, Rating> ratings_;
};

// Pieces with one device (pins, row-wise blocks) first (the rest go around them), then
// by descending predicted cost; ties by table and width for determinism. With
// `big_first`, pieces over half the smallest device's memory go right after
// the pinned ones, largest first: each needs a device nearly to itself, and
// placed late, none may have room left.
class PieceOrder {
 public:
  PieceOrder(const PlanTask& task, bool big_first)
      : task_(task),
        half_(big_first ? *std::min_element(task.device_mem_bytes.begin(),
                                            task.device_mem_bytes.end()) / 2
                        : std::numeric_limits<int64_t>::max()) {}
  bool operator()(const Piece& a, const Piece& b) const {
    const bool pa = required_device(task_, a) >= 0,
               pb = required_device(task_, b) >= 0;
    if (pa != pb) return pa;
    const bool ba = a.mem_bytes > half_, bb = b.mem_bytes > half_;
    if (ba != bb) return ba;
    if (ba && a.mem_bytes != b.mem_bytes) return a.mem_bytes > b.mem_bytes;
    if (a.single_ms != b.single_ms) return a.single_ms > b.single_ms;
    if (a.table != b.table) return a.table < b.table;
    if (a.cols != b.cols) return a.cols > b.cols;
    if (a.group != b.group) return a.group < b.group;
    return a.row_offset < b.row_offset;
  }

 private:
  const PlanTask& task_;
  int64_t half_;
};

inline uint64_t signature(const std::vector<Piece>& pieces) {
  uint64_t s = 0;
  for (const Piece& p : pieces) s += piece_key(p.id);
  return s;
}

// Rates the children of one beam step, on `grids.size()` threads: on the
// whole grid, or with `parents` (the screen) on their parent's best cap
// alone. Only the `exact` cheapest children matter (those that go on, and
// those that may become candidates), so a child is rated against a cutoff:
// the exact-th cheapest cost among the children rated so far. A child at or
// under its cutoff gets its exact cost; one over it, infinity. Either way it
// lands in the same place of the (cost, index) order, so the `exact`
// cheapest are the same whatever the threads and the order they finish in.
// A child rated so before (`known`) is not rated again; the new ratings go
// into `known`. A child whose pieces, placed by cost, run out of memory on
// every cap is rated again with its big pieces first (PieceOrder), and
// keeps that order for its own children.
void rate_children(const PlanTask& task, std::vector<BeamState>& children, size_t exact,
                   std::vector<std::unique_ptr<GridGreedy>>& grids, Ratings& known,
                   const PlannerOptions& options, const std::vector<BeamState>* parents);

// Cheapest first; ties keep their order (the order children were made in).
void by_cost(std::vector<BeamState>& children);

// Keeps the `count` cheapest distinct states seen (distinct piece sets give
// distinct plans), cheapest first; ties keep the earlier state.
void remember(std::vector<BeamState>& best, const BeamState& s, size_t count);

}  // namespace embshard::search
