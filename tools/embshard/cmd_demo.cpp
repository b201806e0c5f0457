// embshard demo: the pipeline on built-in defaults. Synthesizes a small
// workload calibrated to the 2021 statistics, measures the cost of random
// shards of it on the fused executor, then plans its sharding over a few
// devices with the shipped cost models, printing what it did at each step.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/bench/compute.h"
#include "embshard/cost/cost_model.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/report.h"
#include "embshard/search/planner.h"
#include "embshard/util/progress.h"
#include "embshard/util/record_file.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/synth.h"

namespace embshard::cli {
namespace {

struct DemoArgs {
  std::string dir = "out/demo";
  int devices = 4;
  SynthOptions synth;
  ComputeBenchOptions bench;
};

void print_workload_summary(const Workload& w, const PublishedStats& target) {
  std::vector<TableStats> stats;
  for (const TableSpec& spec : w.tables) stats.push_back(table_stats_from_spec(spec, w.batch_size));
  const WorkloadStats agg = aggregate_stats(w.tables, stats, w.batch_size);
  const Calibration cal = compare_to_published(agg, target);
  fmt::print("workload {}: {} tables x batch {}, {:.1f} MB of fp32 weights\n", w.dir,
             w.tables.size(), w.batch_size, agg.weight_bytes / 1e6);
  fmt::print("  avg pooling factor {:.2f} (published {:.2f}), unique ratio {:.4f} (published "
             "{:.4f})\n",
             agg.avg_pooling_factor, target.avg_pooling_factor, agg.unique_ratio,
             target.unique_ratio);
  fmt::print("  reuse histograms vs published: total variation {:.4f} (rows), {:.4f} (lookups)\n",
             cal.row_reuse_tv, cal.lookup_reuse_tv);
}

// NeuroShard's search against the shipped neural models (the analytic model
// where none are shipped), memory capped at 1.25 x an even split.
void plan_demo_workload(const Workload& w, int devices) {
  const std::string neural_dir = shipped_models_dir() + "/neural";
  const std::string model_name = std::filesystem::exists(neural_dir) ? "neural" : "analytic";
  fmt::print("\n[3/3] plan {} --devices {} --algo neuroshard --cost-model {}\n", w.dir, devices,
             model_name);
  std::fflush(stdout);
  const int64_t capacity = default_device_capacity(w.tables, devices);
  const PlanTask task = make_task(w.tables, w.batch_size,
                                  device_capacities(devices, capacity, {}), {});
  CostModelOptions options;
  options.batch_size = w.batch_size;
  auto model = create_cost_model(model_name, options);
  auto planner = create_planner("neuroshard", {});
  fmt::print("{}", plan_report(task, make_plan(*planner, task, *model), false));
}

void run_demo(DemoArgs& args) {
  const std::string workload_dir = (std::filesystem::path(args.dir) / "workload").string();
  const PublishedStats target = load_published_profile(args.synth.profile);
  fmt::print("[1/3] synth --profile {} --tables {} --batch {} --seed {} -o {}\n",
             args.synth.profile, args.synth.num_tables, args.synth.batch_size, args.synth.seed,
             workload_dir);
  std::fflush(stdout);
  Progress progress("synth", static_cast<uint64_t>(args.synth.num_tables));
  const Workload w = synthesize_workload(
      args.synth, target, workload_dir,
      [&](size_t t, size_t, const TableSpec&) { progress.update(t + 1); });
  progress.finish();
  print_workload_summary(load_workload(workload_dir), target);

  args.bench.workload_dir = workload_dir;
  args.bench.out_path = (std::filesystem::path(args.dir) / "compute_costs.jsonl").string();
  fmt::print("\n[2/3] bench compute --workload {} --samples {} --max-tables {} --threads {} "
             "--out {}\n",
             workload_dir, args.bench.samples, args.bench.max_tables, args.bench.threads,
             args.bench.out_path);
  std::fflush(stdout);
  // A fresh measurement each time: the workload was just regenerated.
  std::filesystem::remove(args.bench.out_path);
  run_compute_bench(args.bench);
  print_compute_records(args.bench.out_path, args.bench.samples);
  plan_demo_workload(load_workload(workload_dir), args.devices);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  args->synth.num_tables = 40;
  args->synth.batch_size = 2048;
  args->bench.samples = 12;
  args->bench.max_tables = 8;
  args->bench.warmup = 2;
  args->bench.repeats = 5;
  CLI::App* cmd = app.add_subcommand(
      "demo", "Synthesize a small workload, measure random shards of it, plan its sharding");
  cmd->add_option("--dir", args->dir, "Output directory")->capture_default_str();
  cmd->add_option("--profile", args->synth.profile, "2021 | 2022")->capture_default_str();
  cmd->add_option("--tables", args->synth.num_tables, "Tables")->capture_default_str();
  cmd->add_option("--batch", args->synth.batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--seed", args->synth.seed, "Seed")->capture_default_str();
  cmd->add_option("--samples", args->bench.samples, "Shards to measure")->capture_default_str();
  cmd->add_option("--threads", args->bench.threads, "Executor threads")->capture_default_str();
  cmd->add_option("--devices", args->devices, "Devices to plan for")->capture_default_str();
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace embshard::cli
