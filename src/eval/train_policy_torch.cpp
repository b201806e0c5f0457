// Training the placement policies with libtorch (eval/train_policy.h).
//
// Episodes run in plain C++ (search/policy.h: the planner's own code, sampled)
// and record their per-step device features and masks; torch recomputes the
// log-probabilities of the recorded actions from the same inputs to get the
// gradient. The recomputation is tested against the plain forward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "embshard/cost/neural/torch_common.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/reporter.h"
#include "eval/train_policy_internal.h"

namespace embshard {
namespace {

using namespace torch_impl;
using namespace policy_train;
using nlohmann::json;

// ---- the networks on the torch side ----

struct TorchNets {
  TorchMlp policy_table{nullptr}, policy_logit{nullptr}, cost_table{nullptr};
  std::vector<TorchMlp> heads;
  torch::nn::GRUCell gru{nullptr};

  std::vector<torch::Tensor> policy_parameters() {
    std::vector<torch::Tensor> p = policy_table->parameters();
    for (auto& t : policy_logit->parameters()) p.push_back(t);
    if (!gru.is_empty()) {
      for (auto& t : gru->parameters()) p.push_back(t);
    }
    return p;
  }
  std::vector<torch::Tensor> cost_parameters() {
    std::vector<torch::Tensor> p;
    if (cost_table.is_empty()) return p;
    p = cost_table->parameters();
    for (auto& h : heads)
      for (auto& t : h->parameters()) p.push_back(t);
    return p;
  }
};

void copy_into(torch::Tensor dst, const std::vector<float>& src, std::vector<int64_t> shape) {
  std::vector<float> buf = src;
  torch::NoGradGuard no_grad;
  dst.copy_(torch::from_blob(buf.data(), shape));
}

DenseLayer dense_of(const torch::Tensor& w, const torch::Tensor& b) {
  const torch::Tensor wc = w.detach().contiguous(), bc = b.detach().contiguous();
  DenseLayer l;
  l.out = static_cast<int>(wc.size(0));
  l.in = static_cast<int>(wc.size(1));
  l.relu = false;
  l.weight.assign(wc.data_ptr<float>(), wc.data_ptr<float>() + wc.numel());
  l.bias.assign(bc.data_ptr<float>(), bc.data_ptr<float>() + bc.numel());
  return l;
}

TorchNets to_torch(const PolicyNets& n) {
  TorchNets t;
  t.policy_table = import_mlp(n.policy_table);
  t.policy_logit = import_mlp(n.policy_logit);
  if (n.kind == PolicyKind::kDreamShard) {
    t.cost_table = import_mlp(n.cost_table);
    for (const Mlp& h : n.cost_head) t.heads.push_back(import_mlp(h));
  } else {
    t.gru = torch::nn::GRUCell(torch::nn::GRUCellOptions(n.gru.in(), n.gru.hidden()));
    const int64_t H3 = 3 * n.gru.hidden();
    copy_into(t.gru->weight_ih, n.gru.ih.weight, {H3, n.gru.in()});
    copy_into(t.gru->bias_ih, n.gru.ih.bias, {H3});
    copy_into(t.gru->weight_hh, n.gru.hh.weight, {H3, n.gru.hidden()});
    copy_into(t.gru->bias_hh, n.gru.hh.bias, {H3});
  }
  return t;
}

void from_torch(TorchNets& t, PolicyNets& n) {
  n.policy_table = export_mlp(t.policy_table);
  n.policy_logit = export_mlp(t.policy_logit);
  if (n.kind == PolicyKind::kDreamShard) {
    n.cost_table = export_mlp(t.cost_table);
    for (int h = 0; h < kCostHeads; ++h) n.cost_head[h] = export_mlp(t.heads[h]);
  } else {
    n.gru.ih = dense_of(t.gru->weight_ih, t.gru->bias_ih);
    n.gru.hh = dense_of(t.gru->weight_hh, t.gru->bias_hh);
  }
  n.prepare();
}

// ---- the policy's log-probabilities of a recorded episode ----

struct Rollout {
  int task = 0;  // index into the update's tasks
  Episode ep;
  double reward = 0, advantage = 0;
};

// Sum over steps of log pi(action), and the mean entropy over steps.
std::pair<torch::Tensor, torch::Tensor> episode_log_prob(TorchNets& t, const PolicyNets& n,
                                                         const PlanTask& task,
                                                         const EpisodeInput& in,
                                                         const torch::Tensor& x,
                                                         const Episode& ep) {
  const int64_t S = static_cast<int64_t>(ep.actions.size()), N = task.num_devices(),
                T = task.num_tables();
  const int64_t C = static_cast<int64_t>(policy_device_feature_names(n.kind).size());
  const torch::Tensor enc = t.policy_table->forward(x);  // [T, E]
  const int64_t E = enc.size(1);
  std::vector<float> a(static_cast<size_t>(S * N * T), 0.0f);
  std::vector<int> where(T, -1);
  for (int64_t k = 0; k < T; ++k) where[k] = task.pinned_device[k];
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t k = 0; k < T; ++k) {
      if (where[k] >= 0) a[static_cast<size_t>((s * N + where[k]) * T + k)] = 1.0f;
    }
    where[in.order[s]] = ep.actions[s];
  }
  const torch::Tensor assign = torch::from_blob(a.data(), {S, N, T}).clone();
  const torch::Tensor sums = torch::matmul(assign, enc);  // [S, N, E]
  std::vector<float> f = ep.device_feats;
  const torch::Tensor feats = torch::from_blob(f.data(), {S, N, C}).clone();
  std::vector<int64_t> order(in.order.begin(), in.order.end());
  const torch::Tensor table_enc = enc.index_select(0, torch::tensor(order));  // [S, E]
  torch::Tensor context;
  if (n.kind == PolicyKind::kDreamShard) {
    context = table_enc;
  } else {
    std::vector<torch::Tensor> hs;
    torch::Tensor h = torch::zeros({1, E});
    torch::Tensor prev = torch::zeros({1, C});
    for (int64_t s = 0; s < S; ++s) {
      h = t.gru->forward(torch::cat({table_enc.slice(0, s, s + 1), prev}, 1), h);
      hs.push_back(h);
      prev = feats.index({s}).slice(0, ep.actions[s], ep.actions[s] + 1);
    }
    context = torch::cat(hs, 0);
  }
  const torch::Tensor input =
      torch::cat({sums, feats, context.unsqueeze(1).expand({S, N, context.size(1)})}, 2);
  std::vector<uint8_t> m = ep.mask;
  const torch::Tensor mask = torch::from_blob(m.data(), {S, N}, torch::kUInt8).clone().to(torch::kBool);
  const torch::Tensor logits =
      t.policy_logit->forward(input).squeeze(2).masked_fill(mask.logical_not(), -1e9);
  const torch::Tensor logp = torch::log_softmax(logits, 1);
  std::vector<int64_t> actions(ep.actions.begin(), ep.actions.end());
  const torch::Tensor chosen = logp.gather(1, torch::tensor(actions).unsqueeze(1)).sum();
  const torch::Tensor entropy =
      -(logp.exp() * logp).masked_fill(mask.logical_not(), 0.0).sum(1).mean();
  return {chosen, entropy};
}

