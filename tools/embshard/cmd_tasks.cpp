// embshard tasks: evaluation tasks drawn from a table pool.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "options.h"

namespace embshard::cli {
namespace {

struct TasksArgs {
  TaskGenOptions options;
  std::string tables = "20-60";
  std::string out;
};

void run_tasks(TasksArgs& a) {
  int lo = 0, hi = 0;
  char tail = 0;
  if (std::sscanf(a.tables.c_str(), "%d-%d%c", &lo, &hi, &tail) != 2) {
    ES_CHECK(std::sscanf(a.tables.c_str(), "%d%c", &lo, &tail) == 1,
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

}  // namespace

void add_tasks_command(CLI::App& app) {
  auto t = std::make_shared<TasksArgs>();
  CLI::App* cmd = app.add_subcommand("tasks", "Draw evaluation tasks from a table pool");
  cmd->add_option("--pool", t->options.pool_dir, "Workload the tables come from")->required();
  cmd->add_option("--tables", t->tables, "Tables per task: N or MIN-MAX")->capture_default_str();
  add_list_option(cmd, "--dims", t->options.dims, "Dims a table is drawn at");
  add_bytes_option(cmd, "--mem-cap", t->options.mem_cap_bytes, "Memory per device")->required();
  cmd->add_option("--count", t->options.count, "Tasks")->capture_default_str();
  cmd->add_flag("--oversized", t->options.oversized,
                "Keep tables larger than a device at their dim (they must be split)");
  cmd->add_flag("--whole-pool", t->options.whole_pool,
                "One task instead: every pool table at its own dim (a user's tables, e.g. from "
                "synth --spec)")
      ->excludes("--tables")
      ->excludes("--dims")
      ->excludes("--count")
      ->excludes("--oversized");
  add_seed_option(cmd, t->options.seed, "Seed");
  cmd->add_option("-o,--out", t->out, "Task file to write")->required();
  cmd->callback([t] { run_tasks(*t); });
}

}  // namespace embshard::cli
