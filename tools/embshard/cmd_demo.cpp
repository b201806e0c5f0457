// embshard demo: the pipeline on built-in defaults. Synthesizes a small
// workload calibrated to the 2021 statistics, measures the cost of random
// shards of it on the fused executor, then plans its sharding over a few
// devices with the shipped cost models, printing what it did at each step.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "embshard/bench/compute.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/inspect.h"
#include "embshard/workload/synth.h"

namespace embshard::cli {
namespace {

struct DemoArgs {
  std::string dir = "out/demo";
  int devices = 4;
  SynthOptions synth;
  ComputeBenchOptions bench;
};

void run_demo(DemoArgs& args) {
  // Every step's options before the first step runs: no workload left behind by a bad one.
  ES_CHECK(args.devices >= 1 && args.devices <= kMaxDevices,
           "demo: --devices is {}, must be in 1..{}", args.devices, kMaxDevices);
  check_compute_bench_options(args.bench);
  Reporter& reporter = stderr_reporter();
  const std::string workload_dir = (std::filesystem::path(args.dir) / "workload").string();
  const PublishedStats target = load_published_profile(args.synth.profile);
  fmt::print("[1/3] synth --profile {} --tables {} --batch {} --seed {} -o {}\n",
             args.synth.profile, args.synth.num_tables, args.synth.batch_size, args.synth.seed,
             workload_dir);
  std::fflush(stdout);
  Progress progress(reporter, "synth", static_cast<uint64_t>(args.synth.num_tables));
  synthesize_workload(args.synth, target, workload_dir,
                      [&](size_t t, size_t, const TableSpec&) { progress.update(t + 1); });
  progress.finish();
  fmt::print("{}", inspection_summary(inspect_workload(workload_dir, args.synth.profile)));

  args.bench.workload_dir = workload_dir;
  args.bench.out_path = (std::filesystem::path(args.dir) / "compute_costs.jsonl").string();
  // The command that measures the same (and resumes the file with more --samples).
  fmt::print("\n[2/3] bench compute --workload {} --samples {} --max-tables {} --threads {} "
             "--warmup {} --min-rounds {} --max-rounds {} --reference-window-s {} -o {}\n",
             workload_dir, args.bench.samples, args.bench.max_tables, args.bench.threads,
             args.bench.warmup, args.bench.min_rounds, args.bench.max_rounds,
             args.bench.reference_window_s, args.bench.out_path);
  std::fflush(stdout);
  // A fresh measurement each time: the workload was just regenerated.
  std::filesystem::remove(args.bench.out_path);
  run_compute_bench(args.bench, reporter);
  fmt::print("{}", compute_records_table(args.bench.out_path, args.bench.samples));

  // NeuroShard's search against the shipped models (the analytic model where
  // none are shipped), memory capped at 1.25 x an even split.
  PlanRequest request;
  request.workload = load_workload(workload_dir);
  request.workload.source = workload_dir;
  request.devices = args.devices;
  fmt::print("\n[3/3] plan {} --devices {} --algo {} --cost-model {}\n", workload_dir,
             args.devices, request.algo, request.cost_model);
  std::fflush(stdout);
  const PlanOutcome p = plan_workload(request, reporter);
  fmt::print("{}", plan_report(p.task, p.result, false));
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  args->synth.num_tables = 40;
  args->synth.batch_size = 2048;
  args->bench.samples = 12;
  args->bench.max_tables = 8;
  args->bench.warmup = 2;
  args->bench.min_rounds = 6;
  args->bench.max_rounds = 12;
  args->bench.reference_window_s = 3;
  CLI::App* cmd = app.add_subcommand(
      "demo", "Synthesize a small workload, measure random shards of it, plan its sharding");
  cmd->add_option("-o,--out", args->dir, "Output directory")->capture_default_str();
  cmd->add_option("--profile", args->synth.profile, "2021 | 2022")->capture_default_str();
  cmd->add_option("--tables", args->synth.num_tables, "Tables")->capture_default_str();
  cmd->add_option("--batch", args->synth.batch_size, "Batch size")->capture_default_str();
  add_seed_option(cmd, args->synth.seed, "Seed");
  cmd->add_option("--samples", args->bench.samples, "Shards to measure")->capture_default_str();
  cmd->add_option("--threads", args->bench.threads, "Executor threads")->capture_default_str();
  cmd->add_option("--devices", args->devices, "Devices to plan for")->capture_default_str();
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace embshard::cli