// ---- the cost network's data ----

struct CostTensors {
  torch::Tensor x, assign;     // [T, F] normalised, [N, T]
  torch::Tensor device_target;  // [N, 3] standardised log ms
  torch::Tensor plan_target;    // [1] standardised log ms
};

CostTensors cost_tensors(const PolicyNets& n, const PlanTask& task, const CostSample& s) {
  const int nf = static_cast<int>(policy_feature_names().size());
  const int64_t N = task.num_devices(), T = task.num_tables();
  std::vector<float> x = policy_table_features(task);
  for (int64_t k = 0; k < T; ++k) n.features.apply(&x[static_cast<size_t>(k) * nf]);
  std::vector<float> a(static_cast<size_t>(N * T), 0.0f), y;
  for (int64_t k = 0; k < T; ++k) a[static_cast<size_t>(s.device_of[k] * T + k)] = 1.0f;
  for (int64_t d = 0; d < N; ++d) {
    for (int h = 0; h < 3; ++h) {
      const double ms = std::max(1e-6, s.device_ms[static_cast<size_t>(d * 3 + h)]);
      y.push_back(static_cast<float>((std::log(ms) - n.target_mean[h]) / n.target_std[h]));
    }
  }
  const float plan = static_cast<float>((std::log(std::max(1e-6, s.plan_ms)) -
                                         n.target_mean[kHeadOverall]) /
                                        n.target_std[kHeadOverall]);
  return {to_tensor(x, nf), torch::from_blob(a.data(), {N, T}).clone(),
          torch::from_blob(y.data(), {N, 3}).clone(), torch::tensor({plan})};
}

