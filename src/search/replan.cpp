// Re-planning from an existing plan (replan.h).
#include "embshard/search/replan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/plan/predict.h"
#include "embshard/util/error.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

// The old table's shards on the task's table t: its devices, its column
// pieces, its row pieces at their shares of the rows the table has now.
std::vector<Shard> carried_shards(const PlanTask& task, int t, const PlanFileTable& old) {
  const int64_t rows = task.tables[t].rows;
  std::vector<Shard> out;
  if (old.replicated()) {
    for (int d : old.ranks) out.push_back(Shard{t, 0, task.tables[t].dim, 0, rows, d, true});
    return out;
  }
  const auto scaled = [&](int64_t r) {
    return old.rows > 0 ? static_cast<int64_t>(static_cast<long double>(r) * rows / old.rows) : r;
  };
  for (const PlanFileShard& s : old.shards) {
    const int64_t begin = scaled(s.row_offset), end = scaled(s.row_offset + s.rows);
    out.push_back(Shard{t, s.col_offset, s.cols, begin, end - begin, s.device, false});
  }
  return out;
}

// Why the carried shards cannot stand in the task ("": they can).
std::string unfit(const PlanTask& task, int t, const std::vector<Shard>& shards) {
  for (const Shard& s : shards) {
    if (s.device >= task.num_devices()) {
      return fmt::format("on device {}, past the task's {}", s.device, task.num_devices());
    }
    if (s.rows <= 0) return "a row piece of no rows at the table's size now";
  }
  const bool whole = shards.size() == 1 && !shards[0].replica;
  if (task.pinned_device[t] >= 0 && !(whole && shards[0].device == task.pinned_device[t])) {
    return fmt::format("pinned to device {}", task.pinned_device[t]);
  }
  if (task.no_split[t] && !whole) return "kept whole now";
  Plan alone{shards};
  const std::string type = sharding_type(task, alone, t);
  const auto& names = sharding_type_names();
  const size_t i = std::find(names.begin(), names.end(), type) - names.begin();
  if (i < names.size() && !task.types.allows(static_cast<ShardingType>(1u << i))) {
    return fmt::format("{}, which the task does not allow", type);
  }
  return "";
}

bool same_shards(const std::vector<Shard>& a, const std::vector<Shard>& b) {
  const auto key = [](const Shard& s) {
    return std::tuple(s.table, s.col_offset, s.cols, s.row_offset, s.rows, s.device, s.replica);
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const Shard& x, const Shard& y) { return key(x) == key(y); });
}

struct Score {
  int64_t overflow = 0;  // bytes past the devices' caps
  double cost_ms = 0;
};

// Whether `s` is a better next step than `best` from `now`: while the plan
// overflows, the step that lessens the overflow most (then the cheapest);
// once it fits, the cheapest plan that still fits.
bool better_step(const Score& s, const Score& best, const Score& now) {
  if (now.overflow > 0) {
    if (s.overflow != best.overflow) return s.overflow < best.overflow;
    return s.cost_ms < best.cost_ms * (1 - 1e-9);
  }
  return s.overflow == 0 && s.cost_ms < best.cost_ms * (1 - 1e-9);
}

class Replanner : public Planner {
 public:
  Replanner(std::unique_ptr<Planner> inner, PlanFile old, int max_moves)
      : inner_(std::move(inner)), old_(std::move(old)), max_moves_(max_moves) {
    ES_CHECK(max_moves_ >= 0, "--max-moves is {}, must be at least 0", max_moves_);
  }
  std::string name() const override { return inner_->name(); }
  Plan plan(const PlanTask& task, ShardCosts& costs) override;
  std::string search_summary() const override { return summary_; }

 private:
  using Layout = std::vector<std::vector<Shard>>;  // per table
  Plan assemble(const Layout& layout) const {
    Plan p;
    for (const auto& shards : layout) p.shards.insert(p.shards.end(), shards.begin(), shards.end());
    return p;
  }
  Score rate(const PlanTask& task, const Layout& layout, ShardCosts& costs) const {
    const Plan p = assemble(layout);
    Score s;
    const std::vector<int64_t> used = device_memory_bytes(task, p);
    for (int d = 0; d < task.num_devices(); ++d) {
      s.overflow += std::max<int64_t>(0, used[d] - task.device_mem_bytes[d]);
    }
    s.cost_ms = predict_plan(task, p, costs).cost_ms;
    return s;
  }
  // The best step (one table changed, or two whole tables trading devices)
  // into `best` and `score`: the tables it changes, 0 for none.
  int best_move(const PlanTask& task, ShardCosts& costs, const Layout& layout, const Layout& goal,
                const std::vector<uint8_t>& fixed, int moves_left, Score& score,
                Layout& best) const;

  std::unique_ptr<Planner> inner_;
  PlanFile old_;
  int max_moves_;
  std::string summary_;
};

