// Planners: search a plan for a task against a cost model.
//
// Every planner is created by name from one registry (create_planner), and
// every plan goes through make_plan(), which validates it, predicts its costs
// with the cost model and reports the lower bound and the optimality gap, so a
// planner cannot hand back a plan that breaks a memory cap or a constraint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embshard/cost/cost_model.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"
#include "embshard/plan/result.h"

namespace embshard {

// neuroshard's search budget: NeuroShard's published search parameters,
// and the shortcuts that cut its model calls (each measured in
// docs/measurement.md; 0 turns one off and gives NeuroShard's own search).
struct SearchBudget {
  int beam_width = 3;
  int max_steps = 10;
  int candidates = 10;      // top-k pieces by size and top-k by single cost
  int grid_steps = 11;      // per-device dim-sum caps from cap_low to cap_high x mean
  double cap_low = 1.0;
  double cap_high = 1.5;
  int cache_log2_entries = 16;  // fused-cost cache (16 bytes an entry)
  // Stop costing devices once their compute alone exceeds the best fused cost
  // found (exact for monotone cost models; see grid_greedy.h).
  bool prune_monotone = true;
  // A piece's device scan (ascending compute) also stops after this many
  // costed devices in a row beat nothing held so far (0: no limit). Not
  // exact, but the cheapest device is almost always among the least loaded:
  // at 1000 x 64, 4 costs 4-5x fewer model calls than no limit for plans
  // within 0.3% either way, and 1 about 0.6x the calls of 4 for plans
  // within 0.7% either way, mean +0.02%.
  int scan_patience = 1;
  // Screening: a beam step first rates each of its candidates on one cap,
  // the one its parent's best placement came from (GridGreedy::best_cap),
  // and only the screen_keep x beam_width best of them on the whole grid
  // (0: every candidate on the whole grid). Not exact (a candidate the
  // screen ranks low is not rated again), but a child's best cap is mostly
  // its parent's: 0.36x the model calls of no screening, 26 of 32 plans the
  // same, the rest within 0.3% either way.
  int screen_keep = 2;
  // The beam stops after this many steps in a row find nothing cheaper than
  // the best so far (0: every one of max_steps). The halvings' beam and the
  // wider beam count apart. Not exact (a later step can still find a cheaper
  // plan), but most searches settle within a few steps: 0.57-0.65x the model
  // calls up to 200 x 16 for the same plans.
  int step_patience = 3;
};

struct PlannerOptions {
  uint64_t seed = 1;    // random
  SearchBudget budget;  // neuroshard
  // The search rates a device at its predicted compute plus this times the
  // root of the sum of its pieces' squared costs alone: one standard
  // deviation of the device's error where each piece's prediction errs
  // independently by this fraction (0: the model's figure alone). A device
  // of one or two big pieces carries its pieces' errors whole, one of many
  // pieces their mean, and a search that balances devices to the line on
  // the model keeps the plans whose few-piece devices it under-reads (the
  // optimizer's curse). Plans are still reported at the model's figure.
  double uncertainty = 0;
  // Threads rating a beam step's candidates (0: one per hardware thread). The
  // plan is the same for every count.
  int threads = 0;
  // dreamshard, autoshard: the trained policy directory ("": the shipped one,
  // models/policies/<name>).
  std::string policy_dir;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  // A plan that keeps every memory cap and constraint, or Error naming why
  // there is none. `costs` registers the task's pieces with the cost model.
  virtual Plan plan(const PlanTask& task, ShardCosts& costs) = 0;
  // Up to `count` distinct plans the search rates best, best first (the first
  // is plan()'s): what a verification step measures. A planner that finds
  // one plan returns it alone.
  virtual std::vector<Plan> plan_candidates(const PlanTask& task, ShardCosts& costs, int count) {
    (void)count;
    return {plan(task, costs)};
  }
  // How the last search went, for the report ("": nothing to say): the
  // beam's steps and why it stopped.
  virtual std::string search_summary() const { return ""; }
};

// Valid names: random, size_greedy, dim_greedy, lookup_greedy,
// size_lookup_greedy, torchrec (embshard's reading of TorchRec's heuristics), neuroshard,
// dreamshard, autoshard, torchrec_planner (TorchRec's own planner, through the Python that
// imports it). Error lists them when `name` is unknown.
std::unique_ptr<Planner> create_planner(const std::string& name, const PlannerOptions& options);
// A --policy given to an algorithm that has none is an error, not ignored.
void check_policy_use(const std::string& name, const PlannerOptions& options);
// embshard's planners (what eval runs by default).
const std::vector<std::string>& planner_names();

// A lower bound on the cost of every plan of the task under `costs`' model
// (plan/result.h says when it is valid).
LowerBound lower_bound(const PlanTask& task, ShardCosts& costs);

// Runs the planner, validates its plan (Error if it is invalid) and predicts.
PlanResult make_plan(Planner& planner, const PlanTask& task, const CostModel& model);
// The same with a verification step (docs/guide.md): the
// planner's best `candidates` distinct plans, each validated, predicted with
// `model` and measured with `truth`; the measured fastest is the result's
// plan. Plans that differ only in device labels count as one.
struct VerifyOptions {
  int candidates = 0;  // 0: no verification (make_plan)
  // Each round after the first plans against `model`'s compute corrected by
  // every device measured so far (cost/corrected_model.h) and measures the
  // new plans among its best `candidates`; a round with no new plan is the
  // last.
  int rounds = 1;
  // After the rounds, every candidate is measured comm_passes - 1 times more,
  // pass_pause_s between the passes (the communication again: `truth`'s
  // compute should cache), and chosen on the mean of its fastest half.
  int comm_passes = 1;
  double pass_pause_s = 0;
  // Then the `leaders` candidates with the lowest figures are measured
  // fresh_passes times more, compute afresh too (`truth`'s set_fresh_pass),
  // and the choice is the leader with the lowest median of its figure and
  // those measurements: one lucky measurement of a device's compute does not
  // decide it. Either 0: chosen on the figures.
  int leaders = 0, fresh_passes = 0;
  // Planners (create_planner names, default options) whose one plan each is
  // measured beside the search's in the first round, say the `torchrec`
  // baseline: the choice is then never a plan that measures slower than
  // theirs, and their devices inform the later rounds' corrections. A rival
  // that finds no plan for the task is left out (Verification::rivals_failed).
  std::vector<std::string> rivals = {};
  // Before the first search, each of the task's tables is measured alone and
  // whole on `truth`, and every search (the first too) plans against the
  // model corrected by those tables and the devices measured since: a table
  // the model misreads is known before any plan balances on it.
  bool measure_tables = false;
};
PlanResult make_verified_plan(Planner& planner, const PlanTask& task, const CostModel& model,
                              const CostModel& truth, const VerifyOptions& options);
// Error naming `what` (an option) unless every rival is a planner_names() one.
void check_verify_rivals(const std::vector<std::string>& rivals, const std::string& what);
// "torchrec,size_greedy" -> those names, "none" -> none; checked as above.
std::vector<std::string> parse_verify_rivals(const std::string& text, const std::string& what);
// The corrections' ridge: a table seen on one device of k equal pieces gets
// (1/k) / (1/k + ridge) of that device's error.
inline constexpr double kCorrectionRidge = 0.05;

}  // namespace embshard
