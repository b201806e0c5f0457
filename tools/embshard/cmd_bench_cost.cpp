// embshard bench cost-model: the neural model's fast path against libtorch.
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "embshard/bench/cost_model_bench.h"
#include "embshard/cost/compute_model.h"

#ifdef EMBSHARD_WITH_TORCH
#include "embshard/cost/neural/reference.h"
#endif

namespace embshard::cli {

void add_bench_cost_model_command(CLI::App& bench) {
  auto o = std::make_shared<CostModelBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "cost-model", "Shard costs per second of the neural model's fast path vs libtorch");
  cmd->add_option("--model", o->model_dir, "Model directory")->required();
  cmd->add_option("--workload", o->workload_dir,
                  "Take tables from this workload (default: random tables)");
  cmd->add_option("--pool", o->pool, "Random tables to register")->capture_default_str();
  cmd->add_option("--tables-per-shard", o->tables_per_shard, "Tables per shard")
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Seconds per measured path")->capture_default_str();
  add_seed_option(cmd, o->seed, "Seed of tables and shards");
  cmd->callback([o] {
    std::unique_ptr<ComputeModel> reference;
#ifdef EMBSHARD_WITH_TORCH
    reference = std::make_unique<TorchComputeReference>(load_neural_model(o->model_dir));
#endif
    fmt::print("{}", cost_model_bench_report(run_cost_model_bench(*o, reference.get())));
  });
}

}  // namespace embshard::cli