torch::Tensor cost_loss(TorchNets& t, const CostTensors& c) {
  const torch::Tensor sums = torch::matmul(c.assign, t.cost_table->forward(c.x));  // [N, E]
  torch::Tensor loss = torch::zeros({});
  for (int h = 0; h < 3; ++h) {
    loss = loss + torch::mse_loss(t.heads[h]->forward(sums).squeeze(1), c.device_target.select(1, h));
  }
  const torch::Tensor overall =
      t.heads[kHeadOverall]->forward(std::get<0>(sums.max(0)).unsqueeze(0)).squeeze(1);
  return loss / 3 + torch::mse_loss(overall, c.plan_target);
}

// Log-ms means and stds of the first samples: fixed from then on.
void fit_targets(PolicyNets& n, const std::vector<CostSample>& samples) {
  for (int h = 0; h < kCostHeads; ++h) {
    std::vector<double> v;
    for (const CostSample& s : samples) {
      if (h == kHeadOverall) {
        v.push_back(std::log(std::max(1e-6, s.plan_ms)));
      } else {
        for (size_t d = 0; d < s.device_ms.size() / 3; ++d) {
          v.push_back(std::log(std::max(1e-6, s.device_ms[d * 3 + h])));
        }
      }
    }
    double mean = 0, sq = 0;
    for (double x : v) mean += x / v.size();
    for (double x : v) sq += (x - mean) * (x - mean) / v.size();
    n.target_mean[h] = mean;
    n.target_std[h] = std::sqrt(sq) > 1e-3 ? std::sqrt(sq) : 1.0;
  }
}

// The trainer's state and loop.
class PolicyTrainer {
 public:
  explicit PolicyTrainer(const PolicyTrainOptions& o);
  PolicyTrainResult run();

 private:
  std::vector<std::pair<int, EvalTask>> draw(int count, uint64_t seed) const;
  PlanTask task(const std::pair<int, EvalTask>& s) const {
    return task_of(pools_[s.first], s.second, o_.devices);
  }
  void collect(int iteration);
  double fit_cost_net(int iteration);
  double reinforce(int iteration);
  double validate() const;
  json fingerprint() const;
  void save_checkpoint(int done) const;
  bool load_checkpoint();

  PolicyTrainOptions o_;
  Reporter& reporter_;
  std::vector<Workload> pools_;
  std::vector<CostModel> truth_;
  PolicyNets nets_;
  TorchNets torch_;
  std::unique_ptr<torch::optim::Adam> policy_opt_, cost_opt_;
  std::vector<CostSample> samples_;
  std::vector<std::pair<int, EvalTask>> validation_;
  double baseline_ms_ = 0;
  int done_ = 0;
  json history_ = json::array();
  std::string checkpoint_dir_;
};


