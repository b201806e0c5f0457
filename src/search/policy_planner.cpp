// The learned policies as planners: one greedy episode (search/policy.h).
#include "embshard/search/planner.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

class PolicyPlanner : public Planner {
 public:
  PolicyPlanner(PolicyKind kind, const std::string& dir)
      : nets_(load_policy(dir.empty() ? shipped_policy_dir(kind) : dir)) {
    ES_CHECK(nets_.kind == kind, "{}: holds a {} policy, not {}",
             dir.empty() ? shipped_policy_dir(kind) : dir, policy_kind_name(nets_.kind),
             policy_kind_name(kind));
  }
  std::string name() const override { return policy_kind_name(nets_.kind); }

  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    const EpisodeInput in = episode_input(nets_, task, &costs);
    const Episode ep = run_episode(nets_, task, in, &costs, EpisodeOptions{});
    return table_wise_plan(task, ep.device_of);
  }

 private:
  PolicyNets nets_;
};

}  // namespace

std::unique_ptr<Planner> make_policy_planner(PolicyKind kind, const PlannerOptions& options) {
  return std::make_unique<PolicyPlanner>(kind, options.policy_dir);
}

}  // namespace embshard
