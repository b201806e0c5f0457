// embshard tasks | eval: NeuroShard's evaluation on real execution.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace embshard::cli {
namespace {

struct TasksArgs {
  TaskGenOptions options;
  std::string tables = "20-60";
  std::string out;
};

void run_tasks(TasksArgs& a) {
  int lo = 0, hi = 0;
  if (std::sscanf(a.tables.c_str(), "%d-%d", &lo, &hi) != 2) {
    ES_CHECK(std::sscanf(a.tables.c_str(), "%d", &lo) == 1,
             "tasks: --tables is '{}', expected N or MIN-MAX", a.tables);
    hi = lo;
  }
  a.options.min_tables = lo;
  a.options.max_tables = hi;
  const Workload pool = load_workload(a.options.pool_dir);
  const auto tasks = generate_tasks(pool, a.options);
  save_tasks(a.out, a.options.pool_dir, tasks);
  fmt::print("wrote {} tasks of {} tables from {} to {}\n", tasks.size(), a.tables,
             a.options.pool_dir, a.out);
}

struct EvalArgs {
  EvalOptions options;
  bool json_output = false;
  std::string svg;
};

void run_eval_command(const EvalArgs& a, bool devices_given) {
  std::vector<nlohmann::json> records;
  std::string comm_source = kModelCommSource;
  int devices = a.options.devices;
  if (launched_with_several_ranks()) {
    EvalOptions o = a.options;
    if (!devices_given) o.devices = 0;  // one per rank
    MpiEvalResult r = run_eval_mpi(o);
    if (!r.root) return;  // ranks > 0 served rank 0's measurements
    records = std::move(r.records);
    comm_source = r.comm_source;
    devices = r.devices;
  } else {
    records = run_eval(a.options);
  }
  const auto summary = summarize_eval(records, a.options.algos);
  int tasks = 0;
  for (const auto& r : records) {
    bool planned = r.contains("algos");
    if (planned) {
      for (const auto& [name, x] : r["algos"].items()) planned = planned && !x.contains("error");
    }
    tasks += planned ? 1 : 0;
  }
  if (tasks < static_cast<int>(records.size())) {
    fmt::print(stderr,
               "{} of {} tasks do not fit {} devices or had an algorithm find no plan (see {}); "
               "they are left out\n",
               records.size() - tasks, records.size(), devices, a.options.out_path);
  }
  const std::string svg = a.svg.empty() ? "" : eval_svg(summary, tasks, devices);
  if (a.json_output) {
    fmt::print("{}\n", eval_summary_json(summary, tasks, comm_source).dump(2));
  } else {
    fmt::print("{}", eval_report(summary, tasks, comm_source));
  }
  if (!a.svg.empty()) write_file_atomic(a.svg, svg);
}

}  // namespace

void add_eval_commands(CLI::App& app) {
  auto t = std::make_shared<TasksArgs>();
  CLI::App* tasks = app.add_subcommand("tasks", "Draw evaluation tasks from a table pool");
  tasks->add_option("--pool", t->options.pool_dir, "Workload the tables come from")->required();
  tasks->add_option("--tables", t->tables, "Tables per task: N or MIN-MAX")->capture_default_str();
  tasks->add_option("--dims", t->options.dims, "Dims a table is drawn at")
      ->delimiter(',')
      ->capture_default_str();
  tasks->add_option("--mem-cap", t->options.mem_cap_bytes, "Memory per device, bytes")
      ->required();
  tasks->add_option("--count", t->options.count, "Tasks")->capture_default_str();
  tasks->add_option("--seed", t->options.seed, "Seed")->capture_default_str();
  tasks->add_option("-o,--out", t->out, "Task file to write")->required();
  tasks->callback([t] { run_tasks(*t); });

  auto e = std::make_shared<EvalArgs>();
  EvalOptions& o = e->options;
  o.algos = {"random", "size_greedy", "dim_greedy", "lookup_greedy", "size_lookup_greedy",
             "torchrec", "neuroshard"};
  CLI::App* eval = app.add_subcommand(
      "eval", "Plan every task with every algorithm and measure the plans on the executor");
  eval->add_option("--tasks", o.tasks_path, "Task file (embshard tasks)")->required();
  eval->add_option("--algos", o.algos, "Algorithms")->delimiter(',')->capture_default_str();
  CLI::Option* devices =
      eval->add_option("--devices", o.devices, "Devices (under mpirun: the ranks)")
          ->capture_default_str();
  eval->add_option("--cost-model", o.cost_model, "neural | analytic")->capture_default_str();
  eval->add_option("--model", o.model_dir, "Neural model directory (default: models/neural)");
  eval->add_option("--out", o.out_path, "Records, one per task (JSON lines; resumable)")
      ->required();
  eval->add_option("--threads", o.threads, "Executor threads per device")->capture_default_str();
  eval->add_option("--seed", o.planner.seed, "Seed of the random planner")->capture_default_str();
  eval->add_option("--plan-threads", o.planner.threads,
                   "neuroshard search threads (0: one per hardware thread)")
      ->capture_default_str();
  eval->add_option("--comm-warmup", o.comm_warmup, "Under mpirun: all-to-all runs not timed")
      ->capture_default_str();
  eval->add_option("--comm-repeats", o.comm_repeats,
                   "Under mpirun: timed all-to-all runs (median)")
      ->capture_default_str();
  eval->add_option("--comm-timeout-s", o.comm_timeout_s,
                   "Under mpirun: a collective not done by then ends the job")
      ->capture_default_str();
  eval->add_flag("--json", e->json_output, "Print the summary as JSON (algorithms.<name>...)");
  eval->add_option("--svg", e->svg, "Write a bar chart of the summary here");
  eval->callback([e, devices] { run_eval_command(*e, devices->count() > 0); });
}

}  // namespace embshard::cli