PolicyTrainer::PolicyTrainer(const PolicyTrainOptions& o)
    : o_(o), reporter_(o.reporter != nullptr ? *o.reporter : silent_reporter()) {
  ES_CHECK(!o.pool_dirs.empty(), "train-policy: no pool (--pool DIR)");
  ES_CHECK(!o.out_dir.empty(), "train-policy: no output directory (--out DIR)");
  ES_CHECK(o.iterations >= 1 && o.updates >= 0 && o.tasks_per_update >= 1 && o.episodes >= 2,
           "train-policy: --iterations {} / --updates {} / --tasks-per-update {} / --episodes {}: "
           "need >= 1, >= 0, >= 1, >= 2",
           o.iterations, o.updates, o.tasks_per_update, o.episodes);
  ES_CHECK(std::isfinite(o.lr) && o.lr > 0 && std::isfinite(o.cost_lr) && o.cost_lr > 0,
           "train-policy: --lr {} and --cost-lr {} must be > 0", o.lr,
           o.cost_lr);
  ES_CHECK(o.reward == "overall" || o.reward == "device_max",
           "train-policy: --reward is '{}', expected overall or device_max", o.reward);
  ES_CHECK(o.kind == PolicyKind::kAutoShard || o.measured_plans >= 1,
           "train-policy: --measured-plans is {}, DreamShard needs at least 1", o.measured_plans);
  for (const std::string& dir : o.pool_dirs) {
    pools_.push_back(load_workload(dir));
    ES_CHECK(!pools_.back().tables.empty(), "train-policy: pool '{}' has no tables", dir);
    CostModelOptions mo = o.truth_options;
    mo.workload_dir = dir;
    mo.batch_size = pools_.back().batch_size;
    truth_.push_back(o.truth == "neural" ? open_cost_model(o.truth, mo, reporter_)
                                         : create_cost_model(o.truth, mo));
  }
  torch::manual_seed(o.seed);
  torch::set_num_threads(1);
  checkpoint_dir_ = (std::filesystem::path(o.out_dir) / "checkpoint").string();
  validation_ = draw(o.validation_tasks, o.seed * 7919 + 17);
}

std::vector<std::pair<int, EvalTask>> PolicyTrainer::draw(int count, uint64_t seed) const {
  std::vector<std::pair<int, EvalTask>> out;
  for (int j = 0; j < count; ++j) {
    const int p = static_cast<int>((seed + j) % pools_.size());
    out.push_back({p, draw_specs(pools_[p], o_, 1, seed * 104729 + j).front()});
  }
  return out;
}

json PolicyTrainer::fingerprint() const {
  return {{"policy", policy_kind_name(o_.kind)}, {"pools", o_.pool_dirs},
          {"devices", o_.devices}, {"tables", {o_.min_tables, o_.max_tables}},
          {"dims", o_.dims}, {"headroom", {o_.min_headroom, o_.max_headroom}},
          {"mem_cap_bytes", o_.mem_cap_bytes},
          {"measured_plans", o_.measured_plans}, {"cost_epochs", o_.cost_epochs},
          {"updates", o_.updates}, {"tasks_per_update", o_.tasks_per_update},
          {"episodes", o_.episodes}, {"lr", o_.lr}, {"cost_lr", o_.cost_lr},
          {"entropy", o_.entropy}, {"reward", o_.reward},
          {"validation_tasks", o_.validation_tasks},
          {"truth", o_.truth}, {"hidden", o_.hidden}, {"embed", o_.embed}, {"seed", o_.seed}};
}

// DreamShard: the current policy's sampled plans of fresh tasks, with their
// "real" costs.
void PolicyTrainer::collect(int iteration) {
  if (o_.kind != PolicyKind::kDreamShard) return;
  for (const auto& s : draw(o_.measured_plans, o_.seed * 1000003 + iteration)) {
    const PlanTask t = task(s);
    const EpisodeInput in = episode_input(nets_, t, nullptr);
    EpisodeOptions eo;
    eo.sample = true;
    eo.seed = o_.seed * 31 + iteration * 1009 + samples_.size();
    eo.allow_overflow = true;
    const Episode ep = run_episode(nets_, t, in, nullptr, eo);
    if (ep.overflow) continue;  // not a plan: nothing to measure
    samples_.push_back(measure_sample(s.first, s.second, t, ep.device_of, truth_[s.first]));
  }
}

