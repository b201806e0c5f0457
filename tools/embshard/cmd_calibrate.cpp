// `embshard calibrate`: measure this machine once for the analytic cost model.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "embshard/cost/accuracy.h"
#include "embshard/cost/analytic/calibrate.h"
#include "embshard/cost/analytic/check.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace embshard::cli {
namespace {

struct CalibrateArgs {
  CalibrateOptions options;
  std::string from;   // reuse an existing calibration instead of measuring
  std::string check;  // a bench compute file to report the model's accuracy on
  std::string check_csv;  // where to write predicted vs measured per shard
  std::vector<std::string> collectives;  // `bench comm --collectives` files to fit
  bool conversions = false;  // with --from: measure and refit the typed forward's conversions
};

void run(const CalibrateArgs& args) {
  // Every output checked before anything is measured or written.
  const bool writes = args.from.empty() || !args.options.comm_path.empty() ||
                      !args.collectives.empty() || args.conversions;
  ES_CHECK(!args.conversions || !args.from.empty(),
           "calibrate: --data-types refits a calibration given with --from (a calibration "
           "measured afresh fits them already)");
  ES_CHECK(!writes || !args.options.out_path.empty(),
           "calibrate: give --out FILE for the calibration (to replace the shipped one, name "
           "models/analytic.json: it is never overwritten by default)");
  if (!args.check_csv.empty()) check_writable(args.check_csv, "--check-csv");
  check_distinct_outputs({{"--out", args.options.out_path}, {"--check-csv", args.check_csv}});
  Calibration c;
  if (args.from.empty()) {
    c = run_calibration(args.options, stderr_reporter());
  } else {
    c = load_calibration(args.from);
    if (!args.options.comm_path.empty()) {
      fit_comm_from_file(args.options.comm_path, c, stderr_reporter());
    }
    if (args.conversions) fit_conversions(args.options, c, stderr_reporter());
  }
  if (!args.collectives.empty()) fit_collectives_from_files(args.collectives, c, stderr_reporter());
  if (writes) {
    const auto parent = std::filesystem::path(args.options.out_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    save_calibration(c, args.options.out_path);
    fmt::print("wrote {}\n", args.options.out_path);
  }
  if (!args.check.empty()) {
    const ComputeCheck check = predict_compute_file(c, args.check);
    const AccuracyFigures f = accuracy(check.predicted_ms, check.measured_ms);
    if (!args.check_csv.empty()) {
      std::string csv = "predicted_ms,measured_ms\n";
      for (size_t i = 0; i < check.measured_ms.size(); ++i) {
        csv += fmt::format("{},{}\n", check.predicted_ms[i], check.measured_ms[i]);
      }
      write_file_atomic(args.check_csv, csv);
    }
    fmt::print("analytic model on {} ({} shards, batch {}; ground truth: {}): MAPE {:.1f}%, "
               "p90 APE {:.1f}%, Kendall tau-b {:.3f}\n",
               args.check, f.count, check.batch_size, check.ground_truth, f.mape_pct,
               f.p90_ape_pct, f.kendall_tau);
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CalibrateOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure this machine's bandwidths and overheads for the analytic cost model");
  cmd->add_option("-o,--out", o.out_path,
                  "Calibration file to write (required when one is made or refitted)");
  cmd->add_option("--threads", o.threads, "Executor threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_thread_cpu_time_flag(cmd, o.thread_cpu_time);
  cmd->add_option("--batch", o.batch_size, "Batch size of the probes (the model's default)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--comm", o.comm_path,
                  "A `bench comm` file to fit the all-to-all latency and bandwidth to");
  cmd->add_option("--collectives", args->collectives,
                  "`bench comm --collectives` files (any rank counts) to fit the row-wise and "
                  "data-parallel collectives' latency and bandwidths to")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--quick", o.quick, "Smaller probes, fewer runs (tests; about 2-5 s)");
  add_seed_option(cmd, o.seed, "Seed of the probes' indices");
  cmd->add_option("--from", args->from,
                  "Load this calibration instead of measuring (with --comm or --collectives: "
                  "refit them and write --out)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--data-types", args->conversions,
                "With --from: measure forward-only probes of fp16, bf16, int8 and int4 tables "
                "and refit the forward's conversion cost of each");
  cmd->add_option("--check", args->check,
                  "A `bench compute` file: print the model's MAPE, p90 APE and Kendall tau")
      ->check(CLI::ExistingFile);
  cmd->add_option("--check-csv", args->check_csv,
                  "With --check: write predicted_ms,measured_ms per shard to this CSV");
  cmd->callback([args] { run(*args); });
}

}  // namespace embshard::cli
