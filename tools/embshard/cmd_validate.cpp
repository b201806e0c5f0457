// embshard validate: a model's accuracy figures on any measured data file
// (bench compute or bench comm, told apart by the header's format).
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural_model.h"
#include "embshard/eval/ranking.h"
#include "embshard/util/progress.h"
#include "embshard/util/error.h"
#include "embshard/util/text_table.h"

namespace embshard::cli {
namespace {

using nlohmann::json;

struct ValidateArgs {
  std::string model_dir, data_path, plot_dir;
  bool json_output = false;
  bool ranking = false;  // the placement-ranking check (eval/ranking.h)
  std::string workload_dir;
  RankingOptions ranking_options;
};

// Runs the ranking check of the model in args.model_dir against real
// execution on args.workload_dir, and returns its figures.
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
  auto model = create_cost_model("neural", options);
  auto measured = create_cost_model("measured", options);
  const RankingOptions& o = args.ranking_options;
  Progress progress("validate --ranking", static_cast<uint64_t>(o.tasks));
  const RankingResult r = ranking_check(*model, *measured, workload, o,
                                        [&](int done) { progress.update(done); });
  progress.finish();
  return {{"tasks", o.tasks},
          {"placements", o.placements},
          {"devices", o.devices},
          {"workload", args.workload_dir},
          {"pick_within_2pct_rate", r.pick_within_tolerance_rate},
          {"tolerance", o.tolerance},
          {"mean_regret_pct", 100 * r.mean_regret}};
}

std::vector<Comparison> compute_comparisons(const NeuralModel& model, const std::string& path,
                                            size_t& skipped) {
  const ComputeData data = load_compute_data(path);
  report_problems(path, data.problems);
  skipped = data.problems.size();
  ES_CHECK(data.batch_size == model.batch_size,
           "{}: measured at batch {}, the model predicts batch {}", path, data.batch_size,
           model.batch_size);
  Comparison c{"compute", "compute: " + path, {}, {}};
  for (const ComputeRecord& r : data.records) {
    c.predicted.push_back(predict_compute_ms(model, r.tables));
    c.measured.push_back(r.ms);
  }
  return {c};
}

std::vector<Comparison> comm_comparisons(const NeuralModel& model, const std::string& path,
                                         size_t& skipped) {
  ES_CHECK(model.has_comm,
           "{}: a comm file, but the model has no communication networks (it "
           "was trained without --comm)",
           path);
  const CommData data = load_comm_data(path);
  report_problems(path, data.problems);
  skipped = data.problems.size();
  ES_CHECK(data.batch == model.comm_batch_size,
           "{}: measured at batch {}, the model's comm networks predict batch {}", path, data.batch,
           model.comm_batch_size);
  Comparison fwd{"comm_fwd", fmt::format("comm forward, {} devices", data.num_devices), {}, {}};
  Comparison bwd{"comm_bwd", fmt::format("comm backward, {} devices", data.num_devices), {}, {}};
  for (const CommRecord& r : data.records) {
    std::vector<double> pf(r.dim_sums.size()), pb(r.dim_sums.size());
    predict_comm_ms(model, r.dim_sums, r.delays_ms, pf, pb);
    fwd.predicted.insert(fwd.predicted.end(), pf.begin(), pf.end());
    fwd.measured.insert(fwd.measured.end(), r.fwd_ms.begin(), r.fwd_ms.end());
    bwd.predicted.insert(bwd.predicted.end(), pb.begin(), pb.end());
    bwd.measured.insert(bwd.measured.end(), r.bwd_ms.begin(), r.bwd_ms.end());
  }
  return {fwd, bwd};
}

void run_validate(const ValidateArgs& args) {
  ES_CHECK(args.ranking || !args.data_path.empty(), "validate: give --data FILE, --ranking, or both");
  if (args.data_path.empty()) {
    const json ranking = run_ranking(args);
    if (args.json_output) {
      fmt::print("{}\n", json{{"pick_within_2pct_rate", ranking["pick_within_2pct_rate"]},
                               {"ranking", ranking}}
                              .dump(2));
    } else {
      print_ranking(ranking);
    }
    return;
  }
  const NeuralModel model = load_neural_model(args.model_dir);
  const CostDataKind kind = detect_cost_data_kind(args.data_path);
  size_t skipped = 0;
  const std::vector<Comparison> comparisons =
      kind == CostDataKind::kCompute ? compute_comparisons(model, args.data_path, skipped)
                                     : comm_comparisons(model, args.data_path, skipped);
  // Top level: compute's figures, or for comm both directions pooled (every
  // device's fwd and bwd ms); per direction under "fwd" / "bwd".
  Comparison pooled{"all", "all", {}, {}};
  for (const Comparison& c : comparisons) {
    pooled.predicted.insert(pooled.predicted.end(), c.predicted.begin(), c.predicted.end());
    pooled.measured.insert(pooled.measured.end(), c.measured.begin(), c.measured.end());
  }
  json out = to_json(accuracy(pooled.predicted, pooled.measured));
  out["kind"] = kind == CostDataKind::kCompute ? "compute" : "comm";
  out["model"] = args.model_dir;
  out["data"] = args.data_path;
  out["skipped_bad_records"] = skipped;
  if (kind == CostDataKind::kComm) {
    out["fwd"] = to_json(accuracy(comparisons[0].predicted, comparisons[0].measured));
    out["bwd"] = to_json(accuracy(comparisons[1].predicted, comparisons[1].measured));
  }
  if (!args.plot_dir.empty()) {
    write_accuracy_report(args.plot_dir,
                          "Validation of " + args.model_dir + " on " + args.data_path, comparisons,
                          {});
  }
  if (args.ranking) {
    out["ranking"] = run_ranking(args);
    out["pick_within_2pct_rate"] = out["ranking"]["pick_within_2pct_rate"];
  }
  if (args.json_output) {
    fmt::print("{}\n", out.dump(2));
    return;
  }
  TextTable table({"data", "n", "MAPE %", "p90 APE %", "Kendall tau"});
  for (const Comparison& c : comparisons) {
    const AccuracyFigures f = accuracy(c.predicted, c.measured);
    table.add_row({c.title, std::to_string(f.count), fmt::format("{:.2f}", f.mape_pct),
                   fmt::format("{:.2f}", f.p90_ape_pct), fmt::format("{:.3f}", f.kendall_tau)});
  }
  fmt::print("model {} on {}{}:\n{}", args.model_dir, args.data_path,
             skipped ? fmt::format(" ({} bad records skipped)", skipped) : "", table.render());
  if (args.ranking) print_ranking(out["ranking"]);
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand("validate", "Accuracy of a cost model on measured data, and its ranking of placements");
  cmd->add_option("--model", args->model_dir, "Model directory (embshard train --out)")->required();
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
  cmd->add_option("--seed", r.seed, "Seed of the tasks and placements")->capture_default_str();
  cmd->add_flag("--json", args->json_output,
                "Print JSON (mape_pct, p90_ape_pct, kendall_tau, count, ...)");
  cmd->add_option("--plot-dir", args->plot_dir, "Also write report.md/json and SVG plots here");
  cmd->callback([args] { run_validate(*args); });
}

}  // namespace embshard::cli
