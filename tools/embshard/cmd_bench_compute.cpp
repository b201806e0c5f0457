// embshard bench compute: measured costs of random shards on the executor.
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/bench/compute.h"
#include "embshard/util/reporter.h"
#include "options.h"

namespace embshard::cli {

void add_bench_compute_command(CLI::App& bench) {
  struct Args {
    ComputeBenchOptions options;
    std::string optimizer = "rowwise_adagrad";
    std::string scale = "anchors";
    std::vector<std::string> data_types;
    int64_t show = 12;
  };
  auto args = std::make_shared<Args>();
  ComputeBenchOptions& o = args->options;
  CLI::App* cmd = bench.add_subcommand(
      "compute", "Measure forward+backward+update of random shards on the fused executor");
  cmd->add_option("--workload", o.workload_dir, "Workload directory (tables.json + trace.bin)")
      ->required();
  cmd->add_option("--samples", o.samples, "Number of shards to measure (total, resumes)")
      ->required();
  cmd->add_option("-o,--out", o.out_path, "Output file (JSON lines; appended, resumable)")
      ->required();
  cmd->add_option("--max-tables", o.max_tables, "Tables per shard: 1..K")->capture_default_str();
  cmd->add_option("--pieces", o.piece_share,
                  "Share of drawn tables made a row block (2-, 4- or 8-way) or a replica's batch "
                  "slice, recorded with features measured on its own lookups (0: whole tables)")
      ->capture_default_str();
  add_bytes_option(cmd, "--mem-cap", o.mem_cap_bytes, "Weight bytes per shard at most")
      ->default_str(std::to_string(o.mem_cap_bytes));
  add_list_option(cmd, "--dims", o.dims, "Dims a table is augmented to");
  cmd->add_option("--data-types", args->data_types,
                  "Types each drawn table is stored as, drawn uniformly: fp32, fp16, bf16 "
                  "(default: the workload's own)")
      ->delimiter(',');
  cmd->add_option("--threads", o.threads, "Threads of the executor (a device)")
      ->capture_default_str();
  add_thread_cpu_time_flag(cmd, o.thread_cpu_time);
  add_seed_option(cmd, o.seed, "Seed of the shard draws");
  add_executor_option(cmd, o.executor, "Where shards run: ");
  cmd->add_option("--warmup", o.warmup, "Untimed steps per shard")->capture_default_str();
  cmd->add_option("--min-rounds", o.min_rounds,
                  "Rounds (shard + reference probe, in random order) per shard at least")
      ->capture_default_str();
  cmd->add_option("--max-rounds", o.max_rounds, "Rounds per shard at most")->capture_default_str();
  cmd->add_option("--target-ci", o.target_relative_half_width,
                  "Stop once the 95% interval of the shard/probe ratio is within this share of it")
      ->capture_default_str();
  cmd->add_option("--scale", args->scale,
                  "The file's scale: anchors (fixed anchor shards measured in this run and priced "
                  "by --model: runs agree) | window (the reference probe's quiet time over "
                  "--reference-window-s)")
      ->check(CLI::IsMember({"anchors", "window"}))
      ->capture_default_str();
  cmd->add_option("--model", o.model_dir,
                  "The model that prices the anchors (default: the shipped models)");
  cmd->add_option("--reference-window-s", o.reference_window_s,
                  "--scale window: seconds of probe runs its quiet time is taken from")
      ->capture_default_str();
  cmd->add_option("--reference-from", o.reference_from,
                  "Take the scale from this earlier file instead (one scale for a set of files)");
  cmd->add_flag("--keep-rounds", o.keep_rounds,
                "Keep every timed round's work and probe times in the records (per_round)");
  cmd->add_option("--optimizer", args->optimizer, "sgd | rowwise_adagrad")
      ->check(CLI::IsMember({"sgd", "rowwise_adagrad"}))
      ->capture_default_str();
  cmd->add_option("--show", args->show, "Records to print at the end")->capture_default_str();
  cmd->callback([args] {
    args->options.scale = args->scale == "window" ? ComputeBenchOptions::Scale::kWindow
                                                  : ComputeBenchOptions::Scale::kAnchors;
    args->options.optimizer = args->optimizer == "sgd" ? OptimizerType::kSgd
                                                       : OptimizerType::kRowWiseAdagrad;
    for (const std::string& name : args->data_types) {
      args->options.data_types.push_back(parse_data_type(name, "bench compute: --data-types"));
    }
    run_compute_bench(args->options, stderr_reporter());
    fmt::print("{}", compute_records_table(args->options.out_path, args->show));
  });
}

}  // namespace embshard::cli