double PolicyTrainer::fit_cost_net(int iteration) {
  if (o_.kind != PolicyKind::kDreamShard || samples_.empty()) return 0;
  // Target scales from the first samples, fixed from then on.
  if (nets_.target_mean[kHeadOverall] == 0 && nets_.target_std[kHeadOverall] == 1) {
    fit_targets(nets_, samples_);
  }
  std::vector<CostTensors> data;
  for (const CostSample& s : samples_) {
    data.push_back(cost_tensors(nets_, task({s.pool, s.spec}), s));
  }
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(o_.seed * 7 + iteration);
  double last = 0;
  constexpr size_t kBatch = 16;
  for (int epoch = 0; epoch < o_.cost_epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double total = 0;
    for (size_t at = 0; at < order.size(); at += kBatch) {
      cost_opt_->zero_grad();
      torch::Tensor loss = torch::zeros({});
      const size_t end = std::min(order.size(), at + kBatch);
      for (size_t i = at; i < end; ++i) loss = loss + cost_loss(torch_, data[order[i]]);
      loss = loss / static_cast<double>(end - at);
      loss.backward();
      cost_opt_->step();
      total += loss.item<double>() * (end - at);
    }
    last = total / order.size();
  }
  from_torch(torch_, nets_);
  return last;
}

double PolicyTrainer::reinforce(int iteration) {
  double reward_sum = 0;
  int reward_count = 0;
  for (int u = 0; u < o_.updates; ++u) {
    const auto specs = draw(o_.tasks_per_update, o_.seed * 999331 + iteration * 1000 + u);
    std::vector<PlanTask> tasks;
    for (const auto& s : specs) tasks.push_back(task(s));
    torch::Tensor loss = torch::zeros({});
    for (size_t k = 0; k < tasks.size(); ++k) {
      const CostModel& truth = truth_[specs[k].first];
      ShardCosts costs(tasks[k], truth);
      ShardCosts* c = o_.kind == PolicyKind::kAutoShard ? &costs : nullptr;
      const EpisodeInput in = episode_input(nets_, tasks[k], c);
      std::vector<Rollout> rolls(o_.episodes);
      double mean = 0, sq = 0;
      for (int e = 0; e < o_.episodes; ++e) {
        EpisodeOptions eo;
        eo.sample = eo.record = eo.allow_overflow = true;
        eo.seed = o_.seed * 131 + iteration * 100003 + u * 1009 + k * 31 + e;
        rolls[e].ep = run_episode(nets_, tasks[k], in, c, eo);
        double r;
        if (o_.kind == PolicyKind::kDreamShard) {
          const CostNetPrediction p =
              predict_with_cost_net(nets_, in, rolls[e].ep.device_of, o_.devices);
          r = -(o_.reward == "device_max" ? p.device_max_ms : p.overall_ms) / in.ref_ms;
          if (rolls[e].ep.overflow) r *= 2;
        } else {
          const PlanPrediction p = predict_plan(
              tasks[k], table_wise_plan(tasks[k], rolls[e].ep.device_of), costs);
          // A device's own cost: compute + backward all-to-all (the forward
          // all-to-all waits for the slowest device, which evens the totals).
          double own_mean = 0, own_max = 0;
          for (const DeviceCosts& d : p.devices) {
            own_mean += (d.compute_ms + d.bwd_comm_ms) / p.devices.size();
            own_max = std::max(own_max, d.compute_ms + d.bwd_comm_ms);
          }
          r = -own_max / std::max(own_mean, 1e-12) - (rolls[e].ep.overflow ? 1.0 : 0.0);
        }
        rolls[e].reward = r;
        mean += r / o_.episodes;
      }
      for (const Rollout& r : rolls) sq += (r.reward - mean) * (r.reward - mean) / o_.episodes;
      const double sd = std::sqrt(sq);
      reward_sum += mean;
      ++reward_count;
      if (sd < 1e-9) continue;  // every episode alike: no signal
      const torch::Tensor x = to_tensor(in.x, static_cast<int>(policy_feature_names().size()));
      for (const Rollout& r : rolls) {
        auto [logp, entropy] = episode_log_prob(torch_, nets_, tasks[k], in, x, r.ep);
        loss = loss - ((r.reward - mean) / sd) * logp - o_.entropy * entropy;
      }
    }
    loss = loss / static_cast<double>(tasks.size() * o_.episodes);
    if (loss.requires_grad()) {
      policy_opt_->zero_grad();
      loss.backward();
      policy_opt_->step();
      from_torch(torch_, nets_);
    }
  }
  return reward_count ? reward_sum / reward_count : 0;
}

