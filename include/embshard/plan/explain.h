// Why a plan is what it is, table by table: the planner's decision for the
// table against the best single alternative the cost model finds, both
// predicted as whole plans. The alternative to a table whole on a device is
// the table whole on the best other device; to a split or replicated table,
// the table whole on the best device. Planner-agnostic: it reads the plan,
// not the search, so it explains every algorithm's plans the same way.
#pragma once

#include <string>
#include <vector>

#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"

namespace embshard {

struct Decision {
  int table = 0;
  std::string decision;      // "whole on device 2", "split: 2 column pieces on devices 0,1"
  std::string alternative;   // "whole on device 7"; "" when no other placement fits
  std::string no_alternative;  // then why: "pinned to device 0", "no other device", "none fits in memory"
  double cost_ms = 0;        // the plan's predicted cost
  double alternative_ms = 0; // the plan's predicted cost with the alternative instead
  // What the decision saves against the alternative, as a share of the plan's
  // cost (negative: the alternative predicts cheaper, e.g. a move the search
  // never tried); 0 when there is no alternative.
  double saving() const {
    return alternative.empty() || cost_ms <= 0 ? 0.0 : (alternative_ms - cost_ms) / cost_ms;
  }
};

// One Decision per table, in the task's order. Alternatives must fit in
// memory and keep pins; for tasks with many tables and devices only the
// `max_devices` least-loaded devices (and the table's own) are tried.
std::vector<Decision> explain_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs,
                                   int max_devices = 16);

// The decisions as a terminal table, largest saving first.
std::string explain_report(const PlanTask& task, const std::vector<Decision>& decisions);

}  // namespace embshard
