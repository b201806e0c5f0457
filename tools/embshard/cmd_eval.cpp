// embshard eval: every algorithm's plan of every task, measured.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "options.h"

namespace embshard::cli {
namespace {

struct EvalArgs {
  EvalOptions options;
  std::string sharding_types;
  bool json_output = false;
  std::string svg;
  std::string reference = "model";
  std::string verify_rivals = "torchrec";
};

void run_eval_command(EvalArgs& a, bool devices_given, bool rounds_given) {
  // The measured cost model has nothing for later rounds to correct.
  if (!rounds_given && a.options.cost_model == "measured") a.options.verify.rounds = 1;
  a.options.verify.rivals = parse_verify_rivals(a.verify_rivals, "--verify-rivals");
  a.options.measure.reference = a.reference == "now"       ? EvalMeasurement::Reference::kNow
                                : a.reference == "anchors" ? EvalMeasurement::Reference::kAnchors
                                                           : EvalMeasurement::Reference::kModel;
  if (!a.sharding_types.empty()) {
    a.options.types = ShardingTypes::parse(a.sharding_types, "--sharding-types");
  }
  check_distinct_outputs({{"--out", a.options.out_path}, {"--svg", a.svg}});
  if (!a.svg.empty()) check_writable(a.svg, "--svg");  // on every rank: before the collectives
  Reporter& reporter = stderr_reporter();
  std::vector<nlohmann::json> records;
  std::string comm_source = kModelCommSource;
  int devices = a.options.devices;
  if (launched_with_several_ranks()) {
    ES_CHECK(!a.options.predict_only,
             "eval: --predict-only executes nothing; run it in one process, not under mpirun");
    EvalOptions o = a.options;
    if (!devices_given) o.devices = 0;  // one per rank
    MpiEvalResult r = run_eval_mpi(o, reporter);
    if (!r.root) return;  // ranks > 0 served rank 0's measurements
    records = std::move(r.records);
    comm_source = r.comm_source;
    devices = r.devices;
  } else {
    records = run_eval(a.options, reporter);
  }
  const EvalSummary summary = summarize_eval(records, a.options.algos, a.options.out_path);
  if (summary.left_out > 0) {
    reporter.note(fmt::format("{} of {} tasks do not fit {} devices or had an algorithm find no "
                              "plan (see {}); they are left out",
                              summary.left_out, records.size(), devices, a.options.out_path));
  }
  const std::string svg = a.svg.empty() ? "" : eval_svg(summary, devices);
  if (a.json_output) {
    fmt::print("{}\n", eval_summary_json(summary, comm_source).dump(2));
  } else {
    fmt::print("{}", eval_report(summary, comm_source));
  }
  if (!a.svg.empty()) write_file_atomic(a.svg, svg);
}

// How eval measures: the executor, the passes, the scale.
void add_measurement_options(CLI::App* eval, EvalArgs& e) {
  EvalMeasurement& m = e.options.measure;
  add_executor_option(eval, m.executor,
                      "Where each device's compute runs (not cpu: one process measures the "
                      "devices in turn, all-to-alls from the cost model): ");
  eval->add_option("--threads", m.threads, "Executor threads per device")->capture_default_str();
  add_thread_cpu_time_flag(eval, m.thread_cpu_time);
  eval->add_option(
          "--comm-passes", m.comm_passes,
          "Under mpirun: measure every plan's all-to-alls this many times, "
          "--expert comm-pass-pause-s apart; the mean of its fastest half of the passes counts "
          "(of up to three: the fastest); a +verify algorithm chooses among its "
          "candidates on as many passes")
      ->capture_default_str();
  eval->add_option("--compute-passes", m.compute_passes,
                   "Measure every device's compute this many times, each pass over all of a "
                   "task's plans; each device counts at its median (the figure on the first "
                   "measurement alone stays beside it)")
      ->capture_default_str();
  eval->add_flag("--raw-clock", m.raw_clock,
                 "Under mpirun: also every plan's cost on the raw wall clock (compute's raw "
                 "medians, its all-to-alls timed again): measured_raw_ms beside measured_ms, "
                 "and its own ratio to the best baseline");
  eval->add_option("--reference-window-s", m.reference_window_s,
                   "Seconds of reference-probe runs the measured compute is normalized to")
      ->capture_default_str();
  eval->add_option("--reference", e.reference,
                   "The scale measured costs are normalized to: the cost model's (its training "
                   "data's reference probe and exchange; measured now where it has none), "
                   "measured now, or anchors (anchor shards priced by the neural model: any "
                   "machine, however busy; exchanges as 'model')")
      ->check(CLI::IsMember({"model", "now", "anchors"}))
      ->capture_default_str();
}

// The +verify algorithms' budget; returns --verify-rounds (its default
// depends on the cost model).
CLI::Option* add_verify_options(CLI::App* eval, EvalArgs& e) {
  VerifyOptions& v = e.options.verify;
  eval->add_option("--verify-candidates", v.candidates, "Plans measured by the +verify algorithms")
      ->capture_default_str();
  CLI::Option* rounds =
      eval->add_option("--verify-rounds", v.rounds,
                       "Rounds of the +verify algorithms: each after the first plans against the "
                       "model corrected by the devices measured so far (default 3; 1 with "
                       "--cost-model measured)");
  eval->add_option("--verify-leaders", v.leaders,
                   "With --comm-passes P > 1: the +verify algorithms' leading candidates "
                   "measured P - 1 times more, compute afresh too, and the choice among them "
                   "on the median; 0: none")
      ->capture_default_str();
  eval->add_option("--verify-rivals", e.verify_rivals,
                   "Planners whose plan the +verify algorithms measure beside their own, "
                   "comma-separated, or none")
      ->capture_default_str();
  return rounds;
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto e = std::make_shared<EvalArgs>();
  EvalOptions& o = e->options;
  o.algos = planner_names();
  CLI::App* eval = app.add_subcommand(
      "eval", "Plan every task with every algorithm and measure the plans on the executor");
  eval->add_option("--tasks", o.tasks_path, "Task file (embshard tasks)")->required();
  add_list_option(eval, "--algos", o.algos,
                  "Algorithms: " + planner_choices() + ", each also as NAME" + kVerifySuffix +
                      " (its best plans measured, the fastest kept), "
                      "NAME:uncertainty=U (its own --expert uncertainty), "
                      "NAME:flat (searched on one host, measured on the hosts), "
                      "NAME+verify:verify-tables, :candidates=N, :rounds=N, :leaders=N (its own "
                      "--expert verify-tables, --verify-candidates, --verify-rounds, "
                      "--verify-leaders) and "
                      "NAME@TYPE+TYPE (its own sharding types)");
  CLI::Option* devices =
      eval->add_option("--devices", o.devices, "Devices (under mpirun: the ranks)")
          ->capture_default_str();
  add_topology_options(eval, o.topology);
  eval->add_option("--cost-model", o.cost_model, "Cost model: " + one_of(cost_model_names()))
      ->capture_default_str();
  eval->add_option("--model", o.model_dir, "Neural model directory (default: models/neural)");
  eval->add_option("-o,--out", o.out_path, "Records, one per task (JSON lines; resumable)")
      ->required();
  eval->add_option("--trace-dir", o.trace_dir,
                   "Write each measured plan's iteration (per device: compute, waits, forward "
                   "and backward all-to-all) as a Chrome/Perfetto trace here, "
                   "task<i>_<algorithm>.json");
  add_seed_option(eval, o.planner.seed, "Seed of the random planner");
  eval->add_option("--plan-threads", o.planner.threads,
                   "neuroshard search threads (0: one per hardware thread)")
      ->capture_default_str();
  add_measurement_options(eval, *e);
  CLI::Option* rounds = add_verify_options(eval, *e);
  eval->add_flag("--predict-only", o.predict_only,
                 "Plan every task and record the predicted costs only: nothing executed (compares "
                 "the searches on the cost model in seconds)");
  eval->add_flag("--json", e->json_output, "Print the summary as JSON (algorithms.<name>...)");
  eval->add_option("--sharding-types", e->sharding_types,
                   "Sharding types plans may use, comma-separated (default: all): " +
                       one_of(sharding_type_names()) +
                       "; an algorithm named ALGO@TYPE+TYPE uses its own set");
  eval->add_option("--svg", e->svg, "Write a bar chart of the summary here");
  std::vector<ExpertSetting> expert = search_settings(o.planner);
  expert.insert(expert.end(),
                {expert_switch("verify-tables", o.verify.measure_tables),
                 expert_setting("comm-warmup", o.measure.comm_warmup, 0),
                 expert_setting("comm-repeats", o.measure.comm_repeats, 1),
                 expert_setting("comm-pass-pause-s", o.measure.comm_pass_pause_s, 0.0, 600.0),
                 expert_setting("comm-timeout-s", o.measure.comm_timeout_s, 1e-3)});
  add_expert_option(eval, std::move(expert));
  eval->callback([e, devices, rounds] {
    run_eval_command(*e, devices->count() > 0, rounds->count() > 0);
  });
}

}  // namespace embshard::cli
