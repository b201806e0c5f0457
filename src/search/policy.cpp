// The learned policies' features and episodes, without libtorch.
#include "embshard/search/policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/ranges.h>

#include "embshard/cost/neural/features.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// The compute features' leading scalars (log rows, log dim, ...) get a
// within-task z-score: what makes a table big *in this task*.
constexpr int kTaskScalars = 9;

// The policies read the compute features without the data type (they were
// trained before it) and the histograms whole.
constexpr ComputeFeatureSet kPolicyComputeFeatures{kNoReuseTail, false};

std::vector<std::string> make_feature_names() {
  std::vector<std::string> names = kPolicyComputeFeatures.names();
  const std::vector<std::string> base = kPolicyComputeFeatures.names();
  for (int i = 0; i < kTaskScalars; ++i) names.push_back("task_z_" + base[i]);
  return names;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void dense(const DenseLayer& l, const float* x, float* y) {
  for (int o = 0; o < l.out; ++o) {
    const float* w = l.weight.data() + static_cast<size_t>(o) * l.in;
    float acc = l.bias[o];
    for (int i = 0; i < l.in; ++i) acc += w[i] * x[i];
    y[o] = acc;
  }
}

float mlp1(const Mlp& m, const float* x) {
  float y;
  m.forward(x, &y);
  return y;
}

}  // namespace

const std::vector<std::string>& policy_kind_names() {
  static const std::vector<std::string> names = {"dreamshard", "autoshard"};
  return names;
}

std::string policy_kind_name(PolicyKind kind) {
  return kind == PolicyKind::kDreamShard ? "dreamshard" : "autoshard";
}

PolicyKind parse_policy_kind(const std::string& name) {
  if (name == "dreamshard") return PolicyKind::kDreamShard;
  if (name == "autoshard") return PolicyKind::kAutoShard;
  ES_THROW("unknown policy '{}'; valid policies: {}", name, fmt::join(policy_kind_names(), ", "));
}

const std::vector<std::string>& policy_feature_names() {
  static const std::vector<std::string> names = make_feature_names();
  return names;
}

const std::vector<std::string>& policy_device_feature_names(PolicyKind kind) {
  static const std::vector<std::string> dream = {
      "compute_now",  "compute_with",  "fwd_comm_now", "fwd_comm_with",
      "bwd_comm_now", "bwd_comm_with", "mem_with",     "max_total_now"};
  static const std::vector<std::string> autoshard = {"compute_now", "compute_with", "dims_now",
                                                     "dims_with",   "mem_now",      "mem_with",
                                                     "max_compute_now"};
  return kind == PolicyKind::kDreamShard ? dream : autoshard;
}

std::vector<float> policy_table_features(const PlanTask& task) {
  const int nc = kPolicyComputeFeatures.size();
  const int nf = static_cast<int>(policy_feature_names().size());
  const int n = task.num_tables();
  std::vector<float> x(static_cast<size_t>(n) * nf, 0.0f);
  for (int t = 0; t < n; ++t) {
    compute_raw_features(table_features(task.tables[t], task.tables[t].dim), task.batch_size,
                         &x[static_cast<size_t>(t) * nf], kPolicyComputeFeatures);
  }
  for (int f = 0; f < kTaskScalars; ++f) {
    double sum = 0, sq = 0;
    for (int t = 0; t < n; ++t) sum += x[static_cast<size_t>(t) * nf + f];
    const double mean = sum / n;
    for (int t = 0; t < n; ++t) sq += std::pow(x[static_cast<size_t>(t) * nf + f] - mean, 2);
    const double sd = std::sqrt(sq / n);
    for (int t = 0; t < n; ++t) {
      float& z = x[static_cast<size_t>(t) * nf + nc + f];
      z = sd > 1e-6 ? static_cast<float>((x[static_cast<size_t>(t) * nf + f] - mean) / sd) : 0.0f;
    }
  }
  return x;
}

