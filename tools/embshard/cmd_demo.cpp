// embshard demo: the main job on built-in defaults. Synthesizes a small
// workload calibrated to the 2021 statistics and measures the cost of random
// shards of it on the fused executor, printing what it did at each step.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/bench/compute.h"
#include "embshard/util/progress.h"
#include "embshard/util/record_file.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/synth.h"

namespace embshard::cli {
namespace {

struct DemoArgs {
  std::string dir = "out/demo";
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

void run_demo(DemoArgs& args) {
  const std::string workload_dir = (std::filesystem::path(args.dir) / "workload").string();
  const PublishedStats target = load_published_profile(args.synth.profile);
  fmt::print("[1/2] synth --profile {} --tables {} --batch {} --seed {} -o {}\n",
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
  fmt::print("\n[2/2] bench compute --workload {} --samples {} --max-tables {} --threads {} "
             "--out {}\n",
             workload_dir, args.bench.samples, args.bench.max_tables, args.bench.threads,
             args.bench.out_path);
  std::fflush(stdout);
  // A fresh measurement each time: the workload was just regenerated.
  std::filesystem::remove(args.bench.out_path);
  run_compute_bench(args.bench);
  print_compute_records(args.bench.out_path, args.bench.samples);
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
      "demo", "Synthesize a small workload and measure the cost of random shards of it");
  cmd->add_option("--dir", args->dir, "Output directory")->capture_default_str();
  cmd->add_option("--profile", args->synth.profile, "2021 | 2022")->capture_default_str();
  cmd->add_option("--tables", args->synth.num_tables, "Tables")->capture_default_str();
  cmd->add_option("--batch", args->synth.batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--seed", args->synth.seed, "Seed")->capture_default_str();
  cmd->add_option("--samples", args->bench.samples, "Shards to measure")->capture_default_str();
  cmd->add_option("--threads", args->bench.threads, "Executor threads")->capture_default_str();
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace embshard::cli