int Replanner::best_move(const PlanTask& task, ShardCosts& costs, const Layout& layout,
                         const Layout& goal, const std::vector<uint8_t>& fixed, int moves_left,
                         Score& score, Layout& best) const {
  const Plan plan = assemble(layout);
  const PlanPrediction p = predict_plan(task, plan, costs);
  const std::vector<int64_t> used = device_memory_bytes(task, plan);
  // Moves that can help take a table off the critical device or a full one.
  std::vector<uint8_t> hot(task.num_devices(), 0);
  hot[p.critical_device] = 1;
  for (int d = 0; d < task.num_devices(); ++d) hot[d] |= used[d] > task.device_mem_bytes[d];
  // Whole tables go to the least loaded devices, or trade places with one
  // of theirs.
  std::vector<int> order(task.num_devices());
  std::iota(order.begin(), order.end(), 0);
  const auto total = [&](int d) {
    const DeviceCosts& c = p.devices[d];
    return c.compute_ms + c.fwd_comm_ms + c.bwd_comm_ms;
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return total(a) < total(b); });
  order.resize(std::min<size_t>(order.size(), 4));
  const auto whole = [&](int t) {
    return layout[t].size() == 1 && !layout[t][0].replica && task.pinned_device[t] < 0 && !fixed[t];
  };
  const Score now = score;
  int chosen = 0;
  Layout trial = layout;
  const auto consider = [&](int changed) {
    const Score s = rate(task, trial, costs);
    if (!better_step(s, score, now)) return;
    score = s;
    best = trial;
    chosen = changed;
  };
  for (int t = 0; t < task.num_tables(); ++t) {
    if (fixed[t] || std::none_of(layout[t].begin(), layout[t].end(),
                                 [&](const Shard& s) { return hot[s.device] != 0; })) {
      continue;
    }
    trial[t] = goal[t];
    consider(1);
    if (whole(t)) {
      const int from = layout[t][0].device;
      for (int d : order) {
        if (d == from) continue;
        trial[t] = layout[t];
        trial[t][0].device = d;
        consider(1);
        if (moves_left < 2) continue;
        for (int u = 0; u < task.num_tables(); ++u) {  // a swap
          if (u == t || !whole(u) || layout[u][0].device != d) continue;
          trial[u][0].device = from;
          consider(2);
          trial[u] = layout[u];
        }
      }
    }
    trial[t] = layout[t];
  }
  return chosen;
}

Plan Replanner::plan(const PlanTask& task, ShardCosts& costs) {
  const int n = task.num_tables();
  Layout layout(n), goal(n);
  for (const Shard& s : inner_->plan(task, costs).shards) goal[s.table].push_back(s);
  const CarriedPlan carried = carry_plan(task, old_);
  for (const Shard& s : carried.plan.shards) layout[s.table].push_back(s);
  std::vector<uint8_t> fixed(n, 0);
  for (int t : carried.unplaced) {
    layout[t] = goal[t];
    fixed[t] = 1;
  }
  const Score start = rate(task, layout, costs);
  Score score = start;
  std::vector<std::string> moves;
  while (static_cast<int>(moves.size()) < max_moves_) {
    Layout best;
    if (best_move(task, costs, layout, goal, fixed, max_moves_ - static_cast<int>(moves.size()),
                  score, best) == 0) {
      break;
    }
    for (int t = 0; t < n; ++t) {
      if (same_shards(best[t], layout[t])) continue;
      const Plan before{layout[t]}, after{best[t]};
      std::vector<int> devices;
      for (const Shard& s : best[t]) devices.push_back(s.device);
      moves.push_back(fmt::format("'{}' {} -> {} on {}", task.tables[t].name,
                                  sharding_type(task, before, t), sharding_type(task, after, t),
                                  fmt::join(devices, ",")));
      fixed[t] = 1;
    }
    layout = std::move(best);
  }
  const std::string limit =
      max_moves_ < n ? fmt::format(" (at most {})", max_moves_) : std::string();
  ES_CHECK(score.overflow == 0,
           "re-planning from {}: after {} moves{} the plan still holds {} past the devices' "
           "memory: allow more (--max-moves)",
           old_.path, moves.size(), limit, format_bytes(score.overflow));
  summary_ = fmt::format(
      "re-planned from {}: {} moved{} ({}); the old plan on these tables {} (predicted "
      "{:.3f} ms{})",
      old_.path, count_of(static_cast<int>(moves.size()), "table"), limit,
      moves.empty() ? "none" : fmt::format("{}", fmt::join(moves, "; ")),
      start.overflow > 0 ? "does not fit" : "fits", start.cost_ms,
      start.overflow > 0 ? fmt::format(", {} past the caps", format_bytes(start.overflow)) : "");
  if (!carried.notes.empty()) {
    summary_ += fmt::format("; placed afresh or dropped: {}", fmt::join(carried.notes, "; "));
  }
  return assemble(layout);
}

}  // namespace

CarriedPlan carry_plan(const PlanTask& task, const PlanFile& old) {
  std::map<std::string, const PlanFileTable*> by_name;
  for (const PlanFileTable& t : old.tables) by_name[t.name] = &t;
  CarriedPlan c;
  for (int t = 0; t < task.num_tables(); ++t) {
    const std::string& name = task.tables[t].name;
    const auto it = by_name.find(name);
    std::string why;
    std::vector<Shard> shards;
    if (it == by_name.end()) {
      why = "not in the old plan";
    } else {
      if (it->second->dim != task.tables[t].dim) {
        why = fmt::format("dim {} there, {} now", it->second->dim, task.tables[t].dim);
      } else {
        shards = carried_shards(task, t, *it->second);
        why = unfit(task, t, shards);
      }
      by_name.erase(it);
    }
    if (!why.empty()) {
      c.unplaced.push_back(t);
      c.notes.push_back(fmt::format("'{}': {}", name, why));
      continue;
    }
    c.plan.shards.insert(c.plan.shards.end(), shards.begin(), shards.end());
  }
  for (const auto& [name, table] : by_name) {
    (void)table;
    c.notes.push_back(fmt::format("'{}': in the old plan, not in the task", name));
  }
  return c;
}

std::unique_ptr<Planner> make_replanner(std::unique_ptr<Planner> inner, PlanFile old,
                                        int max_moves) {
  return std::make_unique<Replanner>(std::move(inner), std::move(old), max_moves);
}

}  // namespace embshard