// The greedy policy's plans of the validation tasks, costed by the truth (a
// plan over a memory cap is costed all the same: a score, not a plan).
double PolicyTrainer::validate() const {
  double sum = 0;
  for (const auto& s : validation_) {
    const PlanTask t = task(s);
    ShardCosts costs(t, truth_[s.first]);
    const EpisodeInput in = episode_input(nets_, t, &costs);
    EpisodeOptions eo;
    eo.allow_overflow = true;
    const Episode ep = run_episode(nets_, t, in, &costs, eo);
    sum += predict_plan(t, table_wise_plan(t, ep.device_of), costs).cost_ms;
  }
  return validation_.empty() ? 0 : sum / validation_.size();
}

void PolicyTrainer::save_checkpoint(int done) const {
  save_policy(nets_, checkpoint_dir_);
  torch::save(*policy_opt_, (std::filesystem::path(checkpoint_dir_) / "policy_opt.pt").string());
  if (o_.kind == PolicyKind::kDreamShard) {
    torch::save(*cost_opt_, (std::filesystem::path(checkpoint_dir_) / "cost_opt.pt").string());
  }
  json samples = json::array();
  for (const CostSample& s : samples_) samples.push_back(sample_json(s));
  const json state{{"format", "embshard-policy-checkpoint"}, {"options", fingerprint()},
                   {"iterations_done", done},  {"baseline_ms", baseline_ms_},
                   {"history", history_},      {"samples", samples}};
  write_file_atomic((std::filesystem::path(checkpoint_dir_) / "state.json").string(),
                    state.dump() + "\n");
}

bool PolicyTrainer::load_checkpoint() {
  const std::string path = (std::filesystem::path(checkpoint_dir_) / "state.json").string();
  if (!file_exists(path)) return false;
  const json state = json::parse(read_file(path), nullptr, false);
  ES_CHECK(!state.is_discarded() && state.is_object() &&
               state.value("format", json()) == "embshard-policy-checkpoint",
           "{}: not a policy checkpoint (delete {} to start over)", path, checkpoint_dir_);
  const json& options = json_field(state, "/options", JsonKind::kObject, path);
  const json want = fingerprint();
  for (auto it = want.begin(); it != want.end(); ++it) {
    ES_CHECK(options.value(it.key(), json()) == it.value(),
             "{}: the checkpoint was trained with {} = {}, this run asks for {} (same options to "
             "resume, or another --out)",
             path, it.key(), options.value(it.key(), json()).dump(), it.value().dump());
  }
  nets_ = load_policy(checkpoint_dir_);
  torch_ = to_torch(nets_);
  done_ = static_cast<int>(
      json_field(state, "/iterations_done", JsonKind::kCount, path).get<int64_t>());
  baseline_ms_ = json_field(state, "/baseline_ms", JsonKind::kNumber, path).get<double>();
  history_ = json_field(state, "/history", JsonKind::kArray, path);
  const size_t samples = json_field(state, "/samples", JsonKind::kArray, path).size();
  for (size_t i = 0; i < samples; ++i) {
    samples_.push_back(sample_from(state, i, path, pools_, o_.devices));
  }
  return true;
}

