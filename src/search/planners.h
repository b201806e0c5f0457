// The planners' implementations (src/search/*.cpp), reached through the
// registry (create_planner in planner.cpp).
#pragma once

#include <memory>
#include <string>

#include "embshard/search/planner.h"

namespace embshard {

std::unique_ptr<Planner> make_random_planner(const PlannerOptions& options);
std::unique_ptr<Planner> make_score_greedy_planner(const std::string& score);
std::unique_ptr<Planner> make_torchrec_planner(const PlannerOptions& options);
// TorchRec's own planner, run through Python (util/python_peer.h).
std::unique_ptr<Planner> make_torchrec_peer_planner();
std::unique_ptr<Planner> make_neuroshard_planner(const PlannerOptions& options);
enum class PolicyKind;
std::unique_ptr<Planner> make_policy_planner(PolicyKind kind, const PlannerOptions& options);

}  // namespace embshard
