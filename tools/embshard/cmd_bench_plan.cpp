// embshard bench plan: how long the planner's search takes at several sizes.
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/bench/plan_bench.h"
#include "embshard/cost/cost_model.h"
#include "embshard/util/reporter.h"
#include "options.h"

namespace embshard::cli {

void add_bench_plan_command(CLI::App& bench) {
  const auto bench_plan_cost_models = [] {
    std::vector<std::string> names;
    for (const std::string& n : cost_model_names()) {
      if (n != "measured") names.push_back(n);
    }
    return names;
  };
  auto o = std::make_shared<PlanBenchOptions>();
  auto types = std::make_shared<std::string>();
  CLI::App* cmd = bench.add_subcommand("plan", "Time the planner's search at several task sizes");
  add_list_option(cmd, "--sizes", o->sizes, "TABLESxDEVICES list");
  add_list_option(cmd, "--cost-models", o->cost_models,
                  "Cost models: " + one_of(bench_plan_cost_models()) +
                      " (neural without models falls back to analytic; measured needs a "
                      "workload's traces: plan WORKLOAD --cost-model measured)");
  cmd->add_option("--model", o->model_dir, "Neural model directory (default: the shipped one)");
  add_list_option(cmd, "--algo", o->algos,
                  "Planners, comma-separated, each run at every size: " + one_of(planner_names()));
  cmd->add_option("--policy", o->planner.policy_dir,
                  "dreamshard, autoshard: policy directory (default: the shipped one)");
  cmd->add_option("--repeats", o->repeats, "Runs per size (median reported)")->capture_default_str();
  add_seed_option(cmd, o->seed, "Seed of the synthetic tables");
  add_search_threads_option(cmd, o->planner.threads);
  add_expert_option(cmd, search_settings(o->planner));
  cmd->add_option("--mem-slack", o->mem_slack, "Device memory as a multiple of an even share")
      ->capture_default_str();
  add_topology_options(cmd, o->topology);
  cmd->add_option("--sharding-types", *types,
                  "Sharding types plans may use, comma-separated (default: all): " +
                      one_of(sharding_type_names()));
  cmd->callback([o, types] {
    if (!types->empty()) o->types = ShardingTypes::parse(*types, "--sharding-types");
    fmt::print("{}", plan_bench_report(run_plan_bench(*o, stderr_reporter()), *o));
  });
}

}  // namespace embshard::cli
