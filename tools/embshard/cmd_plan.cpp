// embshard plan: shard a workload's tables across devices and show the plan.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/plan/report.h"
#include "embshard/plan/table_input.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/workload.h"

namespace embshard::cli {
namespace {

struct PlanArgs {
  std::string workload_dir, tables_file, profile = "2021";
  int devices = 0;
  int64_t mem_per_device = 0;
  std::vector<int64_t> mem_list;
  std::string algo = "neuroshard", cost_model = "neural", model_dir;
  std::string calibration;
  std::vector<std::string> pins, no_split;
  std::vector<int> split_dims;
  PlannerOptions planner;
  std::string out, svg;
  bool verbose = false;
};

PlanTables read_tables(const PlanArgs& a) {
  ES_CHECK(a.workload_dir.empty() || a.tables_file.empty(),
           "give a workload directory or --tables, not both");
  if (!a.workload_dir.empty()) {
    const Workload w = load_workload(a.workload_dir);
    return {w.tables, w.batch_size, a.workload_dir};
  }
  if (!a.tables_file.empty()) return load_table_specs(a.tables_file, a.profile);
  return default_plan_tables();
}

TaskConstraints read_constraints(const PlanArgs& a) {
  TaskConstraints c;
  for (const std::string& pin : a.pins) {
    const size_t eq = pin.rfind('=');
    ES_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < pin.size(),
             "--pin '{}': expected TABLE=DEVICE", pin);
    int device = -1;
    try {
      size_t used = 0;
      device = std::stoi(pin.substr(eq + 1), &used);
      ES_CHECK(used == pin.size() - eq - 1, "trailing characters");
    } catch (const std::exception&) {
      ES_THROW("--pin '{}': device '{}' is not a number", pin, pin.substr(eq + 1));
    }
    c.pins.push_back({pin.substr(0, eq), device});
  }
  c.no_split = a.no_split;
  c.split.allowed = a.split_dims;
  for (int d : a.split_dims) {
    ES_CHECK(d > 0 && d % 4 == 0, "--split-dims value {} is not a positive multiple of 4", d);
  }
  return c;
}

std::unique_ptr<CostModel> open_cost_model(const PlanArgs& a, int64_t batch_size) {
  CostModelOptions o;
  o.model_dir = a.model_dir;
  o.calibration = a.calibration;
  o.batch_size = batch_size;
  const std::string neural_dir =
      a.model_dir.empty() ? shipped_models_dir() + "/neural" : a.model_dir;
  if (a.cost_model == "neural" && !std::filesystem::exists(neural_dir)) {
    std::fprintf(stderr, "plan: note: no trained model directory %s; using the analytic cost "
                 "model instead\n", neural_dir.c_str());
    return create_cost_model("analytic", o);
  }
  return create_cost_model(a.cost_model, o);
}

int64_t default_capacity(const std::vector<TableSpec>& tables, int devices) {
  const int64_t cap = default_device_capacity(tables, devices);
  std::fprintf(stderr, "plan: note: no --mem-per-device or --mem; assuming %.3f GB per device "
               "(1.25 x an even split of the tables, or of the largest table's 4-column piece "
               "where that is more)\n", cap / 1e9);
  return cap;
}

void run_plan(const PlanArgs& a) {
  ES_CHECK(a.devices > 0, "--devices is {}, must be at least 1", a.devices);
  // Fail on a bad name before any work.
  auto planner = create_planner(a.algo, a.planner);
  PlanTables in = read_tables(a);
  const int64_t each = a.mem_list.empty() && a.mem_per_device == 0
                           ? default_capacity(in.tables, a.devices)
                           : a.mem_per_device;
  std::vector<int64_t> caps = device_capacities(a.devices, each, a.mem_list);
  const PlanTask task = make_task(std::move(in.tables), in.batch_size, std::move(caps),
                                  read_constraints(a));
  auto model = open_cost_model(a, task.batch_size);
  std::fprintf(stderr, "plan: %d tables from %s; %d devices; %s against the %s cost model\n",
               task.num_tables(), in.source.c_str(), task.num_devices(), a.algo.c_str(),
               model->name().c_str());
  const PlanResult r = make_plan(*planner, task, *model);
  // Everything is computed before anything is written: no partial outputs.
  const std::string json = plan_to_json(task, r).dump(1) + "\n";
  const std::string svg = a.svg.empty() ? "" : plan_svg(task, r);
  fmt::print("{}", plan_report(task, r, a.verbose));
  if (!a.out.empty()) {
    write_file_atomic(a.out, json);
    fmt::print("wrote {}\n", a.out);
  }
  if (!a.svg.empty()) {
    write_file_atomic(a.svg, svg);
    fmt::print("wrote {}\n", a.svg);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Shard embedding tables across devices (NeuroShard search or a baseline)");
  cmd->add_option("workload", a->workload_dir, "Workload directory (default: built-in 100 tables)");
  cmd->add_option("--tables", a->tables_file, "Table-spec JSON instead of a workload");
  cmd->add_option("--profile", a->profile, "Synthetic profile assumed where --tables omits "
                  "pooling factors or histograms")->capture_default_str();
  cmd->add_option("--devices", a->devices, "Number of devices")->required();
  cmd->add_option("--mem-per-device", a->mem_per_device, "Memory of each device, bytes");
  cmd->add_option("--mem", a->mem_list, "Memory of every device, bytes (a list)")->delimiter(',');
  cmd->add_option("--algo", a->algo, fmt::format("Planner: {}", fmt::join(planner_names(), " | ")))
      ->capture_default_str();
  cmd->add_option("--cost-model", a->cost_model, "neural | analytic")->capture_default_str();
  cmd->add_option("--model", a->model_dir, "Neural model directory (default: the shipped models/neural)");
  cmd->add_option("--calibration", a->calibration,
                  "Analytic model calibration file (default: the shipped models/analytic.json)");
  cmd->add_option("--pin", a->pins, "TABLE=DEVICE: keep a table on a device (repeatable)");
  cmd->add_option("--no-split", a->no_split, "TABLE: never split this table (repeatable)");
  cmd->add_option("--split-dims", a->split_dims, "Column widths splits may produce "
                  "(multiples of 4; default: any)")->delimiter(',');
  cmd->add_option("--seed", a->planner.seed, "Seed (random planner)")->capture_default_str();
  cmd->add_option("--beam-width", a->planner.beam_width, "neuroshard beam width")->capture_default_str();
  cmd->add_option("--max-steps", a->planner.max_steps, "neuroshard beam steps")->capture_default_str();
  cmd->add_option("--candidates", a->planner.candidates, "neuroshard: top-k pieces by size "
                  "and by cost to try splitting")->capture_default_str();
  cmd->add_option("--grid-steps", a->planner.grid_steps, "neuroshard dim-sum caps "
                  "(1.0..1.5 x mean)")->capture_default_str();
  cmd->add_option("--threads", a->planner.threads, "neuroshard search threads (0: one per "
                  "hardware thread; the plan is the same for any count)")->capture_default_str();
  cmd->add_option("--out", a->out, "Write the plan JSON here");
  cmd->add_option("--svg", a->svg, "Write an SVG picture of the plan here");
  cmd->add_flag("--verbose", a->verbose, "Also print one row per table");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace embshard::cli
