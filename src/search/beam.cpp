// The rating of a beam step's children (beam.h).
#include "beam.h"

#include <atomic>
#include <bit>
#include <exception>
#include <mutex>
#include <thread>

#include "embshard/util/random.h"

namespace embshard::search {

void rate_children(const PlanTask& task, std::vector<BeamState>& children, size_t exact,
                   std::vector<std::unique_ptr<GridGreedy>>& grids, Ratings& known,
                   const PlannerOptions& options, const std::vector<BeamState>* parents) {
  const auto reorder = [&](BeamState& child, bool big_first) {
    if (child.big_first == big_first) return;
    child.big_first = big_first;
    std::sort(child.pieces.begin(), child.pieces.end(), PieceOrder(task, big_first));
  };
  auto key = [&](const BeamState& child) {
    return parents == nullptr
               ? child.signature
               : child.signature ^ splitmix64(std::bit_cast<uint64_t>((*parents)[child.parent].cap));
  };
  std::mutex mutex;
  std::vector<double> rated;
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  auto work = [&](GridGreedy& grid) {
    try {
      for (size_t c; (c = next++) < children.size();) {
        double cutoff = std::numeric_limits<double>::infinity();
        {
          std::lock_guard lock(mutex);
          if (rated.size() >= exact) {
            std::nth_element(rated.begin(), rated.begin() + (exact - 1), rated.end());
            cutoff = std::nextafter(rated[exact - 1], cutoff);
          }
        }
        BeamState& child = children[c];
        child.cutoff_ms = cutoff;
        if (const Rating* r = known.find(key(child), cutoff)) {
          reorder(child, r->big_first);  // the order its placement is for
          child.cost_ms = r->cost_ms;
          child.cap = r->cap;
          child.device_of = r->device_of;
        } else {
          // A parent that placed nowhere has no cap: its children on the whole grid.
          const double cap = parents != nullptr ? (*parents)[child.parent].cap : 0;
          if (cap > 0) {
            grid.set_grid(1, cap, cap);
          } else {
            grid.set_grid(options.budget.grid_steps, options.budget.cap_low,
                          options.budget.cap_high);
          }
          child.cost_ms = grid.run(child.pieces, child.device_of, cutoff);
          if (!std::isfinite(child.cost_ms) && !child.big_first && grid.out_of_memory()) {
            // E.g. a hot table's rows split: its blocks, placed first, left
            // no device empty enough for a huge cold table placed last.
            reorder(child, true);
            child.cost_ms = grid.run(child.pieces, child.device_of, cutoff);
          }
          child.cap = grid.best_cap();
        }
        std::lock_guard lock(mutex);
        rated.push_back(child.cost_ms);
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
      next = children.size();
    }
  };
  std::vector<std::thread> threads;
  const size_t helpers = std::min(grids.size(), children.size()) - 1;
  for (size_t t = 1; t <= helpers; ++t) threads.emplace_back(work, std::ref(*grids[t]));
  work(*grids[0]);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  for (const BeamState& child : children) known.add(key(child), child);
}

void by_cost(std::vector<BeamState>& children) {
  std::stable_sort(children.begin(), children.end(),
                   [](const BeamState& a, const BeamState& b) { return a.cost_ms < b.cost_ms; });
}

void remember(std::vector<BeamState>& best, const BeamState& s, size_t count) {
  if (!std::isfinite(s.cost_ms)) return;
  for (const BeamState& b : best) {
    if (b.signature == s.signature) return;
  }
  const auto at = std::upper_bound(best.begin(), best.end(), s.cost_ms,
                                   [](double c, const BeamState& b) { return c < b.cost_ms; });
  best.insert(at, s);
  if (best.size() > count) best.pop_back();
}

}  // namespace embshard::search
