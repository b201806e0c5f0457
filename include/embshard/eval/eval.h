// Evaluation on real execution (NeuroShard's protocol): task sets drawn from
// a table pool, every algorithm's plan executed, costs compared.
//
// A task is T tables of the pool, each at a dim, with a memory cap per
// device. `run_eval` plans each task with each algorithm against the cost
// model, then measures the plan: every device's fused forward + backward +
// update over its shards runs on the executor (the "measured" compute
// model); in one process communication comes from the cost model, and the
// report says so; under mpirun it is measured (run_eval_mpi).
// One record per task is appended as it finishes (RecordFile): a rerun of the
// same command resumes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/plan/plan.h"
#include "embshard/search/planner.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct EvalTask {
  std::vector<int> tables;  // pool table ids
  std::vector<int> dims;    // one per table
  int64_t mem_cap_bytes = 0;  // per device
};

struct TaskGenOptions {
  std::string pool_dir;
  int min_tables = 20, max_tables = 60;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  int64_t mem_cap_bytes = 0;  // per device
  int count = 10;
  uint64_t seed = 0;
  // Keep tables larger than a device at their dim (they need splitting);
  // by default such tables are skipped, as NeuroShard's generator does.
  bool oversized = false;
  // One task instead: every pool table at its own dim (a user's tables, from
  // synth --spec), whatever their size.
  bool whole_pool = false;
};

std::vector<EvalTask> generate_tasks(const Workload& pool, const TaskGenOptions& options);
// {"format": "embshard-tasks", "version": 1, "pool": dir, "tasks": [...]}
void save_tasks(const std::string& path, const std::string& pool_dir,
                const std::vector<EvalTask>& tasks);
// Checks every table id against the pool (Error names the task, the id and
// the pool size).
std::vector<EvalTask> load_tasks(const std::string& path, std::string* pool_dir);

// How eval measures each plan.
struct EvalMeasurement {
  // Where each device's compute runs (create_executor's names). One process
  // measures every device in turn on it, its all-to-alls from the cost model;
  // under mpirun each rank measures its own on the CPU. A model that learned
  // raw medians (a GPU set's) is judged on the raw clock.
  std::string executor = "cpu";
  int threads = 1;               // executor threads per device
  bool thread_cpu_time = false;  // ExecutorOptions::thread_cpu_time
  // After a task's plans are measured, every device's compute is measured
  // compute_passes - 1 more times (each pass over all the task's plans, so the
  // passes fall in different windows), and each device counts at its median.
  // A plan's cost is its slowest device: one noisy measurement per device
  // lifts an evenly balanced plan more than a lopsided one (the expected
  // maximum of noise); the median takes most of that out. The figure on the
  // first measurement alone stays in the record beside it.
  int compute_passes = 1;
  // The scale measured costs are normalized to (docs/eval.md, "One scale"):
  // kModel takes the reference probe and exchange times from the cost
  // model's training data, so that measured and predicted figures compare
  // however busy the machine was when the run started; kNow measures them
  // at the start; kAnchors fits the compute scale on anchor shards priced by
  // the neural model (cost/anchors.h: on any machine, however busy), the
  // exchanges' as kModel. A resumed run keeps its file's; where the model
  // records none, or the run has hosts (the model's exchange ran on one),
  // the run measures the exchange's and its header says so.
  enum class Reference { kModel, kNow, kAnchors } reference = Reference::kModel;
  // Seconds of reference-probe runs the measured compute's quiet time comes
  // from (once per output file; a resumed run keeps the file's).
  double reference_window_s = 20;
  // Under mpirun: every plan's all-to-alls timed across the ranks, medians of
  // comm_repeats after comm_warmup runs; a collective past comm_timeout_s
  // ends the job (a rank died or hangs).
  int comm_warmup = 3, comm_repeats = 10;
  double comm_timeout_s = 60;
  // Under mpirun: after a task's plans are measured, their all-to-alls are
  // measured comm_passes - 1 more times, comm_pass_pause_s apart, and each
  // plan keeps the mean of its fastest half of the passes (bench comm
  // --passes: a stretch in which the exchanges run slow lifts one pass,
  // rarely all).
  int comm_passes = 1;
  double comm_pass_pause_s = 5;
  // Under mpirun: every plan measured on the raw clock too (the compute's raw
  // medians, its all-to-alls measured again and their raw medians, with as
  // many passes): the wall clock's time beside the normalized one, without
  // the drift cancelled (docs/eval.md, "On the raw clock").
  bool raw_clock = false;
};

