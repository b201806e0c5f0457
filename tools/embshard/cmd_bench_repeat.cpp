// embshard bench repeat | stream: how well ground truth holds still, and a
// memory-streaming neighbour to try it against.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/bench/repeatability.h"
#include "embshard/util/reporter.h"
#include "options.h"

namespace embshard::cli {

void add_bench_repeat_command(CLI::App& bench) {
  struct Args {
    ComputeBenchOptions options;
    bool per_shard = false, json = false;
  };
  auto args = std::make_shared<Args>();
  ComputeBenchOptions& o = args->options;
  o.samples = 40;
  CLI::App* cmd = bench.add_subcommand(
      "repeat", "Measure the same shards twice and compare, raw and normalized (repeatability)");
  cmd->add_option("--workload", o.workload_dir, "Workload directory (tables.json + trace.bin)")
      ->required();
  cmd->add_option("--samples", o.samples, "Shards (bench compute's draws 0..N-1)")
      ->capture_default_str();
  add_seed_option(cmd, o.seed, "Seed of the shard draws");
  cmd->add_option("--max-tables", o.max_tables, "Tables per shard: 1..K")->capture_default_str();
  add_bytes_option(cmd, "--mem-cap", o.mem_cap_bytes, "Weight bytes per shard at most")
      ->default_str(std::to_string(o.mem_cap_bytes));
  add_list_option(cmd, "--dims", o.dims, "Dims a table is augmented to");
  add_executor_option(cmd, o.executor, "Where shards run: ");
  cmd->add_option("--threads", o.threads, "Threads of the executor")->capture_default_str();
  add_thread_cpu_time_flag(cmd, o.thread_cpu_time);
  cmd->add_option("--warmup", o.warmup, "Untimed steps per shard")->capture_default_str();
  cmd->add_option("--min-rounds", o.min_rounds, "Rounds per shard at least")
      ->capture_default_str();
  cmd->add_option("--max-rounds", o.max_rounds, "Rounds per shard at most")->capture_default_str();
  cmd->add_option("--target-ci", o.target_relative_half_width,
                  "Stop once the ratio's 95% interval is within this share of it")
      ->capture_default_str();
  cmd->add_option("--reference-window-s", o.reference_window_s,
                  "Seconds of probe runs the probe's reference is taken from")
      ->capture_default_str();
  cmd->add_flag("--per-shard", args->per_shard, "Also print one row per shard");
  CLI::Option* json = cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--keep-rounds", o.keep_rounds,
                "Each shard's timed rounds of both passes in the JSON (per_round)")
      ->needs(json);
  cmd->callback([args] {
    const RepeatResult r = run_repeatability(args->options, stderr_reporter());
    fmt::print("{}", args->json ? repeat_json(r).dump(2) + "\n" : repeat_report(r, args->per_shard));
  });

  struct StreamArgs {
    int64_t bytes = int64_t{256} << 20;
    double seconds = 60;
  };
  auto s = std::make_shared<StreamArgs>();
  CLI::App* stream = bench.add_subcommand(
      "stream", "A noisy neighbour: copy memory for a while (to measure repeatability under load)");
  add_bytes_option(stream, "--bytes", s->bytes, "Buffer size")->default_str("256MiB");
  stream->add_option("--seconds", s->seconds, "How long")->capture_default_str();
  stream->callback([s] { stream_memory(s->bytes, s->seconds); });
}

}  // namespace embshard::cli
