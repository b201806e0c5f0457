// embshard plan: shard a workload's tables across devices and show the plan.
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/table_specs.h"
#include "options.h"

namespace embshard::cli {
namespace {

struct PlanArgs {
  PlanRequest request;
  std::string workload_dir, tables_file, profile = "2021";
  std::vector<std::string> pins;
  std::string out, svg, trace;
  std::string sharding_types;
  std::string verify_rivals = "torchrec";
  std::string reserve = "15%", optimizer, task = "training";
  bool verbose = false;
  bool mem_per_device_given = false;
  bool verify_rounds_given = false;
};

Workload read_tables(const PlanArgs& a) {
  ES_CHECK(a.workload_dir.empty() || a.tables_file.empty(),
           "give a workload directory or --tables, not both");
  if (!a.workload_dir.empty()) {
    Workload w = load_workload(a.workload_dir);
    w.source = a.workload_dir;
    return w;
  }
  if (!a.tables_file.empty()) return load_table_specs(a.tables_file, a.profile);
  return default_workload();
}

TablePin parse_pin(const std::string& pin) {
  const size_t eq = pin.rfind('=');
  ES_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < pin.size(),
           "--pin '{}': expected TABLE=DEVICE", pin);
  try {
    size_t used = 0;
    const int device = std::stoi(pin.substr(eq + 1), &used);
    if (used == pin.size() - eq - 1) return {pin.substr(0, eq), device};
  } catch (const std::exception&) {
  }
  ES_THROW("--pin '{}': device '{}' is not a number", pin, pin.substr(eq + 1));
}

void run_plan(PlanArgs& a) {
  PlanRequest& r = a.request;
  for (int d : r.constraints.split.allowed) {
    ES_CHECK(d > 0 && d % 4 == 0, "--split-dims value {} is not a positive multiple of 4", d);
  }
  for (const std::string& pin : a.pins) r.constraints.pins.push_back(parse_pin(pin));
  if (!a.sharding_types.empty()) {
    r.constraints.types = ShardingTypes::parse(a.sharding_types, "--sharding-types");
  }
  ES_CHECK(!a.mem_per_device_given || r.mem_per_device_bytes > 0,
           "--mem-per-device is 0: a device needs memory (leave it out for the default)");
  r.reserve = StorageReserve::parse(a.reserve, "--reserve");
  set_step(r, a.task, a.optimizer, "--task", "--optimizer");
  // Before the search, not after it.
  VerifyOptions& v = r.verify;
  ES_CHECK(v.candidates >= 0,
           "--verify is {}: the number of plans to measure, 0 (the default) for none",
           v.candidates);
  ES_CHECK(v.rounds >= 1, "--verify-rounds is {}: at least 1", v.rounds);
  ES_CHECK(!a.verify_rounds_given || v.candidates > 0, "--verify-rounds {} needs --verify N",
           v.rounds);
  // The measured cost model has nothing for later rounds to correct.
  if (!a.verify_rounds_given && r.cost_model == "measured") v.rounds = 1;
  ES_CHECK(!v.measure_tables || v.candidates > 0, "--expert verify-tables needs --verify N");
  v.rivals = parse_verify_rivals(a.verify_rivals, "--verify-rivals");
  ES_CHECK(v.leaders >= 0, "--verify-leaders is {}: at least 0", v.leaders);
  ES_CHECK(std::isfinite(r.model.reference_window_s) && r.model.reference_window_s >= 0,
           "--reference-window-s is {}: seconds, at least 0", r.model.reference_window_s);
  check_distinct_outputs({{"--out", a.out}, {"--svg", a.svg}, {"--trace", a.trace}});
  if (!a.out.empty()) check_writable(a.out, "--out");
  if (!a.svg.empty()) check_writable(a.svg, "--svg");
  if (!a.trace.empty()) check_writable(a.trace, "--trace");
  r.workload = read_tables(a);
  const PlanOutcome p = plan_workload(r, stderr_reporter());
  // Everything is computed before anything is written: no partial outputs.
  const std::string json = plan_to_json(p.task, p.result).dump(1) + "\n";
  const std::string svg = a.svg.empty() ? "" : plan_svg(p.task, p.result);
  const PlanResult& res = p.result;
  const VerifiedCandidate* chosen =
      res.verification ? &res.verification->candidates[res.verification->chosen] : nullptr;
  const std::string trace =
      a.trace.empty()
          ? ""
          : (chosen ? iteration_trace(p.task, res.plan, chosen->measured,
                                      "measured: " + res.verification->truth, &chosen->predicted,
                                      "predicted: " + res.cost_model)
                    : iteration_trace(p.task, res.plan, res.predicted, "predicted: " + res.cost_model))
                    .dump(1) +
                "\n";
  fmt::print("{}", plan_report(p.task, p.result, a.verbose));
  if (!a.out.empty()) {
    write_file_atomic(a.out, json);
    fmt::print("wrote {}\n", a.out);
  }
  if (!a.svg.empty()) {
    write_file_atomic(a.svg, svg);
    fmt::print("wrote {}\n", a.svg);
  }
  if (!a.trace.empty()) {
    write_file_atomic(a.trace, trace);
    fmt::print("wrote {} (open in ui.perfetto.dev or chrome://tracing)\n", a.trace);
  }
}

// --mem-per-device (returned), --mem, --reserve, --optimizer.
CLI::Option* add_memory_options(CLI::App* cmd, PlanArgs& a) {
  PlanRequest& r = a.request;
  CLI::Option* per_device =
      add_bytes_option(cmd, "--mem-per-device", r.mem_per_device_bytes, "Memory of each device");
  per_device->excludes(
      add_bytes_list_option(cmd, "--mem", r.mem_bytes, "Memory of every device (a list)"));
  cmd->add_option("--reserve", a.reserve,
                  "Of each given device's memory, kept for what is not an embedding table: a "
                  "share (15%) or an amount (2GB, 0)")
      ->capture_default_str();
  cmd->add_option(
      "--optimizer", a.optimizer,
      "Whose state memory counts: " + one_of(optimizer_names()) + " (default rowwise_adagrad)");
  return per_device;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  PlanRequest& r = a->request;
  PlannerOptions& p = r.planner;
  CLI::App* cmd = app.add_subcommand(
      "plan", "Shard embedding tables across devices (NeuroShard search or a baseline)");
  cmd->add_option("workload", a->workload_dir, "Workload directory (default: built-in 100 tables)");
  cmd->add_option("--tables", a->tables_file, "Table-spec JSON instead of a workload");
  cmd->add_option("--profile", a->profile, "Synthetic profile assumed where --tables omits "
                  "pooling factors or histograms")->capture_default_str();
  cmd->add_option("--devices", r.devices, "Number of devices")->required();
  add_topology_options(cmd, r.topology);
  cmd->add_option("--task", a->task,
                  "The step planned: training, or inference (the forward alone: weights only, "
                  "int8 and int4 tables allowed)")
      ->capture_default_str();
  CLI::Option* per_device = add_memory_options(cmd, *a);
  cmd->add_option("--algo", r.algo, "Planner: " + planner_choices())->capture_default_str();
  cmd->add_option("--cost-model", r.cost_model, "Cost model: " + one_of(cost_model_names()))
      ->capture_default_str();
  cmd->add_option("--model", r.model.model_dir,
                  "Neural model directory (default: the shipped models/neural)");
  cmd->add_option("--calibration", r.model.calibration,
                  "Analytic model calibration file (default: the shipped models/analytic.json)");
  cmd->add_option("--pin", a->pins, "TABLE=DEVICE: keep a table on a device (repeatable)");
  cmd->add_option("--no-split", r.constraints.no_split, "TABLE: never split this table (repeatable)");
  cmd->add_option("--sharding-types", a->sharding_types,
                  "Sharding types plans may use, comma-separated (default: all): " +
                      one_of(sharding_type_names()));
  add_list_option(cmd, "--split-dims", r.constraints.split.allowed,
                  "Column widths splits may produce (multiples of 4; default: any)");
  add_seed_option(cmd, p.seed, "Seed (random planner)");
  cmd->add_option("--policy", p.policy_dir, "dreamshard, autoshard: policy directory from "
                  "`embshard train-policy` (default: the shipped models/policies/NAME)");
  add_search_threads_option(cmd, p.threads);
  cmd->add_option("--verify", r.verify.candidates,
                  "Measure the search's N best distinct plans a round on the executor (a workload "
                  "with traces) and return the measured fastest")
      ->capture_default_str();
  CLI::Option* rounds = cmd->add_option(
      "--verify-rounds", r.verify.rounds,
      "With --verify: rounds; each after the first plans again against the model corrected by "
      "the devices measured so far and measures its N best (default 3; 1 with --cost-model "
      "measured)");
  cmd->add_option("--verify-rivals", a->verify_rivals,
                  "With --verify: planners whose plan is measured beside the search's, "
                  "comma-separated, or none")
      ->capture_default_str();
  cmd->add_option("--verify-leaders", r.verify.leaders,
                  "With --verify: the leading candidates measured twice more, compute afresh, "
                  "and the choice among them on the median; 0: none")
      ->capture_default_str();
  add_executor_option(cmd, r.model.executor, "With --verify: where plans run: ");
  cmd->add_option("--reference-window-s", r.model.reference_window_s,
                  "With --verify: seconds of reference-probe runs measurements are normalized to")
      ->capture_default_str();
  add_thread_cpu_time_flag(cmd, r.model.thread_cpu_time);
  cmd->add_option("-o,--out", a->out, "Write the plan JSON here");
  cmd->add_option("--svg", a->svg, "Write an SVG picture of the plan here");
  cmd->add_option("--trace", a->trace,
                  "Write the iteration per device as a Chrome/Perfetto trace (measured with "
                  "--verify, else predicted)");
  cmd->add_flag("--verbose", a->verbose, "Also print one row per table, and every device past 32");
  cmd->add_option("--from", r.replan_from,
                  "Re-plan: improve this plan file (the tables matched by name) instead of "
                  "planning afresh");
  cmd->add_option("--max-moves", r.max_moves,
                  "With --from: change at most this many of its tables (default: no limit)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->needs("--from");
  cmd->add_flag("--explain", r.explain,
                "Say why: each table's decision (whole, split, replicated; where) against its "
                "best single alternative, both predicted as whole plans");
  std::vector<ExpertSetting> expert = search_settings(p);
  expert.push_back(expert_switch("verify-tables", r.verify.measure_tables));
  add_expert_option(cmd, std::move(expert));
  cmd->callback([a, per_device, rounds] {
    a->mem_per_device_given = per_device->count() > 0;
    a->verify_rounds_given = rounds->count() > 0;
    run_plan(*a);
  });
}

}  // namespace embshard::cli
