// Planning in one call.
#include "embshard/search/planning.h"

#include <fmt/format.h>

#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/units.h"

namespace embshard {

PlanOutcome plan_workload(const PlanRequest& r, Reporter& reporter) {
  ES_CHECK(r.devices > 0, "--devices is {}, must be at least 1", r.devices);
  // Fail on a bad name before any work.
  auto planner = create_planner(r.algo, r.planner);
  int64_t each = r.mem_per_device_bytes;
  if (r.mem_bytes.empty() && each == 0) {
    each = default_device_capacity(r.workload.tables, r.devices);
    reporter.note(fmt::format(
        "plan: note: no memory per device given; assuming {} per device (1.25 x an even split "
        "of the tables, or of the largest table's 4-column piece where that is more)",
        format_bytes(each)));
  }
  PlanOutcome out;
  out.task = make_task(r.workload.tables, r.workload.batch_size,
                       device_capacities(r.devices, each, r.mem_bytes), r.constraints);
  CostModelOptions model_options = r.model;
  if (model_options.batch_size == 0) model_options.batch_size = out.task.batch_size;
  const CostModel model = open_cost_model(r.cost_model, model_options, reporter);
  reporter.note(fmt::format("plan: {} tables from {}; {} devices; {} against the {} cost model",
                            out.task.num_tables(), r.workload.source, out.task.num_devices(),
                            r.algo, model.name));
  out.result = make_plan(*planner, out.task, model);
  return out;
}

PlanResult plan_task(const PlanTask& task, const std::string& algo, const PlannerOptions& options,
                     const CostModel& model) {
  auto planner = create_planner(algo, options);
  return make_plan(*planner, task, model);
}

}  // namespace embshard