void GruCell::step(const float* x, float* h) const {
  const int H = hidden();
  float gi[3 * Mlp::kMaxWidth], gh[3 * Mlp::kMaxWidth];
  dense(ih, x, gi);
  dense(hh, h, gh);
  for (int k = 0; k < H; ++k) {
    const float r = sigmoid(gi[k] + gh[k]);
    const float z = sigmoid(gi[H + k] + gh[H + k]);
    const float c = std::tanh(gi[2 * H + k] + r * gh[2 * H + k]);
    h[k] = (1 - z) * c + z * h[k];
  }
}

int PolicyNets::context_size() const {
  return kind == PolicyKind::kDreamShard ? policy_table.out() : gru.hidden();
}

void PolicyNets::prepare() {
  cost_table.prepare();
  for (Mlp& h : cost_head) h.prepare();
  policy_table.prepare();
  policy_logit.prepare();
}

EpisodeInput episode_input(const PolicyNets& nets, const PlanTask& task, ShardCosts* costs) {
  const int n = task.num_tables(), nf = static_cast<int>(policy_feature_names().size());
  EpisodeInput in;
  in.x = policy_table_features(task);
  for (int t = 0; t < n; ++t) nets.features.apply(&in.x[static_cast<size_t>(t) * nf]);
  in.single_ms.resize(n);
  if (nets.kind == PolicyKind::kDreamShard) {
    std::vector<float> e(nets.cost_table.out());
    for (int t = 0; t < n; ++t) {
      nets.cost_table.forward(&in.x[static_cast<size_t>(t) * nf], e.data());
      const float y = mlp1(nets.cost_head[kHeadCompute], e.data());
      in.single_ms[t] = std::exp(std::clamp(
          y * nets.target_std[kHeadCompute] + nets.target_mean[kHeadCompute], -30.0, 30.0));
    }
  } else {
    ES_CHECK(costs != nullptr, "autoshard: needs the planning cost model");
    for (int t = 0; t < n; ++t) {
      in.piece_ids.push_back(costs->piece_id(t, task.tables[t].dim));
      in.single_ms[t] = costs->single_ms(in.piece_ids.back());
    }
  }
  in.ref_ms = std::accumulate(in.single_ms.begin(), in.single_ms.end(), 0.0) /
              std::max(1, task.num_devices());
  in.ref_ms = std::max(in.ref_ms, 1e-9);
  for (int t = 0; t < n; ++t) {
    if (task.pinned_device[t] < 0) in.order.push_back(t);
  }
  std::stable_sort(in.order.begin(), in.order.end(),
                   [&](int a, int b) { return in.single_ms[a] > in.single_ms[b]; });
  return in;
}

namespace {

// The running state of an episode: what each device holds.
class EpisodeState {
 public:
  EpisodeState(const PolicyNets& nets, const PlanTask& task, const EpisodeInput& in,
               ShardCosts* costs)
      : nets_(nets), task_(task), in_(in), costs_(costs), n_(task.num_devices()) {
    const int nf = static_cast<int>(policy_feature_names().size()), T = task.num_tables();
    E_ = nets.policy_table.out();
    penc_.resize(static_cast<size_t>(T) * E_);
    for (int t = 0; t < T; ++t) nets.policy_table.forward(&in.x[size_t(t) * nf], &penc_[size_t(t) * E_]);
    psum_.assign(static_cast<size_t>(n_) * E_, 0.0f);
    used_.assign(n_, 0);
    dims_.assign(n_, 0.0);
    if (nets.kind == PolicyKind::kDreamShard) {
      C_ = nets.cost_table.out();
      cenc_.resize(static_cast<size_t>(T) * C_);
      for (int t = 0; t < T; ++t) nets.cost_table.forward(&in.x[size_t(t) * nf], &cenc_[size_t(t) * C_]);
      csum_.assign(static_cast<size_t>(n_) * C_, 0.0f);
      now_.assign(static_cast<size_t>(n_) * 3, 0.0);
      for (int d = 0; d < n_; ++d) heads(&csum_[size_t(d) * C_], &now_[size_t(d) * 3]);
    } else {
      state_size_ = costs->compute().state_size();
      state_.assign(static_cast<size_t>(n_) * state_size_, 0.0);
      scratch_.resize(state_size_);
      ids_.assign(n_, {});
      compute_now_.assign(n_, 0.0);
    }
    double dims = 0;
    for (const TableSpec& t : task.tables) dims += t.dim;
    mean_dims_ = std::max(1.0, dims / n_);
  }

