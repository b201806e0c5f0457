// embshard validate: a model's accuracy figures on any measured data file
// (bench compute or bench comm, told apart by the header's format), and its
// ranking of placements against real execution.
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/floor.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/cost/neural/validate.h"
#include "embshard/eval/ranking.h"
#include "embshard/util/error.h"
#include "embshard/util/json_field.h"
#include "embshard/util/reporter.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard::cli {
namespace {

using nlohmann::json;

struct ValidateArgs {
  std::string model_dir, data_path, plot_dir;
  bool json_output = false;
  bool ranking = false;  // the placement-ranking check (eval/ranking.h)
  bool raw = false;
  std::string workload_dir;
  RankingOptions ranking_options;
  Topology hosts;  // a comm file's ranks as hosts
};

void print_ranking(const json& r) {
  fmt::print("ranking: the model's pick of {} random placements was the measured fastest or "
             "within {:.0f}% of it in {:.1f}% of {} tasks ({} devices); mean regret {:.2f}%\n",
             r["placements"].get<int>(), 100 * r["tolerance"].get<double>(),
             100 * r["pick_within_2pct_rate"].get<double>(), r["tasks"].get<int>(),
             r["devices"].get<int>(), r["mean_regret_pct"].get<double>());
}

json run_ranking(const ValidateArgs& args) {
  ES_CHECK(!args.workload_dir.empty(), "validate --ranking needs --workload (a workload whose "
                                       "tables the placements are drawn from and executed)");
  const Workload workload = load_workload(args.workload_dir);
  CostModelOptions options;
  options.model_dir = args.model_dir;
  options.workload_dir = args.workload_dir;
  options.batch_size = workload.batch_size;
  const RankingOptions& o = args.ranking_options;
  const RankingResult r =
      ranking_check(create_cost_model("neural", options), create_compute_model("measured", options),
                    workload, o, stderr_reporter());
  return {{"tasks", o.tasks},
          {"placements", o.placements},
          {"devices", o.devices},
          {"workload", args.workload_dir},
          {"pick_within_2pct_rate", r.pick_within_tolerance_rate},
          {"tolerance", o.tolerance},
          {"mean_regret_pct", 100 * r.mean_regret}};
}

// The file's comparisons, then its breakdown by sharding type.
std::vector<Comparison> rows_of(const FileValidation& v) {
  std::vector<Comparison> rows = v.comparisons;
  rows.insert(rows.end(), v.breakdown.begin(), v.breakdown.end());
  return rows;
}

// The records' floors: how far over them measurements and predictions sit,
// and a warning naming the records predicted under theirs or far over.
void print_floors(const FloorFigures& f, const json& figures) {
  const auto spread = [&](const char* key) {
    const json& s = figures[key];
    return s.is_null() ? std::string("-")
                       : fmt::format("{:.2f}-{:.0f}x (median {:.1f}x)", s["min"].get<double>(),
                                     s["max"].get<double>(), s["median"].get<double>());
  };
  fmt::print("physical floors at {:g} GB/s ({}): measured {} over them, {} under; predicted {}\n",
             f.memory_gbps, f.memory_source, spread("measured_over_floor"), f.measured_under,
             spread("predicted_over_floor"));
  const auto named = [](const std::vector<FloorRecord>& records) {
    std::vector<std::string> out;
    for (const FloorRecord& r : records) {
      out.push_back(
          fmt::format("line {} ({}): predicted {:.3f} ms, measured {:.3f} ms, floor {:.4f} ms",
                      r.line, count_of(static_cast<int64_t>(r.tables), "table"), r.predicted_ms,
                      r.measured_ms, r.floor_ms));
    }
    return fmt::format("{}", fmt::join(out, "; "));
  };
  if (f.under_count > 0) {
    fmt::print("warning: {} predicted under their physical floors (farthest: {})\n",
               count_of(static_cast<int64_t>(f.under_count), "record"), named(f.under));
  }
  if (f.far_over_count > 0) {
    fmt::print(
        "warning: {} predicted over {:g}x their physical floors, {} of all measured so "
        "(farthest: {})\n",
        count_of(static_cast<int64_t>(f.far_over_count), "record"), kFarOverFloor,
        f.measured_far_over, named(f.far_over));
  }
}

void print_figures(const FileValidation& v, const ValidateArgs& args) {
  TextTable table({"data", "n", "MAPE %", "p90 APE %", "Kendall tau", "median error %"});
  for (const Comparison& c : rows_of(v)) {
    const AccuracyFigures f = accuracy(c.predicted, c.measured);
    table.add_row({c.title, std::to_string(f.count), fmt::format("{:.2f}", f.mape_pct),
                   fmt::format("{:.2f}", f.p90_ape_pct), kendall_tau_text(f),
                   fmt::format("{:+.2f}", f.median_error_pct)});
  }
  fmt::print("model {} on {}{}:\n{}", args.model_dir, args.data_path,
             v.skipped_bad_records
                 ? fmt::format(" ({} bad records skipped)", v.skipped_bad_records)
                 : "",
             table.render());
  if (v.scale) fmt::print("{}{}\n", v.scale->moved_past_spread ? "warning: " : "", v.scale->text);
  if (v.floors) print_floors(*v.floors, v.figures["floors"]);
  if (v.most_missed.empty()) return;
  TextTable missed({"line", "tables", "measured ms", "predicted ms", "APE %"});
  for (const MissedRecord& m : v.most_missed) {
    missed.add_row({std::to_string(m.line), std::to_string(m.tables),
                    fmt::format("{:.3f}", m.measured_ms), fmt::format("{:.3f}", m.predicted_ms),
                    fmt::format("{:.1f}", m.ape_pct)});
  }
  fmt::print("the records it misses most (line in the file):\n{}", missed.render());
}

void run_validate(const ValidateArgs& args) {
  ES_CHECK(args.ranking || !args.data_path.empty(),
           "validate: give --data FILE, --ranking, or both");
  json out = json::object();
  FileValidation v;
  if (!args.data_path.empty()) {
    const NeuralModel model = load_neural_model(args.model_dir);
    // Judged on the ground truth the model learned: a model trained on raw
    // medians (train --raw, a GPU's) against the records' raw medians.
    const json* truth = json_optional(model.info, "/data/ground_truth", JsonKind::kString,
                                      neural_model_dir(args.model_dir) + "/" + kManifestFile);
    const bool raw = args.raw || (truth && *truth == ground_truth_label(false));
    if (raw && !args.raw) {
      stderr_reporter().note("validate: against the records' raw medians, as the model was "
                             "trained (--raw implied)");
    }
    v = validate_on_file(model, args.model_dir, args.data_path, stderr_reporter(), raw, args.hosts);
    out = v.figures;
    out["ground_truth"] = ground_truth_label(!raw);
    if (!args.plot_dir.empty()) {
      write_accuracy_report(args.plot_dir,
                            "Validation of " + args.model_dir + " on " + args.data_path,
                            rows_of(v), {});
    }
  }
  if (args.ranking) {
    out["ranking"] = run_ranking(args);
    out["pick_within_2pct_rate"] = out["ranking"]["pick_within_2pct_rate"];
  }
  if (args.json_output) {
    fmt::print("{}\n", out.dump(2));
    return;
  }
  if (!args.data_path.empty()) print_figures(v, args);
  if (args.ranking) print_ranking(out["ranking"]);
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Accuracy of a cost model on measured data, and its ranking of placements");
  cmd->add_option("--model", args->model_dir,
                  "Model directory (embshard train --out), or a model set with one in neural/ "
                  "(default: the shipped models)");
  cmd->add_option("--data", args->data_path, "bench compute or bench comm file");
  RankingOptions& r = args->ranking_options;
  cmd->add_flag("--ranking", args->ranking,
                "Placement-ranking check: is the model's pick of random placements the measured "
                "fastest (within 2%)? (pick_within_2pct_rate)");
  cmd->add_option("--workload", args->workload_dir, "Workload the ranking tasks draw from");
  cmd->add_option("--tasks", r.tasks, "Ranking tasks")->capture_default_str();
  cmd->add_option("--placements", r.placements, "Random placements per task")
      ->capture_default_str();
  cmd->add_option("--devices", r.devices, "Devices per task")->capture_default_str();
  add_seed_option(cmd, r.seed, "Seed of the tasks and placements");
  cmd->add_flag("--json", args->json_output,
                "Print JSON (mape_pct, p90_ape_pct, kendall_tau, count, ...)");
  cmd->add_flag("--raw", args->raw,
                "Judge against the records' raw medians (a dedicated device; implied for a model "
                "trained on them)");
  add_topology_options(cmd, args->hosts);
  cmd->add_option("--plot-dir", args->plot_dir, "Also write report.md/json and SVG plots here");
  cmd->callback([args] {
    if (args->model_dir.empty()) args->model_dir = neural_model_dir("");  // the shipped models
    run_validate(*args);
  });
}

}  // namespace embshard::cli
