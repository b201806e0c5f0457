// Planning in one call.
#include "embshard/search/planning.h"

#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/cost/measured_model.h"
#include "embshard/search/replan.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/units.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

// Explained against the model the search used (a verified plan too: the
// alternatives are predictions, not measurements).
void explain(const PlanRequest& r, const CostModel& model, PlanOutcome& out) {
  if (!r.explain) return;
  ShardCosts costs(out.task, model);
  out.result.explanation = explain_plan(out.task, out.result.plan, costs);
}

// The request's task: each device's memory for the tables (the given
// capacities less the reservation, or the default) and its optimizer's state.
PlanTask planning_task(const PlanRequest& r, Reporter& reporter) {
  const MemoryModel memory =
      r.step == StepKind::kInference ? MemoryModel{0, 0} : MemoryModel::of(r.optimizer);
  int64_t each = r.mem_per_device_bytes;
  const bool given = !r.mem_bytes.empty() || each > 0;
  if (!given) {
    each = default_device_capacity(r.workload.tables, r.devices, 1.25, memory);
    reporter.note(fmt::format(
        "plan: note: no memory per device given; assuming {} per device for the tables (1.25 x "
        "an even split of the tables, or of the largest table's 4-column piece where that is "
        "more)",
        format_bytes(each)));
  }
  std::vector<int64_t> capacity = device_capacities(r.devices, each, r.mem_bytes);
  std::vector<int64_t> reserved;
  for (int64_t& c : capacity) {
    if (!given) break;
    reserved.push_back(r.reserve.of(c));
    ES_CHECK(reserved.back() < c, "--reserve {} leaves nothing of a device's {} for the tables",
             r.reserve.str(), format_bytes(static_cast<double>(c)));
    c -= reserved.back();
  }
  PlanTask task = make_task(r.workload.tables, r.workload.batch_size, std::move(capacity),
                            r.constraints, memory, r.step);
  task.reserved_bytes = std::move(reserved);
  task.topology = r.topology;
  return task;
}

}  // namespace

void set_step(PlanRequest& r, const std::string& step, const std::string& optimizer,
              const std::string& step_option, const std::string& optimizer_option) {
  r.step = parse_step_kind(step, step_option);
  ES_CHECK(r.step == StepKind::kTraining || optimizer.empty(),
           "{} {}: an inference step updates nothing ({} inference counts weights only)",
           optimizer_option, optimizer, step_option);
  if (!optimizer.empty()) r.optimizer = parse_optimizer(optimizer, optimizer_option);
}

PlanOutcome plan_workload(const PlanRequest& r, Reporter& reporter) {
  ES_CHECK(r.devices > 0, "--devices is {}, must be at least 1", r.devices);
  ES_CHECK(r.devices <= kMaxDevices, "--devices is {}, past the {} embshard plans for",
           r.devices, kMaxDevices);
  check_table_sizes(r.workload.tables, r.step);
  check_topology(r.topology, r.devices);
  // Fail on a bad name before any work.
  auto planner = create_planner(r.algo, r.planner);
  check_policy_use(r.algo, r.planner);
  if (!r.replan_from.empty()) {
    ES_CHECK(r.verify.candidates == 0,
             "--from re-plans against the model; --verify measures "
             "fresh searches: use one of them");
    planner = make_replanner(std::move(planner), load_plan_file(r.replan_from), r.max_moves);
  }
  PlanOutcome out;
  out.task = planning_task(r, reporter);
  if (r.workload.trace_file.has_value() &&
      (out.task.types.any_row_split() || out.task.types.allows(ShardingType::kDataParallel))) {
    // Row pieces' and replicas' lookups measured from the trace (read when a
    // table is first split), not assumed.
    out.task.source_table.resize(out.task.num_tables());
    std::iota(out.task.source_table.begin(), out.task.source_table.end(), 0);
    out.task.piece_stats = std::make_shared<PieceStats>(r.workload.trace_path());
  }
  CostModelOptions model_options = r.model;
  if (model_options.batch_size == 0) model_options.batch_size = out.task.batch_size;
  model_options.forward_only = r.step == StepKind::kInference;
  if (r.cost_model == "measured") {  // it runs the workload's shards on the executor
    model_options.workload_dir = r.workload.dir;
  }
  const CostModel model = open_cost_model(r.cost_model, model_options, reporter);
  reporter.note(
      fmt::format("plan: {} from {}; {}{}; {} against the {} cost model",
                  count_of(out.task.num_tables(), "table"), r.workload.source,
                  count_of(out.task.num_devices(), "device"),
                  r.topology.hierarchical(r.devices) ? " on " + r.topology.str(r.devices) : "",
                  r.algo, model.name));
  const VerifyOptions& v = r.verify;
  if (v.candidates == 0) {
    out.result = make_plan(*planner, out.task, model);
    explain(r, model, out);
    return out;
  }
  ES_CHECK(v.candidates >= 1, "--verify is {}, must be at least 1", v.candidates);
  ES_CHECK(v.rounds >= 1, "--verify-rounds is {}, must be at least 1", v.rounds);
  ES_CHECK(v.rounds == 1 || r.cost_model != "measured",
           "--verify-rounds {}: the measured cost model has nothing to correct (use 1)", v.rounds);
  ES_CHECK(!r.workload.dir.empty() && r.workload.trace_file.has_value(),
           "--verify measures plans with the workload's traces: give a workload directory with "
           "a trace ({} has none)",
           r.workload.source);
  CostModelOptions truth_options = model_options;
  truth_options.workload_dir = r.workload.dir;
  // Measured compute beside predicted comm: on the model's scale where it
  // has one, so that the two keep the proportions the model learned.
  const auto measured = make_measured_compute_model(truth_options);
  const ReferenceScale scale =
      model_reference_scale(r.cost_model, model_options.model_dir, measured->executor_name(),
                            r.devices, out.task.batch_size);
  const std::string what =
      fmt::format("the search's {}{}{}", count_of(v.candidates, "best plan"),
                  v.rounds == 1 ? "" : fmt::format(" a round (up to {} rounds)", v.rounds),
                  v.rivals.empty() ? "" : fmt::format(" and {}'s", fmt::join(v.rivals, "'s, ")));
  if (scale.compute) {
    measured->set_probe_reference(*scale.compute);
    reporter.note(fmt::format("plan: verifying {} on the executor, on the cost model's scale ({})",
                              what, scale.source));
  } else {
    reporter.note(
        fmt::format("plan: verifying {} on the executor ({} s of reference probe "
                    "first: {})",
                    what, r.model.reference_window_s, scale.note));
  }
  const CostModel truth{measured, model.comm,
                        "measured compute (" + r.model.executor + "); comm: " + model.name,
                        ModelSource{}};
  out.result = make_verified_plan(*planner, out.task, model, truth, v);
  explain(r, model, out);
  return out;
}

PlanResult plan_task(const PlanTask& task, const std::string& algo, const PlannerOptions& options,
                     const CostModel& model) {
  auto planner = create_planner(algo, options);
  return make_plan(*planner, task, model);
}

}  // namespace embshard
