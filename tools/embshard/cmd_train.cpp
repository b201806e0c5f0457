// embshard train: neural cost models from measured data, with an accuracy
// report on the held-out splits (report.md, report.json, SVG plots).
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "options.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/text_table.h"

#ifdef EMBSHARD_WITH_TORCH
#include "embshard/cost/neural/train.h"
#include "embshard/util/reporter.h"
#endif

namespace embshard::cli {
namespace {

#ifdef EMBSHARD_WITH_TORCH
struct TrainArgs {
  TrainOptions options;
  std::string out_dir;
};

void print_figures(const std::vector<Comparison>& comparisons) {
  TextTable table({"split", "n", "MAPE %", "p90 APE %", "Kendall tau"});
  for (const Comparison& c : comparisons) {
    const AccuracyFigures f = accuracy(c.predicted, c.measured);
    if (f.count == 0) {
      table.add_row({c.title, "0", "-", "-", "-"});
      continue;
    }
    table.add_row({c.title, std::to_string(f.count), fmt::format("{:.2f}", f.mape_pct),
                   fmt::format("{:.2f}", f.p90_ape_pct), kendall_tau_text(f)});
  }
  fmt::print("{}", table.render());
}

void run_train(const TrainArgs& args) {
  check_writable_directory(args.out_dir, "train: --out");  // before the training, not after
  TrainOptions options = args.options;
  options.reporter = &stderr_reporter();
  TrainResult result = train_neural_model(options);
  save_neural_model(result.model, args.out_dir);
  write_accuracy_report(args.out_dir, "Neural cost model accuracy (held-out splits)",
                        result.comparisons, result.notes);
  for (const std::string& note : result.notes) fmt::print("{}\n", note);
  print_figures(result.comparisons);
  fmt::print("model written to {} (manifest.json, weights, report.md, report.json, *.svg)\n",
             args.out_dir);
}
#endif

}  // namespace

void add_train_command(CLI::App& app) {
#ifdef EMBSHARD_WITH_TORCH
  auto args = std::make_shared<TrainArgs>();
  TrainOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand("train", "Train the neural cost models on measured data");
  cmd->add_option("--compute", o.compute_paths,
                  "bench compute file(s), any batches (repeatable; the model serves the range)")
      ->required();
  cmd->add_option("--comm", o.comm_paths,
                  "bench comm file(s), any device counts and batches (repeatable)");
  cmd->add_option("--unseen-compute", o.unseen_compute_paths,
                  "bench compute file(s) of other table pools: never-seen-tables tests "
                  "(repeatable)");
  cmd->add_option("-o,--out", args->out_dir, "Model directory to write")->required();
  cmd->add_flag("--raw", o.raw_ground_truth,
                "Train on the records' raw medians, not their normalized figures (a dedicated "
                "device, e.g. a GPU, where raw timings repeat better)");
  add_seed_option(cmd, o.seed, "Seed of splits, initialisation and batch order");
  cmd->add_option("--holdout-tables", o.holdout_tables, "Share of pool tables kept out of training")
      ->capture_default_str();
  cmd->add_option("--val-share", o.val_share, "Share of records for validation")
      ->capture_default_str();
  cmd->add_option("--test-share", o.test_share, "Share of records for the test split")
      ->capture_default_str();
  cmd->add_option("--epochs", o.max_epochs, "Maximum epochs")->capture_default_str();
  cmd->add_option("--patience", o.patience, "Epochs without improvement before stopping")
      ->capture_default_str();
  cmd->add_option("--batch", o.batch, "Records per step")->capture_default_str();
  cmd->add_option("--lr", o.lr, "Adam learning rate")->capture_default_str();
  cmd->add_option("--weight-average", o.weight_average,
                  "Decay per step of the weights' moving average that is validated and kept "
                  "(0: the last step's weights)")
      ->check(CLI::Range(0.0, 0.99999))
      ->capture_default_str();
  cmd->add_option("--hidden", o.hidden, "Hidden layer width")->capture_default_str();
  cmd->add_option("--embed", o.embed, "Per-table MLP output width")->capture_default_str();
  cmd->add_option("--reuse-tail-bin", o.reuse_tail_bin,
                  "Reuse bin the histograms' tail is merged into: rows accessed more often count "
                  "alike (16: nothing merged; 0: 16 for data measured on a GPU, 8 on a CPU)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Torch threads (1 is deterministic)")
      ->capture_default_str();
  cmd->callback([args] { run_train(*args); });
#else
  CLI::App* cmd = app.add_subcommand("train", "Train the neural cost models (needs libtorch)");
  cmd->allow_extras();
  cmd->callback([] {
    ES_THROW("train: this embshard was built without libtorch (EMBSHARD_WITH_TORCH=OFF)");
  });
#endif
}

}  // namespace embshard::cli
