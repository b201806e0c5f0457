// embshard bench comm (run under mpirun, one rank per device)
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "embshard/bench/comm.h"
#include "embshard/util/reporter.h"

namespace embshard::cli {
namespace {

struct CommArgs {
  CommBenchOptions options;
  std::string test_kill_mode = "exit";
};

void add_test_hooks(CLI::App* cmd, CommArgs& args) {
  // Hidden (empty group): for the failure tests only.
  CommBenchOptions& o = args.options;
  cmd->add_option("--test-kill-rank", o.fault_rank, "Rank that fails (tests)")->group("");
  cmd->add_option("--test-kill-at-sample", o.fault_sample, "Sample it fails at (tests)")
      ->group("");
  cmd->add_option("--test-kill-mode", args.test_kill_mode, "exit | hang (tests)")
      ->check(CLI::IsMember({"exit", "hang"}))
      ->group("");
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto args = std::make_shared<CommArgs>();
  CommBenchOptions& o = args->options;
  CLI::App* cmd = bench.add_subcommand(
      "comm", "Measure forward/backward all-to-all costs (run under mpirun, one rank a device)");
  cmd->add_option("--samples", o.samples, "Number of samples to measure (total, resumes)")
      ->required();
  cmd->add_option("-o,--out", o.out_path, "Output file, written by rank 0 (JSON lines; resumable)")
      ->required();
  cmd->add_option("--batch", o.batch, "Global batch; each rank holds batch/N rows")
      ->capture_default_str();
  add_seed_option(cmd, o.seed, "Seed of the sample draws");
  cmd->add_option("--max-delay-ms", o.max_delay_ms, "Straggler delays: uniform 0..D ms")
      ->capture_default_str();
  add_list_option(cmd, "--dims", o.dims, "Dims a table is drawn at");
  add_list_option(cmd, "--tables-per-device", o.tables_per_device,
                  "MIN,MAX: a sample has N*MIN..N*MAX tables");
  cmd->add_option("--warmup", o.warmup, "Untimed runs per sample")->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Timed runs per sample (median per rank)")
      ->capture_default_str();
  cmd->add_option("--passes", o.passes,
                  "Measure every sample this many times, in passes seconds apart; a rank's "
                  "figure is the mean of its fastest half of the passes (of up to three: the "
                  "fastest)")
      ->capture_default_str();
  cmd->add_option("--pass-block-s", o.pass_block_s,
                  "With --passes > 1: seconds of samples a pass covers before the next pass "
                  "goes over them again")
      ->capture_default_str();
  cmd->add_option("--reference-runs", o.reference_runs,
                  "Runs of the reference exchange its quiet time is taken from (new files)")
      ->capture_default_str();
  cmd->add_option("--reference-from", o.reference_from,
                  "Take every rank's reference exchange time from this earlier file (same "
                  "ranks and batch): one scale for a set of files");
  cmd->add_option("--probe-dim", o.probe_dim,
                  "Columns per rank of the reference exchange every figure is normalized by")
      ->capture_default_str();
  cmd->add_option("--timeout-s", o.timeout_s,
                  "Abort when any collective takes longer (a rank died or hangs)")
      ->capture_default_str();
  cmd->add_option("--show", o.show, "Records to print at the end")->capture_default_str();
  cmd->add_flag("--collectives", o.collectives,
                "Measure the row-wise and data-parallel collectives (index all-to-all, "
                "reduce-scatter, all-gather, all-reduce) of drawn loads instead");
  add_test_hooks(cmd, *args);
  cmd->callback([args] {
    CommBenchOptions& opts = args->options;
    if (opts.fault_rank >= 0) {
      opts.fault = args->test_kill_mode == "hang" ? CommFault::kHang : CommFault::kExit;
    }
    const CommBenchResult result = run_comm_bench(opts, stderr_reporter());
    if (result.rank == 0) fmt::print("{}", comm_records_table(opts.out_path, opts.show));
  });
}

}  // namespace embshard::cli