PolicyTrainResult PolicyTrainer::run() {
  PolicyTrainResult result;
  const bool resumed = load_checkpoint();
  if (!resumed) {
    nets_ = untrained_policy(o_.kind, o_.hidden, o_.embed, o_.seed);
    std::vector<PlanTask> tasks;
    for (const auto& s : draw(32, o_.seed * 15485863 + 3)) tasks.push_back(task(s));
    nets_.features = fit_feature_normaliser(tasks);
    nets_.prepare();
    torch_ = to_torch(nets_);
    baseline_ms_ = validate();
  }
  policy_opt_ = std::make_unique<torch::optim::Adam>(torch_.policy_parameters(),
                                                     torch::optim::AdamOptions(o_.lr));
  const auto cost_params = torch_.cost_parameters();
  if (!cost_params.empty()) {
    cost_opt_ = std::make_unique<torch::optim::Adam>(cost_params, torch::optim::AdamOptions(o_.cost_lr));
  }
  if (resumed) {
    torch::load(*policy_opt_, (std::filesystem::path(checkpoint_dir_) / "policy_opt.pt").string());
    if (cost_opt_) {
      torch::load(*cost_opt_, (std::filesystem::path(checkpoint_dir_) / "cost_opt.pt").string());
    }
    result.resumed_from = done_;
    reporter_.note(fmt::format("train-policy: resuming after iteration {} of {} ({})", done_,
                               o_.iterations, checkpoint_dir_));
  }
  Progress progress(reporter_, "train-policy " + policy_kind_name(o_.kind),
                    static_cast<uint64_t>(o_.iterations), static_cast<uint64_t>(done_));
  for (int it = done_; it < o_.iterations; ++it) {
    collect(it);
    const double cost_loss_value = fit_cost_net(it);
    const double reward = reinforce(it);
    const double val = validate();
    const double ratio = baseline_ms_ > 0 ? val / baseline_ms_ : 0;
    history_.push_back({{"iteration", it + 1}, {"cost_loss", cost_loss_value},
                        {"mean_reward", reward}, {"validation_ratio", ratio},
                        {"samples", samples_.size()}});
    done_ = it + 1;
    save_checkpoint(done_);
    progress.update(done_, fmt::format("cost-net loss {:.4f}, mean reward {:.4f}, validation "
                                       "cost {:.4f} x the untrained policy's",
                                       cost_loss_value, reward, ratio));
  }
  progress.finish();
  nets_.info = {{"training", fingerprint()},
                {"truth", truth_.front().name},
                {"truth_note", o_.truth == "measured"
                                   ? "plan costs measured on the executor (compute) with the "
                                     "analytic all-to-all"
                                   : "plan costs from the cost model '" + o_.truth +
                                         "' standing in for measurements (no executor run)"},
                {"iterations", done_},
                {"cost_samples", samples_.size()},
                {"history", history_}};
  save_policy(nets_, o_.out_dir);
  result.nets = nets_;
  result.iterations = done_;
  result.history = history_;
  result.notes.push_back(fmt::format(
      "{} trained for {} iterations on {} pool(s) at {} devices; truth: {}; {} real plans",
      policy_kind_name(o_.kind), done_, pools_.size(), o_.devices, truth_.front().name,
      samples_.size()));
  return result;
}

}  // namespace

double torch_episode_log_prob(const PolicyNets& nets, const PlanTask& task,
                              const EpisodeInput& in, const Episode& episode) {
  torch::NoGradGuard no_grad;
  TorchNets t = to_torch(nets);
  const torch::Tensor x = to_tensor(in.x, static_cast<int>(policy_feature_names().size()));
  return episode_log_prob(t, nets, task, in, x, episode).first.item<double>();
}

double torch_cost_net_overall_ms(const PolicyNets& nets, const PlanTask& task,
                                 const EpisodeInput& in, const std::vector<int>& device_of) {
  ES_CHECK(nets.kind == PolicyKind::kDreamShard, "autoshard has no cost network");
  torch::NoGradGuard no_grad;
  TorchNets t = to_torch(nets);
  const int64_t N = task.num_devices(), T = task.num_tables();
  std::vector<float> a(static_cast<size_t>(N * T), 0.0f);
  for (int64_t k = 0; k < T; ++k) a[static_cast<size_t>(device_of[k] * T + k)] = 1.0f;
  const torch::Tensor x = to_tensor(in.x, static_cast<int>(policy_feature_names().size()));
  const torch::Tensor sums =
      torch::matmul(torch::from_blob(a.data(), {N, T}), t.cost_table->forward(x));
  const double y =
      t.heads[kHeadOverall]->forward(std::get<0>(sums.max(0)).unsqueeze(0)).item<double>();
  return std::exp(y * nets.target_std[kHeadOverall] + nets.target_mean[kHeadOverall]);
}

PolicyTrainResult train_policy(const PolicyTrainOptions& options) {
  PolicyTrainer trainer(options);
  return trainer.run();
}

}  // namespace embshard