  void place(int t, int d) {
    used_[d] += task_.table_bytes(t);
    dims_[d] += task_.tables[t].dim;
    for (int k = 0; k < E_; ++k) psum_[size_t(d) * E_ + k] += penc_[size_t(t) * E_ + k];
    if (nets_.kind == PolicyKind::kDreamShard) {
      for (int k = 0; k < C_; ++k) csum_[size_t(d) * C_ + k] += cenc_[size_t(t) * C_ + k];
      heads(&csum_[size_t(d) * C_], &now_[size_t(d) * 3]);
    } else {
      compute_now_[d] = compute_with(t, d, /*keep=*/true);
    }
  }

  bool fits(int t, int d) const { return used_[d] + task_.table_bytes(t) <= task_.device_mem_bytes[d]; }

  // Device d's features if table t went there.
  void features(int t, int d, float* out) {
    const double ref = in_.ref_ms;
    const double mem_cap = static_cast<double>(task_.device_mem_bytes[d]);
    const double mem_with = (used_[d] + task_.table_bytes(t)) / mem_cap;
    if (nets_.kind == PolicyKind::kDreamShard) {
      float sum[Mlp::kMaxWidth];
      for (int k = 0; k < C_; ++k) sum[k] = csum_[size_t(d) * C_ + k] + cenc_[size_t(t) * C_ + k];
      double with[3];
      heads(sum, with);
      const double* now = &now_[size_t(d) * 3];
      const double v[] = {now[0] / ref, with[0] / ref, now[1] / ref, with[1] / ref,
                          now[2] / ref, with[2] / ref, mem_with,     max_total_ / ref};
      for (int i = 0; i < 8; ++i) out[i] = static_cast<float>(v[i]);
    } else {
      const double v[] = {compute_now_[d] / ref,
                          compute_with(t, d, false) / ref,
                          dims_[d] / mean_dims_,
                          (dims_[d] + task_.tables[t].dim) / mean_dims_,
                          used_[d] / mem_cap,
                          mem_with,
                          max_compute_ / ref};
      for (int i = 0; i < 7; ++i) out[i] = static_cast<float>(v[i]);
    }
  }

  // Called once a step: the maxima the features share.
  void refresh_maxima() {
    max_total_ = max_compute_ = 0;
    for (int d = 0; d < n_; ++d) {
      if (nets_.kind == PolicyKind::kDreamShard) {
        const double* now = &now_[size_t(d) * 3];
        max_total_ = std::max(max_total_, now[0] + now[1] + now[2]);
      } else {
        max_compute_ = std::max(max_compute_, compute_now_[d]);
      }
    }
  }

  const float* policy_sum(int d) const { return &psum_[size_t(d) * E_]; }
  const float* policy_encoding(int t) const { return &penc_[size_t(t) * E_]; }
  int64_t free_bytes(int d) const { return task_.device_mem_bytes[d] - used_[d]; }

 private:
  // ms of the compute, fwd and bwd heads on a device sum.
  void heads(const float* sum, double* out) const {
    for (int h = 0; h < 3; ++h) {
      const double y = mlp1(nets_.cost_head[h], sum) * nets_.target_std[h] + nets_.target_mean[h];
      out[h] = std::exp(std::clamp(y, -30.0, 30.0));
    }
  }

  double compute_with(int t, int d, bool keep) {
    const int id = in_.piece_ids[t];
    if (state_size_ > 0) {
      std::span<double> dev(state_.data() + size_t(d) * state_size_, state_size_);
      if (keep) {
        costs_->compute().add_to_state(id, dev);
        return costs_->compute().state_ms(dev);
      }
      std::copy(dev.begin(), dev.end(), scratch_.begin());
      costs_->compute().add_to_state(id, scratch_);
      return costs_->compute().state_ms(scratch_);
    }
    ids_[d].push_back(id);
    const double ms = costs_->compute().compute_ms(ids_[d]);
    if (!keep) ids_[d].pop_back();
    return ms;
  }