struct EvalOptions {
  std::string tasks_path;
  std::vector<std::string> algos;
  int devices = 4;
  // The devices' hosts: what every plan is searched and predicted on (an
  // algorithm's `flat` option searches on one host). Under mpirun the
  // exchanges are timed on the network as it is: run eval then under
  // scripts/emulated_hosts.sh with the same hosts.
  Topology topology;
  std::string cost_model = "neural";
  std::string model_dir;  // "": the shipped models
  std::string out_path;   // records (JSON lines)
  PlannerOptions planner;
  // The sharding types every algorithm's plans may use (--sharding-types). An
  // algorithm named "ALGO@TYPE+TYPE..." (e.g. neuroshard@table_wise+column_wise)
  // uses its own set instead: two spaces compared side by side in one run.
  ShardingTypes types;
  EvalMeasurement measure;
  // "<planner>+verify" algorithms: the planner's best candidates measured,
  // the measured fastest kept. The defaults: one plan a round, three rounds,
  // the torchrec baseline as a rival, no leaders (docs/eval.md, "The
  // verification budget"). The measurement's passes are filled in at use;
  // leaders count only with comm_passes > 1.
  VerifyOptions verify = {.candidates = 1, .rounds = 3, .rivals = {"torchrec"}};
  // Where to write each measured plan's iteration as a Chrome / Perfetto
  // trace, task<i>_<algorithm>.json ("": none).
  std::string trace_dir;
  // Plan only: record each plan's predicted cost, execute nothing (compares
  // searches on the cost model in seconds; one process only).
  bool predict_only = false;
};

// An --algos item: NAME[:OPTION...][@TYPE+TYPE...], e.g.
// "neuroshard:uncertainty=0.1@table_wise+column_wise": the algorithm, its
// sharding types (without '@': the run's) and its options (the run's, with
// the item's own: uncertainty=U, flat; on a +verify item also verify-tables,
// candidates=N, rounds=N and leaders=N). Error naming the item on an
// unknown type or option or a value out of range.
struct AlgoSpec {
  std::string name;
  ShardingTypes types;
  PlannerOptions planner;
  // A +verify algorithm's: measure_tables, candidates, rounds, leaders.
  VerifyOptions verify;
  // Searched as if every device were on one host; predicted and measured on
  // the run's hosts (what a search that ignores them gives).
  bool flat = false;
};
AlgoSpec parse_algo_spec(const std::string& spec, const EvalOptions& run);

// The suffix that makes an algorithm of a planner plus a verification step.
inline const std::string kVerifySuffix = "+verify";
// "neuroshard+verify" -> "neuroshard"; "" when `name` has no verification.
std::string verified_base(const std::string& name);

// Whether an --algos item is a heuristic the search is compared with: not
// neuroshard (in any space), not a learned policy, not a verified algorithm.
bool is_baseline(const std::string& spec);

// Where the communication of the measured cost came from, as records and
// summaries name it.
constexpr const char* kModelCommSource = "cost model (one process: no all-to-all measured)";

// Error "<tool>: --algos names 'x' twice" when an algorithm repeats.
void check_no_repeated_algos(const std::vector<std::string>& algos, const std::string& tool);

// Error naming the option when `options` cannot run (unknown or repeated
// algorithms, bad counts); run_eval checks them first, and mpirun's rank 0
// before any exchange is timed. `comm_measured`: under mpirun. Returns
// whether a verified algorithm (name+verify) is among them.
bool check_eval_options(const EvalOptions& options, bool comm_measured);

// Runs (resuming) and returns every record of the output file. Compute is
// measured on the executor; communication comes from `comm` (the cost model
// under test when null), named `comm_source` in the header, which a resumed
// run must match, and `comm_probe` (the measured comm's reference exchange
// times) is recorded there; `raw_comm`: the same measurements' raw medians,
// for options.raw_clock. Progress goes to `reporter`.
std::vector<nlohmann::json> run_eval(const EvalOptions& options, Reporter& reporter,
                                     std::shared_ptr<const CommModel> comm = nullptr,
                                     const std::string& comm_source = kModelCommSource,
                                     const nlohmann::json& comm_probe = nullptr,
                                     std::shared_ptr<const CommModel> raw_comm = nullptr);

// True when this process was started by mpirun (or another launcher) with
// more than one rank.
bool launched_with_several_ranks();

