// Planning in one call: from a workload's tables and the devices to a
// validated, predicted plan. This is what `embshard plan`, the demo, the
// evaluation and the planner benchmark call; nothing else assembles task,
// cost model and planner by hand.
#pragma once

#include <cstdint>
#include <limits>
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
  Topology topology;  // the devices' hosts (default: one)
  // Memory: one figure for every device, or one per device; neither: a default
  // (default_device_capacity) that the reporter is told about.
  int64_t mem_per_device_bytes = 0;
  std::vector<int64_t> mem_bytes;
  // Taken off each given capacity for what is not embedding tables (not off
  // the default, which is sized from the tables).
  StorageReserve reserve;
  // Whose state memory counts (the cost models were measured with row-wise
  // Adagrad whatever this is).
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
  // Inference: weights only in memory (no optimizer), the forward's costs.
  StepKind step = StepKind::kTraining;
  TaskConstraints constraints;
  std::string algo = "neuroshard";
  PlannerOptions planner;
  std::string cost_model = "neural";  // "neural" falls back to "analytic" without models
  // batch_size 0: the workload's. Its executor, threads and reference window
  // are where and how the measured cost model and verification measure.
  CostModelOptions model;
  // Verification (make_verified_plan): measure the search's best
  // `verify.candidates` distinct plans a round on the executor (the workload's
  // traces; communication from the cost model) and return the measured
  // fastest. 0 candidates: off. Needs a workload with a trace. The measured
  // cost model has nothing for later rounds to correct: 1 round there (the
  // CLI's default).
  VerifyOptions verify = {.rounds = 3, .fresh_passes = 2, .rivals = {"torchrec"}};
  bool explain = false;  // each table's decision against its best alternative
  // Re-planning (replan.h): start from this plan file ("": plan afresh) and
  // move at most `max_moves` of its tables.
  std::string replan_from;
  int max_moves = std::numeric_limits<int>::max();
};

// The request's step and optimizer from their names, as `step_option` and
// `optimizer_option` (--task and --optimizer) give them; `optimizer` "": the
// default. Error where an inference step is given an optimizer.
void set_step(PlanRequest& request, const std::string& step, const std::string& optimizer,
              const std::string& step_option, const std::string& optimizer_option);

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
