// The planner registry, the lower bound, and make_plan (validate + predict).
#include "embshard/search/planner.h"

#include <chrono>
#include <fmt/ranges.h>

#include "embshard/search/policy.h"
#include "embshard/util/error.h"

namespace embshard {

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names = {
      "random",     "size_greedy", "dim_greedy", "lookup_greedy", "size_lookup_greedy",
      "torchrec",   "neuroshard", "dreamshard", "autoshard"};
  return names;
}

std::unique_ptr<Planner> create_planner(const std::string& name, const PlannerOptions& options) {
  if (name == "random") return make_random_planner(options);
  if (name == "size_greedy" || name == "dim_greedy" || name == "lookup_greedy" ||
      name == "size_lookup_greedy") {
    return make_score_greedy_planner(name);
  }
  if (name == "torchrec") return make_torchrec_planner(options);
  if (name == "neuroshard") return make_neuroshard_planner(options);
  if (name == "dreamshard") return make_policy_planner(PolicyKind::kDreamShard, options);
  if (name == "autoshard") return make_policy_planner(PolicyKind::kAutoShard, options);
  ES_THROW("unknown planner '{}'; valid planners: {}", name, fmt::join(planner_names(), ", "));
}

LowerBound lower_bound(const PlanTask& task, ShardCosts& costs) {
  LowerBound b;
  std::vector<int> all;
  for (int t = 0; t < task.num_tables(); ++t) {
    // Some device holds the table's narrowest piece (or the whole table if
    // it may not be split), and costs at least that piece alone.
    const int narrow = costs.piece_id(t, task.min_piece_cols(t));
    b.piece_ms = std::max(b.piece_ms, costs.single_ms(narrow));
    all.push_back(costs.piece_id(t, task.tables[t].dim));
  }
  // The devices together cost at least the whole task fused into one call.
  b.work_ms = costs.compute().compute_ms(all) / task.num_devices();
  const size_t n = task.num_devices();
  std::vector<double> dims(n, 0.0), zero(n, 0.0), fwd(n), bwd(n);
  costs.comm().comm_ms(dims, zero, fwd, bwd);
  b.comm_ms = fwd[0] + bwd[0];
  for (size_t d = 1; d < n; ++d) b.comm_ms = std::min(b.comm_ms, fwd[d] + bwd[d]);
  b.comm_ms = std::max(0.0, b.comm_ms);
  double total_dims = 0;
  for (const TableSpec& t : task.tables) total_dims += t.dim;
  dims.assign(n, total_dims / n);
  costs.comm().comm_ms(dims, zero, fwd, bwd);
  for (size_t d = 0; d < n; ++d) b.mean_comm_ms += (fwd[d] + bwd[d]) / n;
  return b;
}

PlanResult make_plan(Planner& planner, const PlanTask& task, const CostModel& model) {
  return make_verified_plan(planner, task, model, model, 0);
}

PlanResult make_verified_plan(Planner& planner, const PlanTask& task, const CostModel& model,
                              const CostModel& truth, int candidates) {
  ES_CHECK(candidates >= 0, "verification: {} candidates, need at least 0", candidates);
  PlanResult r;
  r.algorithm = planner.name();
  r.cost_model = model.name;
  r.model_source = model.source;
  r.extrapolated = extrapolations(model.source, task.batch_size, task.num_devices());
  ShardCosts costs(task, model);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Plan> plans = candidates > 0 ? planner.plan_candidates(task, costs, candidates)
                                           : std::vector<Plan>{planner.plan(task, costs)};
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Plan& plan : plans) {
    try {
      validate_plan(task, plan);
    } catch (const Error& e) {
      ES_THROW("planner {} produced an invalid plan: {}", planner.name(), e.what());
    }
  }
  if (candidates == 0) {
    r.plan = std::move(plans.front());
    r.predicted = predict_plan(task, r.plan, costs);
    r.bound = lower_bound(task, costs);
    return r;
  }
  r.bound = lower_bound(task, costs);
  const auto verify_start = std::chrono::steady_clock::now();
  Verification v;
  v.truth = truth.name;
  ShardCosts measured(task, truth);
  for (Plan& plan : plans) {
    VerifiedCandidate c;
    c.predicted = predict_plan(task, plan, costs);
    c.measured = predict_plan(task, plan, measured);
    c.plan = std::move(plan);
    if (!v.candidates.empty() && c.measured.cost_ms < v.candidates[v.chosen].measured.cost_ms) {
      v.chosen = static_cast<int>(v.candidates.size());
    }
    v.candidates.push_back(std::move(c));
  }
  v.verify_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - verify_start).count();
  r.plan = v.candidates[v.chosen].plan;
  r.predicted = v.candidates[v.chosen].predicted;
  r.verification = std::move(v);
  return r;
}

}  // namespace embshard