// `mpirun -np N embshard eval`: one rank per device (options.devices 0: N).
// Rank 0 plans and measures compute as run_eval does; every plan's
// all-to-alls (forward with each device's measured delay, then backward) are
// timed for real across the N ranks (bench comm's protocol). Ranks > 0 serve
// rank 0 and get root = false and no records. Defined in embshard_mpi.
struct MpiEvalResult {
  bool root = false;
  int devices = 0;
  std::string comm_source;
  std::vector<nlohmann::json> records;
};
MpiEvalResult run_eval_mpi(const EvalOptions& options, Reporter& reporter);

struct AlgoSummary {
  std::string name;
  double mean_measured_ms = 0, mean_predicted_ms = 0;
  // Mean measured cost / the best baseline's mean measured cost (a ratio of
  // means over the same tasks; the best baseline is the algorithm other than
  // neuroshard, dreamshard, autoshard and the +verify ones with the lowest
  // mean).
  double ratio_to_best_baseline = 0;
  // Its 95% interval over the tasks (a paired percentile bootstrap,
  // util/statistics.h): how far the ratio could move with other tasks of the
  // same kind, not what moves every task alike (0 and 0: no baseline, or
  // fewer than two tasks).
  double ratio_ci_low = 0, ratio_ci_high = 0;
  int tasks_won = 0;                  // lowest measured cost (ties count for each)
  double mean_gap_to_bound = 0;       // mean of predicted / bound - 1 (the bound is the model's)
  double prediction_mape_pct = 0;     // predicted vs measured
  int failed = 0;                     // tasks it found no plan for (left out of every mean)
  // eval --raw-clock: the same on the raw clock (0 without).
  double mean_raw_ms = 0, raw_ratio_to_best_baseline = 0;
  // eval --compute-passes K > 1: the same on each device's first compute
  // measurement alone (what K = 1 reports; 0 without).
  double mean_first_compute_ms = 0, first_compute_ratio_to_best_baseline = 0;
  // Where the measured cost goes (EvalSummary::device_compute): the means
  // over the tasks of the slowest device's compute and of the devices' mean
  // compute. The rest of the cost is communication and waits; the devices'
  // mean compute plus that rest is what the plan would cost with its compute
  // spread evenly over the devices (its work and communication unchanged).
  double mean_slowest_compute_ms = 0, mean_device_compute_ms = 0;
  // A verified algorithm's fall-back: per task, its measured cost over the
  // chosen plan's figure in verification - 1, in percent (the figure: the
  // mean of the fastest half of its passes, a leader's the median of that
  // and its fresh measurements); from the records that keep the passes
  // (verification.chosen_passes_ms; empty: none).
  std::vector<double> fallback_pct;
  // Of the records whose verification judged its choice (runner_up.tie:
  // with leaders), those where the chosen plan's lead over the runner-up
  // was within a leader's own span (RunnerUp, plan/report.h).
  int choices_judged = 0, choice_ties = 0;
  double rest_ms() const { return mean_measured_ms - mean_slowest_compute_ms; }
  double balanced_ms() const { return mean_device_compute_ms + rest_ms(); }
};
struct EvalSummary {
  std::vector<AlgoSummary> algos;
  // Records of `eval --predict-only`: no measured costs (mean_measured_ms and
  // prediction_mape_pct are 0); the ratios and wins are on the predicted ones.
  bool predicted_only = false;
  bool raw_clock = false;  // every record holds the raw clock's figures too
  // Every record holds the first compute pass's figure (--compute-passes > 1).
  bool first_compute = false;
  // Every record holds each plan's measured compute per device
  // (device_compute_ms): the AlgoSummary's slowest and mean compute are set.
  bool device_compute = false;
  int tasks = 0;      // tasks every algorithm planned: the means are over these
  int left_out = 0;   // records of tasks that did not fit or that an algorithm failed
  int best_baseline = -1;  // its index in `algos` (-1: no baseline among them)
  // The mean an algorithm is ranked by: measured, or with --predict-only predicted.
  double score_ms(const AlgoSummary& s) const {
    return predicted_only ? s.mean_predicted_ms : s.mean_measured_ms;
  }
};
// Means over the tasks that every algorithm planned. A record without a
// field it reads is an Error naming `source` (the records' file), the
// record and the field.
EvalSummary summarize_eval(const std::vector<nlohmann::json>& records,
                           const std::vector<std::string>& algos, const std::string& source = "");
nlohmann::json eval_summary_json(const EvalSummary& summary, const std::string& comm_source);
std::string eval_report(const EvalSummary& summary, const std::string& comm_source);
std::string eval_svg(const EvalSummary& summary, int devices);

}  // namespace embshard
