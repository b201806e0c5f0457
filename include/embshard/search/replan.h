// Re-planning: improve an existing plan by moving at most K tables, as a user
// does when tables grow or devices change and the model in training should
// move as little as it can.
#pragma once

#include <memory>
#include <string>

#include "embshard/plan/plan.h"
#include "embshard/plan/plan_file.h"
#include "embshard/search/planner.h"

namespace embshard {

// The old plan's layout on the task's tables, matched by name: a table that
// grew keeps its devices and its row pieces their shares of the rows. A table
// the old plan lacks, or whose dim or devices no longer fit the task, is
// left out and named in `unplaced` (a note per table).
struct CarriedPlan {
  Plan plan;
  std::vector<int> unplaced;       // task tables the old plan cannot place
  std::vector<std::string> notes;  // why, and the old plan's tables the task lacks
};
CarriedPlan carry_plan(const PlanTask& task, const PlanFile& old);

// A planner that starts from `old` and changes at most `max_moves` of its
// tables, each to `inner`'s layout for it or whole onto another device, one
// move at a time, the one that lowers (memory past the caps, then the
// predicted cost) most, until no move helps. Tables the old plan cannot place
// take `inner`'s layout and do not count. Error when the moves cannot bring
// the plan within the memory caps. search_summary() lists what moved.
std::unique_ptr<Planner> make_replanner(std::unique_ptr<Planner> inner, PlanFile old,
                                        int max_moves);

}  // namespace embshard
