// Training the learned placement policies (search/policy.h) on tasks drawn
// from table pools, with libtorch (defined in embshard_torch).
//
// DreamShard, as published: each iteration runs the current policy (sampled)
// on a few fresh tasks and takes the "real" cost of those plans from `truth`
// (measured on the executor with --truth measured, or a cost model standing
// in for measurements), refits the cost network on every plan seen so far,
// then runs REINFORCE on the MDP the cost network estimates: the reward of
// an episode is minus the predicted plan cost (overall head) over the task's
// ideal load, normalised over the task's episodes, with an entropy bonus.
// AutoShard: REINFORCE against `truth` directly, reward minus the imbalance
// of device costs (max over mean).
//
// Resumable: a checkpoint (weights, optimiser state, cost samples) after every
// iteration under <out>/checkpoint; a rerun with the same options continues.
// Deterministic for a seed (one torch thread, seeded draws per iteration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/search/policy.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct PolicyTrainOptions {
  PolicyKind kind = PolicyKind::kDreamShard;
  std::vector<std::string> pool_dirs;  // tasks are drawn from these pools in turn
  std::string out_dir;                 // the policy directory written at the end
  int devices = 4;
  int min_tables = 20, max_tables = 60;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  // Memory per device: headroom x an even split, drawn per task in this range
  // (and never less than 1.5 x the task's largest table).
  double min_headroom = 1.1, max_headroom = 4;
  // Tables whose weights exceed this are not drawn (as `embshard tasks
  // --mem-cap` skips them); 0: every table may be drawn.
  int64_t mem_cap_bytes = 0;
  int iterations = 30;
  int measured_plans = 8;   // DreamShard: "real" plans per iteration
  int cost_epochs = 20;     // DreamShard: cost-network epochs per iteration
  int updates = 10;         // REINFORCE updates per iteration
  int tasks_per_update = 4;
  int episodes = 8;         // sampled episodes per task in an update
  double lr = 1e-3, cost_lr = 2e-3;
  double entropy = 0.01;
  // DreamShard's reward: minus the cost network's plan cost from its overall
  // head ("overall", as published) or the largest sum of a device's compute
  // and communication heads ("device_max").
  std::string reward = "overall";
  int validation_tasks = 8;  // fixed tasks the greedy policy is scored on each iteration
  // Where the costs come from: a cost model name (create_cost_model;
  // "measured" executes each device's shard on `executor` with the pool's
  // traces, communication from the analytic model).
  std::string truth = "neural";
  CostModelOptions truth_options;  // model_dir, executor, threads, reference window
  int hidden = 64, embed = 32;
  uint64_t seed = 1;
  Reporter* reporter = nullptr;
};

struct PolicyTrainResult {
  PolicyNets nets;
  int iterations = 0, resumed_from = 0;
  // Per iteration: {"iteration", "cost_loss", "mean_reward", "validation_ratio"}:
  // validation_ratio = mean truth cost of the greedy policy's plans over the
  // validation tasks / the same for the untrained policy's.
  nlohmann::json history = nlohmann::json::array();
  std::vector<std::string> notes;
};

// Trains (resuming from <out>/checkpoint when it holds the same options) and
// saves the policy to out_dir. Error on an empty pool list, a pool without
// tables, or options out of range.
PolicyTrainResult train_policy(const PolicyTrainOptions& options);

// The truth cost (model's prediction) of the greedy policy's plan of `task`;
// Error when the policy finds no plan.
double policy_plan_cost_ms(const PolicyNets& nets, const PlanTask& task, const CostModel& model);

// Tasks for training and scoring policies: `count` tasks of the pool (drawn as
// `embshard tasks` draws them), each with a memory per device between the
// options' headrooms, for options.devices devices.
std::vector<PlanTask> draw_policy_tasks(const Workload& pool, const PolicyTrainOptions& options,
                                        int count, uint64_t seed);

// Untrained networks of the given sizes (random weights from `seed`):
// the baseline a trained policy must beat, and the start of training.
PolicyNets untrained_policy(PolicyKind kind, int hidden, int embed, uint64_t seed);

// libtorch's forward of the same networks (the reference the plain C++
// inference is tested against): the log-probability of an episode's actions,
// and the cost network's overall prediction (ms) of its placement.
double torch_episode_log_prob(const PolicyNets& nets, const PlanTask& task,
                              const EpisodeInput& in, const Episode& episode);
double torch_cost_net_overall_ms(const PolicyNets& nets, const PlanTask& task,
                                 const EpisodeInput& in, const std::vector<int>& device_of);

}  // namespace embshard