  const PolicyNets& nets_;
  const PlanTask& task_;
  const EpisodeInput& in_;
  ShardCosts* costs_;
  int n_, E_ = 0, C_ = 0;
  std::vector<float> penc_, psum_, cenc_, csum_;
  std::vector<double> now_;  // DreamShard: per device compute, fwd, bwd ms
  std::vector<int64_t> used_;
  std::vector<double> dims_;
  double mean_dims_ = 1, max_total_ = 0, max_compute_ = 0;
  // AutoShard: the cost model's incremental state (or ids) per device.
  size_t state_size_ = 0;
  std::vector<double> state_, scratch_, compute_now_;
  std::vector<std::vector<int>> ids_;
};

// The pinned tables placed first; Error where one does not fit its device.
void place_pinned(EpisodeState& state, const PlanTask& task, const std::string& name, Episode& ep) {
  for (int t = 0; t < task.num_tables(); ++t) {
    const int pin = task.pinned_device[t];
    if (pin < 0) continue;
    ES_CHECK(state.fits(t, pin), "{}: pinned table '{}' does not fit device {}", name,
             task.tables[t].name, pin);
    state.place(t, pin);
    ep.device_of[t] = pin;
  }
}

// The devices table `t` fits in `mask`. Where none has room: an error, or
// with allow_overflow every device, the episode marked as overflowing.
void mask_fitting_devices(EpisodeState& state, const PlanTask& task, int t, const EpisodeOptions& o,
                          const std::string& name, std::vector<uint8_t>& mask, Episode& ep) {
  const int n = task.num_devices();
  bool any = false;
  for (int d = 0; d < n; ++d) {
    mask[d] = state.fits(t, d) ? 1 : 0;
    any = any || mask[d];
  }
  if (any) return;
  int most = 0;
  for (int d = 1; d < n; ++d) most = state.free_bytes(d) > state.free_bytes(most) ? d : most;
  ES_CHECK(o.allow_overflow,
           "{}: no device has room for table '{}' ({} bytes; the most free memory left on a "
           "device is {} bytes): the policy packs tables whole, in its own order",
           name, task.tables[t].name, task.table_bytes(t), state.free_bytes(most));
  if (!ep.overflow) {
    ep.stuck_table = t;
    ep.stuck_most_free_bytes = state.free_bytes(most);
  }
  ep.overflow = true;
  std::fill(mask.begin(), mask.end(), 1);
}

// A device drawn from the masked softmax of `logits` (their maximum `best`).
int sample_device(const std::vector<float>& logits, const std::vector<uint8_t>& mask, float best,
                  std::mt19937_64& rng) {
  const size_t n = logits.size();
  double total = 0;
  std::vector<double> p(n, 0.0);
  for (size_t d = 0; d < n; ++d) total += p[d] = mask[d] ? std::exp(logits[d] - best) : 0.0;
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  int action = -1;
  for (size_t d = 0; d < n; ++d) {
    if (!mask[d]) continue;
    action = static_cast<int>(d);
    if ((u -= p[d]) < 0) break;
  }
  return action;
}

}  // namespace

