// Planning in one call: from a workload's tables and the devices to a
// validated, predicted plan. This is what `embshard plan`, the demo, the
// evaluation and the planner benchmark call; nothing else assembles task,
// cost model and planner by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/cost/cost_model.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/result.h"
#include "embshard/search/planner.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct PlanRequest {
  Workload workload;  // the tables and their batch; `source` names them in notes
  int devices = 0;
  // Memory: one figure for every device, or one per device; neither: a default
  // (default_device_capacity) that the reporter is told about.
  int64_t mem_per_device_bytes = 0;
  std::vector<int64_t> mem_bytes;
  TaskConstraints constraints;
  std::string algo = "neuroshard";
  PlannerOptions planner;
  std::string cost_model = "neural";  // "neural" falls back to "analytic" without models
  CostModelOptions model;             // batch_size 0: the workload's
  // Verification: measure this many of the search's best distinct plans on
  // the executor (the workload's traces; communication from the cost model)
  // and return the measured fastest. 0: off. Needs a workload with a trace.
  int verify = 0;
  // Rounds of verification: each after the first plans against the model
  // corrected by the devices measured so far and measures its new plans. The
  // measured cost model has nothing to correct: 1 there (the CLI's default).
  int verify_rounds = 3;
  // Planners whose plan is measured beside the search's (VerifyOptions::rivals).
  std::vector<std::string> verify_rivals = {"torchrec"};
  // The leading candidates measured twice more, compute afresh, and chosen
  // among on the median (VerifyOptions::leaders). 0: none.
  int verify_leaders = 0;
  // With verify: each table measured alone before the first search
  // (VerifyOptions::measure_tables).
  bool verify_tables = false;
  bool explain = false;  // each table's decision against its best alternative
  std::string executor = "cpu";
  double reference_window_s = 20;  // the measured compute's probe reference
};

struct PlanOutcome {
  PlanTask task;
  PlanResult result;
};

// Checks the request (an unknown planner or cost model, a device count < 1,
// tables that cannot fit: Error before any search), builds the task, opens the
// cost model and plans. Notes (assumed memory, model fallback, what is
// planned against what) go to `reporter`.
PlanOutcome plan_workload(const PlanRequest& request, Reporter& reporter);

// The planner `algo` on a task against an open cost model (an evaluation
// plans many tasks against one model).
PlanResult plan_task(const PlanTask& task, const std::string& algo, const PlannerOptions& options,
                     const CostModel& model);

}  // namespace embshard
