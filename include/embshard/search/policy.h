// Learned placement policies: DreamShard (NeurIPS 2022) and AutoShard (KDD
// 2022), table-wise, as data; the directory that holds them; and the episode
// that places a task's tables one at a time. Inference is plain C++ (the
// MLPs of cost/neural/mlp.h and a GRU cell); training with libtorch is in
// eval/train_policy.h and records the very episodes run here.
//
// An episode: tables in descending predicted cost; at each step every device
// gets a logit from [the sum of the policy's table encodings on it, its cost
// features, a context], masked to the devices with room for the table; the
// table goes to the argmax (planning) or to a sample (training).
//   DreamShard: cost features from its own cost network (table encoder ->
//   sum per device -> compute / forward comm / backward comm heads, and an
//   overall head on the max over devices); context = the table's encoding.
//   AutoShard: cost features from the planning cost model (compute, dims,
//   memory); context = a GRU state over the sequence of tables placed and
//   the features of the devices they went to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/neural/mlp.h"
#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"

namespace embshard {

enum class PolicyKind { kDreamShard, kAutoShard };
const std::vector<std::string>& policy_kind_names();  // "dreamshard", "autoshard"
std::string policy_kind_name(PolicyKind kind);
PolicyKind parse_policy_kind(const std::string& name);  // Error lists the valid names

// Per-table inputs: the neural cost model's compute features of the table
// (rows, dim, pooling factor, lookups, size, the 17+17 reuse bins, ...) and
// the z-scores of its scalar features within the task.
const std::vector<std::string>& policy_feature_names();
// Per-device cost features of a step (what the logit sees beside the sums).
const std::vector<std::string>& policy_device_feature_names(PolicyKind kind);
// [tables x policy_feature_names()] raw features of the task's whole tables.
std::vector<float> policy_table_features(const PlanTask& task);

// torch::nn::GRUCell's layout and gate order (r, z, n): ih is in -> 3H,
// hh is H -> 3H, both linear.
struct GruCell {
  DenseLayer ih, hh;
  int in() const { return ih.in; }
  int hidden() const { return hh.in; }
  void step(const float* x, float* h) const;  // h <- GRU(x, h)
};

// DreamShard's cost network. Targets are standardised log ms.
enum CostHead { kHeadCompute = 0, kHeadFwdComm = 1, kHeadBwdComm = 2, kHeadOverall = 3 };
constexpr int kCostHeads = 4;

struct PolicyNets {
  PolicyKind kind = PolicyKind::kDreamShard;
  Normaliser features;  // per-table features
  // DreamShard only.
  Mlp cost_table;                 // features -> E (ReLU last: sums of non-negative codes)
  Mlp cost_head[kCostHeads];      // E -> 1
  double target_mean[kCostHeads] = {0, 0, 0, 0}, target_std[kCostHeads] = {1, 1, 1, 1};
  // Both.
  Mlp policy_table;  // features -> E
  Mlp policy_logit;  // [device sum E, device features, context] -> 1
  GruCell gru;       // AutoShard: [table encoding E, previous choice's device features] -> H
  nlohmann::json info = nlohmann::json::object();
  int context_size() const;  // E (DreamShard) or H (AutoShard)
  void prepare();            // Mlp::prepare on every network (after loading or training)
};

// The policy directory: manifest.json + checksummed weight files
// (cost/neural/model_file.h's format).
constexpr const char* kPolicyFormat = "embshard-placement-policy";
constexpr int kPolicyVersion = 1;
void save_policy(const PolicyNets& nets, const std::string& dir);
// Validates format, version, kind, feature names (another version's features
// are an error), sizes, checksums; Error names the file at fault.
PolicyNets load_policy(const std::string& dir);
// The shipped policy of a kind: <models>/policies/<name>.
std::string shipped_policy_dir(PolicyKind kind);

// What an episode works on: the task's tables, normalised, and its scale.
struct EpisodeInput {
  std::vector<float> x;        // [tables x features], normalised
  std::vector<int> order;      // unpinned tables, descending predicted cost
  std::vector<double> single_ms;  // per table: predicted cost alone
  std::vector<int> piece_ids;  // AutoShard: the cost model's id of each whole table
  double ref_ms = 0;           // sum of single costs / devices: the ideal load
};
// AutoShard's costs come from `costs` (the planning cost model); DreamShard
// ignores it (null allowed).
EpisodeInput episode_input(const PolicyNets& nets, const PlanTask& task, ShardCosts* costs);

struct EpisodeOptions {
  bool sample = false;      // sample actions (training) instead of the argmax
  uint64_t seed = 0;
  // Training: when no device has room, choose among all devices and flag the
  // episode (its reward is penalised); planning: Error naming the table.
  bool allow_overflow = false;
  bool record = false;      // keep features and masks per step
};

struct Episode {
  std::vector<int> device_of;       // per table
  std::vector<int> actions;         // per step (order of EpisodeInput)
  std::vector<float> device_feats;  // record: [steps x devices x device features]
  std::vector<uint8_t> mask;        // record: [steps x devices]
  bool overflow = false;
  // The first table no device had room for (allow_overflow), and the most
  // free memory left on a device then.
  int stuck_table = -1;
  int64_t stuck_most_free_bytes = 0;
  double log_prob = 0;  // sum over steps of log pi(action | state)
};

Episode run_episode(const PolicyNets& nets, const PlanTask& task, const EpisodeInput& in,
                    ShardCosts* costs, const EpisodeOptions& options);

// DreamShard: the cost network's prediction of a placement's cost, ms (the
// overall head) and per device (compute + fwd + bwd heads, their max).
struct CostNetPrediction {
  double overall_ms = 0, device_max_ms = 0;
};
CostNetPrediction predict_with_cost_net(const PolicyNets& nets, const EpisodeInput& in,
                                        const std::vector<int>& device_of, int devices);

// The plan of a placement (one table-wise shard per table).
Plan table_wise_plan(const PlanTask& task, const std::vector<int>& device_of);

}  // namespace embshard