Episode run_episode(const PolicyNets& nets, const PlanTask& task, const EpisodeInput& in,
                    ShardCosts* costs, const EpisodeOptions& o) {
  const int n = task.num_devices(), T = task.num_tables();
  const std::string name = policy_kind_name(nets.kind);
  ES_CHECK(static_cast<int>(in.x.size()) == T * static_cast<int>(policy_feature_names().size()),
           "{}: episode input of another task", name);
  ES_CHECK(nets.kind == PolicyKind::kDreamShard || costs != nullptr,
           "autoshard: needs the planning cost model");
  EpisodeState state(nets, task, in, costs);
  Episode ep;
  ep.device_of.assign(T, -1);
  place_pinned(state, task, name, ep);
  const int C = static_cast<int>(policy_device_feature_names(nets.kind).size());
  const int E = nets.policy_table.out(), X = nets.context_size();
  const int in_size = E + C + X;
  ES_CHECK(nets.policy_logit.in() == in_size, "{}: logit network takes {} inputs, expected {}",
           name, nets.policy_logit.in(), in_size);
  std::vector<float> input(in_size), feats(static_cast<size_t>(n) * C), logits(n);
  std::vector<float> hidden(X, 0.0f), gru_in(nets.kind == PolicyKind::kAutoShard ? E + C : 0);
  std::vector<float> prev_choice(C, 0.0f);
  std::vector<uint8_t> mask(n);
  std::mt19937_64 rng(o.seed);
  for (int t : in.order) {
    state.refresh_maxima();
    mask_fitting_devices(state, task, t, o, name, mask, ep);
    for (int d = 0; d < n; ++d) state.features(t, d, &feats[size_t(d) * C]);
    if (nets.kind == PolicyKind::kAutoShard) {
      std::copy(state.policy_encoding(t), state.policy_encoding(t) + E, gru_in.begin());
      std::copy(prev_choice.begin(), prev_choice.end(), gru_in.begin() + E);
      nets.gru.step(gru_in.data(), hidden.data());
    } else {
      std::copy(state.policy_encoding(t), state.policy_encoding(t) + E, hidden.begin());
    }
    float best = -INFINITY;
    int action = -1;
    for (int d = 0; d < n; ++d) {
      if (!mask[d]) continue;
      std::copy(state.policy_sum(d), state.policy_sum(d) + E, input.begin());
      std::copy(&feats[size_t(d) * C], &feats[size_t(d) * C] + C, input.begin() + E);
      std::copy(hidden.begin(), hidden.end(), input.begin() + E + C);
      logits[d] = mlp1(nets.policy_logit, input.data());
      if (logits[d] > best) best = logits[d], action = d;
    }
    if (o.sample) action = sample_device(logits, mask, best, rng);
    double z = 0;
    for (int d = 0; d < n; ++d) z += mask[d] ? std::exp(static_cast<double>(logits[d]) - best) : 0.0;
    ep.log_prob += logits[action] - best - std::log(z);
    if (o.record) {
      ep.device_feats.insert(ep.device_feats.end(), feats.begin(), feats.end());
      ep.mask.insert(ep.mask.end(), mask.begin(), mask.end());
    }
    std::copy(&feats[size_t(action) * C], &feats[size_t(action) * C] + C, prev_choice.begin());
    state.place(t, action);
    ep.device_of[t] = action;
    ep.actions.push_back(action);
  }
  return ep;
}

CostNetPrediction predict_with_cost_net(const PolicyNets& nets, const EpisodeInput& in,
                                        const std::vector<int>& device_of, int devices) {
  const int nf = static_cast<int>(policy_feature_names().size()), C = nets.cost_table.out();
  std::vector<float> sums(static_cast<size_t>(devices) * C, 0.0f), e(C), mx(C, 0.0f);
  for (size_t t = 0; t < device_of.size(); ++t) {
    nets.cost_table.forward(&in.x[t * nf], e.data());
    for (int k = 0; k < C; ++k) sums[size_t(device_of[t]) * C + k] += e[k];
  }
  const auto ms = [&](int h, const float* x) {
    const double y = mlp1(nets.cost_head[h], x) * nets.target_std[h] + nets.target_mean[h];
    return std::exp(std::clamp(y, -30.0, 30.0));
  };
  CostNetPrediction p;
  for (int d = 0; d < devices; ++d) {
    const float* s = &sums[size_t(d) * C];
    for (int k = 0; k < C; ++k) mx[k] = std::max(mx[k], s[k]);
    p.device_max_ms =
        std::max(p.device_max_ms, ms(kHeadCompute, s) + ms(kHeadFwdComm, s) + ms(kHeadBwdComm, s));
  }
  p.overall_ms = ms(kHeadOverall, mx.data());
  return p;
}

Plan table_wise_plan(const PlanTask& task, const std::vector<int>& device_of) {
  Plan plan;
  for (int t = 0; t < task.num_tables(); ++t) {
    Shard s;
    s.table = t;
    s.cols = task.tables[t].dim;
    s.rows = task.tables[t].rows;
    s.device = device_of[t];
    plan.shards.push_back(s);
  }
  return plan;
}

}  // namespace embshard
