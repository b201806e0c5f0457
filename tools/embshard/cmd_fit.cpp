// embshard fit: a pre-trained neural model fitted to this machine from a few
// hundred shards measured here (or given as bench compute files).
#include <chrono>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/bench/compute.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/cost_model.h"
#include "embshard/bench/fit_data.h"
#include "embshard/cost/neural/fit.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "options.h"

namespace embshard::cli {
namespace {

struct FitArgs {
  FitOptions fit;
  FitMeasureOptions measure;
  FineTuneOptions fine_tune;
  std::string tune = "on";  // on | off
  std::vector<std::string> comm_paths;
  std::string out_dir;
};

// Refused before minutes of measuring: an --out that is the model itself,
// test data without fit data.
void check_fit_args(FitArgs& a) {
  if (a.tune == "on") check_fine_tune_options(a.fine_tune);
  if (a.fit.model_dir.empty()) a.fit.model_dir = neural_model_dir("");  // the shipped model
  check_writable_directory(a.out_dir, "fit: --out");
  namespace fs = std::filesystem;
  std::error_code out_ec, model_ec;  // a path that cannot be resolved is no match
  const fs::path out = fs::weakly_canonical(a.out_dir, out_ec);
  const fs::path model = fs::weakly_canonical(a.fit.model_dir, model_ec);
  ES_CHECK(out_ec || model_ec || out != model,
           "fit: --out {} is the pre-trained model's directory (--model {}): the fit would "
           "overwrite the model it starts from; write it to another directory",
           a.out_dir, a.fit.model_dir);
  ES_CHECK(a.fit.test_paths.empty() || !a.fit.data_paths.empty(),
           "fit: --test-data needs --data (without it, fit measures pools to judge by itself)");
}

std::vector<CommData> read_comm_files(const FitArgs& a) {
  std::vector<CommData> comm_files;
  for (const std::string& path : a.comm_paths) {
    ES_CHECK(std::filesystem::is_regular_file(path), "fit: --comm-data {}: no such file", path);
    LoadOptions lo;
    lo.raw = a.fit.raw;
    comm_files.push_back(load_comm_data(path, lo));
    ES_CHECK(a.fit.raw || comm_files.back().normalized,
             "fit: --comm-data {}: version 1 records (raw medians, measured before the "
             "drift-cancelling reference exchange): fitting needs normalized ones. Measure them "
             "again with this embshard's bench comm, or fit raw medians with --raw",
             path);
    report_problems(path, comm_files.back().problems, stderr_reporter());
  }
  return comm_files;
}

// Without --data: measure the fit's and the judging pools into OUT/fit_data.
void measure_fit_files(FitArgs& a) {
  namespace fs = std::filesystem;
  const bool made_out = !fs::exists(a.out_dir);
  a.measure.dir = (fs::path(a.out_dir) / "fit_data").string();
  fs::create_directories(a.measure.dir);
  try {
    FitFiles files = measure_fit_data(a.measure, a.fit.fit_share, stderr_reporter());
    a.fit.data_paths = std::move(files.fit);
    a.fit.test_paths = std::move(files.test);
  } catch (...) {
    // Refused before measuring anything (bad options): leave no directory
    // behind. Measurements made are kept: the same command resumes them.
    std::error_code ec;
    if (made_out && fs::is_empty(a.measure.dir, ec)) fs::remove_all(a.out_dir, ec);
    throw;
  }
}

void print_fit(const FitArgs& a, const FitResult& r, const CommFitResult* comm) {
  fmt::print("fitted {} to this machine: log ms' = {:.4f} + {:.4f} log ms + {:.4f} log(batch / "
             "{}) ({} records fitted)\n"
             "on {} records it never saw{}: MAPE {:.2f}% -> {:.2f}%, p90 APE {:.2f}% -> {:.2f}%, "
             "Kendall tau {:.3f} -> {:.3f}, median error {:+.1f}% -> {:+.1f}%\n",
             a.fit.model_dir, r.log_scale, r.power, r.batch_power, r.model.batch_size,
             r.fit_records, r.test_records, a.fit.test_paths.empty() ? "" : " (other pools)",
             r.before.mape_pct, r.after.mape_pct, r.before.p90_ape_pct, r.after.p90_ape_pct,
             r.before.kendall_tau, r.after.kendall_tau, r.before.median_error_pct,
             r.after.median_error_pct);
  if (r.pieces_before.count > 0) {
    fmt::print("of which {} with row blocks or replica slices: MAPE {:.2f}% -> {:.2f}%\n",
               r.pieces_before.count, r.pieces_before.mape_pct, r.pieces_after.mape_pct);
  }
  if (r.model.info["fitted"].contains("fine_tune")) {
    fmt::print("on those records the plane alone: MAPE {:.2f}%; fine-tuned after it: {:.2f}%\n",
               r.plane.mape_pct, r.after.mape_pct);
  }
  if (comm) {
    fmt::print(
        "communication: log ms' = {:.4f} + {:.4f} log ms (forward), {:.4f} + {:.4f} log ms "
        "(backward) ({} placements fitted); on {} placements it never saw: MAPE {:.2f}% "
        "-> {:.2f}%, median error {:+.1f}% -> {:+.1f}%\n",
        comm->fwd_log_scale, comm->fwd_power, comm->bwd_log_scale, comm->bwd_power,
        comm->fit_records, comm->test_records, comm->before.mape_pct, comm->after.mape_pct,
        comm->before.median_error_pct, comm->after.median_error_pct);
  }
  // The judge is small (dozens of records): a worse figure may be noise, so
  // the fit is written either way, but the user decides with both in view.
  const auto worse = [](const char* what, double before, double after) {
    if (after <= before) return;
    stderr_reporter().note(fmt::format(
        "fit: on the {} it never saw the fitted model reads worse than the model as given "
        "({:.2f}% against {:.2f}% MAPE): the shipped model may already suit this machine, or "
        "the records fitted do not span what you plan for (profiles, batches); keep whichever "
        "reads better",
        what, after, before));
  };
  worse("records", r.before.mape_pct, r.after.mape_pct);
  if (comm) worse("placements", comm->before.mape_pct, comm->after.mape_pct);
}

void run_fit(FitArgs& a) {
  const auto start = std::chrono::steady_clock::now();
  check_fit_args(a);
  const std::vector<CommData> comm_files = read_comm_files(a);  // before minutes of measuring
  if (a.fit.data_paths.empty()) measure_fit_files(a);
  FitResult r = fit_neural_model(a.fit, stderr_reporter());
  if (a.tune == "on") {
#ifdef EMBSHARD_WITH_TORCH
    fine_tune_fitted_model(r, a.fine_tune, stderr_reporter());
#else
    stderr_reporter().note(
        "fit: the plane only (this build has EMBSHARD_WITH_TORCH off, so no "
        "fine-tune)");
#endif
  }
  CommFitResult comm;
  if (!comm_files.empty()) comm = fit_comm_model(r.model, comm_files, a.fit, stderr_reporter());
  save_neural_model(r.model, a.out_dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_fit(a, r, comm_files.empty() ? nullptr : &comm);
  fmt::print("wrote {} in {:.0f} s\n", a.out_dir, seconds);
}

}  // namespace

void add_fit_command(CLI::App& app) {
  auto a = std::make_shared<FitArgs>();
  ComputeBenchOptions& b = a->measure.bench;
  b.samples = 256;
  b.max_tables = 15;
  b.mem_cap_bytes = int64_t{128} << 20;
  b.warmup = 2;
  b.min_rounds = 8;
  b.max_rounds = 24;
  b.target_relative_half_width = 0.03;
  // The fit's data set the fitted model's scale: this machine's probe over a
  // window (later files anchor on the fitted model).
  b.scale = ComputeBenchOptions::Scale::kWindow;
  b.reference_window_s = 10;
  CLI::App* cmd = app.add_subcommand(
      "fit", "Fit a pre-trained neural model to this machine from a few hundred measured shards");
  cmd->add_option("--model", a->fit.model_dir,
                  "The pre-trained model directory (default: the shipped model)");
  cmd->add_option("-o,--out", a->out_dir, "Fitted model directory to write")->required();
  cmd->add_option("--data", a->fit.data_paths,
                  "Bench compute files already measured here (default: measure now)");
  cmd->add_option("--test-data", a->fit.test_paths,
                  "Bench compute files of other pools measured here, which only judge the fit "
                  "(default with --data: a share of its records)");
  cmd->add_option("--comm-data", a->comm_paths,
                  "Bench comm files measured here (under mpirun): the communication networks "
                  "are fitted too");
  cmd->add_option("--samples", b.samples,
                  "Shards to measure, spread over small pools of every profile and batch")
      ->capture_default_str();
  a->measure.hot_samples = 96;
  cmd->add_option("--hot-samples", a->measure.hot_samples,
                  "Shards to measure besides, in pools where a quarter of the tables are hot "
                  "(pooling factor 100-500), some as row blocks and replica slices (0: none)")
      ->capture_default_str();
  add_list_option(cmd, "--profiles", a->measure.profiles, "Profiles of the pools");
  add_list_option(cmd, "--batches", a->measure.batches, "Batches of the pools",
                  CLI::PositiveNumber);
  add_executor_option(cmd, b.executor, "Where shards run: ");
  add_bytes_option(cmd, "--mem-cap", b.mem_cap_bytes,
                   "Weight bytes per shard measured at most (a GPU's set: the sizes it plans)")
      ->default_str(std::to_string(b.mem_cap_bytes));
  add_list_option(cmd, "--dims", b.dims, "Dims the shards' tables are drawn at");
  cmd->add_option("--threads", b.threads, "Executor threads")->capture_default_str();
  add_thread_cpu_time_flag(cmd, b.thread_cpu_time);
  add_seed_option(cmd, b.seed, "Seed of the shards drawn");
  cmd->add_option("--reference-window-s", b.reference_window_s,
                  "Seconds of reference-probe runs (normalization)")
      ->capture_default_str();
  cmd->add_option("--fit-share", a->fit.fit_share, "Share of the shards fitted on; the rest "
                  "judge the fit (measured: in pools of their own)")->capture_default_str();
  cmd->add_flag("--raw", a->fit.raw, "Fit the raw medians (a dedicated device, e.g. a GPU)");
  cmd->add_option("--fine-tune", a->tune,
                  "After the plane, train the networks further on the fit records (off: the "
                  "plane alone)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--fine-tune-epochs", a->fine_tune.epochs, "Full-batch Adam steps")
      ->capture_default_str();
  cmd->add_option("--fine-tune-anchor", a->fine_tune.anchor,
                  "Weight of the pull back to the pre-trained weights")
      ->capture_default_str();
  cmd->callback([a] {
    a->fit.seed = a->measure.bench.seed;
    run_fit(*a);
  });
}

}  // namespace embshard::cli
