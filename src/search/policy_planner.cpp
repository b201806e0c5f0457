// The learned policies as planners: one greedy episode (search/policy.h).
//
// The policies place whole tables, as published. Like every embshard
// planner, a table that fits no device is halved column-wise where the task
// allows it (search::initial_pieces); the policy then places the pieces as
// it places tables (a piece is the table at fewer columns). A piece that
// finds no room late in an episode is halved too, and the episode reruns.
#include "embshard/search/planner.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"
#include "pieces.h"
#include "search/planners.h"

namespace embshard {
namespace {

using search::Piece;

// The task the policy sees: one "table" per piece.
PlanTask piece_task(const PlanTask& task, const std::vector<Piece>& pieces) {
  PlanTask sub;
  sub.batch_size = task.batch_size;
  sub.device_mem_bytes = task.device_mem_bytes;
  sub.memory = task.memory;
  sub.split = task.split;
  for (const Piece& p : pieces) {
    sub.tables.push_back(task.tables[p.table]);
    sub.tables.back().dim = p.cols;
    if (p.row_piece()) sub.tables.back().rows = p.rows;  // a block's own memory
    sub.pinned_device.push_back(search::required_device(task, p));
    sub.no_split.push_back(1);
  }
  return sub;
}

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
    return search::place_with_fallback(task, costs, [&](search::Fit fit) { return place(task, costs, fit); });
  }

 private:
  Plan place(const PlanTask& task, ShardCosts& costs, search::Fit fit) const {
    std::vector<Piece> pieces = search::initial_pieces(task, costs, fit);
    for (;;) {
      const PlanTask sub = piece_task(task, pieces);
      ShardCosts sub_costs(sub, costs.model());
      const EpisodeInput in = episode_input(nets_, sub, &sub_costs);
      EpisodeOptions o;
      o.allow_overflow = true;  // to find the piece that needs halving
      const Episode ep = run_episode(nets_, sub, in, &sub_costs, o);
      if (!ep.overflow) return search::plan_from_pieces(task, pieces, ep.device_of);
      const Piece p = pieces[ep.stuck_table];
      ES_CHECK(p.full_rows() && task.splittable(p.table) && task.split.can_halve(p.cols) &&
                   task.types.allows(ShardingType::kColumnWise),
               "{}: no device has room for table '{}' ({} columns, {} bytes; the most free "
               "memory left on a device is {} bytes) and it may not be halved",
               name(), task.tables[p.table].name, p.cols, p.mem_bytes,
               ep.stuck_most_free_bytes);
      pieces[ep.stuck_table] = search::make_piece(task, costs, p.table, p.cols / 2);
      pieces.insert(pieces.begin() + ep.stuck_table + 1, pieces[ep.stuck_table]);
    }
  }

  PolicyNets nets_;
};

}  // namespace

std::unique_ptr<Planner> make_policy_planner(PolicyKind kind, const PlannerOptions& options) {
  return std::make_unique<PolicyPlanner>(kind, options.policy_dir);
}

}  // namespace embshard
