// embshard train-policy: a learned placement policy (DreamShard, AutoShard)
// trained on tasks drawn from table pools; written as a policy directory that
// `plan --algo NAME --policy DIR` and eval use.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "options.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"

#ifdef EMBSHARD_WITH_TORCH
#include "embshard/eval/train_policy.h"
#include "embshard/util/reporter.h"
#endif

namespace embshard::cli {
namespace {

#ifdef EMBSHARD_WITH_TORCH
struct TrainPolicyArgs {
  PolicyTrainOptions options;
  std::string algo = "dreamshard";
  std::string tables = "20-60";
};

void run_train_policy(TrainPolicyArgs& a) {
  PolicyTrainOptions o = a.options;
  o.kind = parse_policy_kind(a.algo);
  char tail = 0;
  if (std::sscanf(a.tables.c_str(), "%d-%d%c", &o.min_tables, &o.max_tables, &tail) != 2) {
    ES_CHECK(std::sscanf(a.tables.c_str(), "%d%c", &o.min_tables, &tail) == 1,
             "train-policy: --tables is '{}', expected N or MIN-MAX", a.tables);
    o.max_tables = o.min_tables;
  }
  o.reporter = &stderr_reporter();
  const PolicyTrainResult r = train_policy(o);
  for (const std::string& note : r.notes) fmt::print("{}\n", note);
  fmt::print("iteration  cost-net loss  mean reward  validation cost / untrained policy's\n");
  for (const auto& h : r.history) {
    const double ratio = h.at("validation_ratio").get<double>();  // 0: no validation tasks
    fmt::print("{:>9}  {:>13.4f}  {:>11.4f}  {:>10}\n", h.at("iteration").get<int>(),
               h.at("cost_loss").get<double>(), h.at("mean_reward").get<double>(),
               ratio > 0 ? fmt::format("{:.4f}", ratio) : "-");
  }
  fmt::print("policy written to {} (manifest.json, weights; checkpoint/ resumes)\n", o.out_dir);
}
#endif

}  // namespace

void add_train_policy_command(CLI::App& app) {
#ifdef EMBSHARD_WITH_TORCH
  auto args = std::make_shared<TrainPolicyArgs>();
  PolicyTrainOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand(
      "train-policy", "Train a learned placement policy (DreamShard, AutoShard) on task pools");
  cmd->add_option("--algo", args->algo, "Policy: " + one_of(policy_kind_names()))
      ->capture_default_str();
  cmd->add_option("--pool", o.pool_dirs, "Workload(s) tasks are drawn from (repeatable)")
      ->required();
  cmd->add_option("-o,--out", o.out_dir, "Policy directory to write")->required();
  cmd->add_option("--devices", o.devices, "Devices of every training task")->capture_default_str();
  cmd->add_option("--tables", args->tables, "Tables per task: N or MIN-MAX")->capture_default_str();
  add_list_option(cmd, "--dims", o.dims, "Dims a table is drawn at");
  cmd->add_option("--min-headroom", o.min_headroom,
                  "Memory per device: at least this x an even split")
      ->capture_default_str();
  cmd->add_option("--max-headroom", o.max_headroom, "... and at most this")->capture_default_str();
  add_bytes_option(cmd, "--mem-cap", o.mem_cap_bytes,
                   "Tables bigger than this are not drawn (as `embshard tasks --mem-cap`; "
                   "default: none)");
  cmd->add_option("--iterations", o.iterations, "Iterations (each: measure, cost net, REINFORCE)")
      ->capture_default_str();
  cmd->add_option("--measured-plans", o.measured_plans,
                  "DreamShard: plans of the current policy whose real cost is taken per iteration")
      ->capture_default_str();
  cmd->add_option("--cost-epochs", o.cost_epochs, "DreamShard: cost-network epochs per iteration")
      ->capture_default_str();
  cmd->add_option("--updates", o.updates, "REINFORCE updates per iteration")->capture_default_str();
  cmd->add_option("--tasks-per-update", o.tasks_per_update, "Tasks per update")
      ->capture_default_str();
  cmd->add_option("--episodes", o.episodes, "Sampled episodes per task in an update")
      ->capture_default_str();
  cmd->add_option("--lr", o.lr, "Policy learning rate (Adam)")->capture_default_str();
  cmd->add_option("--cost-lr", o.cost_lr, "Cost-network learning rate")->capture_default_str();
  cmd->add_option("--entropy", o.entropy, "Entropy bonus")->capture_default_str();
  cmd->add_option("--reward", o.reward,
                  "DreamShard's reward: overall (the cost network's overall head, as published) | "
                  "device_max (its largest device compute + communication)")
      ->capture_default_str();
  cmd->add_option("--validation-tasks", o.validation_tasks,
                  "Fixed tasks the greedy policy is scored on after each iteration")
      ->capture_default_str();
  cmd->add_option("--truth", o.truth,
                  "Where plan costs come from: neural | analytic (a cost model standing in for "
                  "measurements) | measured (the executor, with the pool's traces)")
      ->capture_default_str();
  cmd->add_option("--model", o.truth_options.model_dir,
                  "Neural model directory of --truth neural (default: the shipped one)");
  add_executor_option(cmd, o.truth_options.executor, "--truth measured: executor: ");
  cmd->add_option("--threads", o.truth_options.threads, "--truth measured: executor threads")
      ->capture_default_str();
  cmd->add_option("--reference-window-s", o.truth_options.reference_window_s,
                  "--truth measured: seconds of reference probe")
      ->capture_default_str();
  cmd->add_option("--hidden", o.hidden, "Hidden layer width")->capture_default_str();
  cmd->add_option("--embed", o.embed, "Table encoding width")->capture_default_str();
  add_seed_option(cmd, o.seed, "Seed of draws, initialisation and sampling");
  cmd->callback([args] { run_train_policy(*args); });
#else
  CLI::App* cmd =
      app.add_subcommand("train-policy", "Train a learned placement policy (needs libtorch)");
  cmd->allow_extras();
  cmd->callback([] {
    ES_THROW("train-policy: this embshard was built without libtorch (EMBSHARD_WITH_TORCH=OFF)");
  });
#endif
}

}  // namespace embshard::cli
