// The policy trainer's plain parts: task draws, "real" plan costs, untrained
// networks, scoring (the torch part: train_policy_torch.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/json_field.h"
#include "embshard/util/units.h"
#include "eval/train_policy_internal.h"

namespace embshard {
namespace policy_train {

using nlohmann::json;

std::vector<EvalTask> draw_specs(const Workload& pool, const PolicyTrainOptions& o, int count,
                                 uint64_t seed) {
  ES_CHECK(o.devices >= 1, "train-policy: --devices is {}, must be at least 1", o.devices);
  ES_CHECK(o.min_headroom >= 1.0 && o.max_headroom >= o.min_headroom,
           "train-policy: memory headroom {}-{}: need 1 <= min <= max", o.min_headroom,
           o.max_headroom);
  TaskGenOptions g;
  g.pool_dir = pool.dir;
  g.min_tables = o.min_tables;
  g.max_tables = o.max_tables;
  g.dims = o.dims;
  // Tables bigger than mem_cap_bytes are skipped, as `embshard tasks` does.
  g.mem_cap_bytes = o.mem_cap_bytes > 0 ? o.mem_cap_bytes : std::numeric_limits<int64_t>::max() / 4;
  g.count = count;
  g.seed = seed;
  std::vector<EvalTask> specs = generate_tasks(pool, g);
  std::mt19937_64 rng(seed_for(seed, SeedUse::kPolicyHeadroom));
  std::uniform_real_distribution<double> headroom(o.min_headroom, o.max_headroom);
  const MemoryModel memory;
  for (EvalTask& s : specs) {
    std::vector<TableSpec> tables;
    int64_t largest = 0;
    for (size_t k = 0; k < s.tables.size(); ++k) {
      tables.push_back(pool.tables[s.tables[k]]);
      tables.back().dim = s.dims[k];
      largest =
          std::max(largest, memory.shard_bytes(DataType::kFp32, tables.back().rows, s.dims[k]));
    }
    // 1.5 x the largest table at least, so that whole tables pack.
    s.mem_cap_bytes =
        std::max(largest * 3 / 2, default_device_capacity(tables, o.devices, headroom(rng)));
  }
  return specs;
}

PlanTask task_of(const Workload& pool, const EvalTask& spec, int devices) {
  std::vector<TableSpec> tables;
  for (size_t k = 0; k < spec.tables.size(); ++k) {
    tables.push_back(pool.tables.at(spec.tables[k]));
    tables.back().dim = spec.dims[k];
  }
  return make_task(std::move(tables), pool.batch_size,
                   device_capacities(devices, spec.mem_cap_bytes, {}), {});
}

Normaliser fit_feature_normaliser(const std::vector<PlanTask>& tasks) {
  const size_t nf = policy_feature_names().size();
  std::vector<double> sum(nf, 0.0), sq(nf, 0.0);
  size_t count = 0;
  std::vector<std::vector<float>> all;
  for (const PlanTask& t : tasks) all.push_back(policy_table_features(t));
  for (const auto& x : all) {
    for (size_t i = 0; i < x.size(); ++i) sum[i % nf] += x[i];
    count += x.size() / nf;
  }
  ES_CHECK(count > 0, "train-policy: no tables to fit the feature normalisation on");
  Normaliser n;
  for (size_t f = 0; f < nf; ++f) n.mean.push_back(static_cast<float>(sum[f] / count));
  for (const auto& x : all) {
    for (size_t i = 0; i < x.size(); ++i) sq[i % nf] += std::pow(x[i] - n.mean[i % nf], 2);
  }
  for (size_t f = 0; f < nf; ++f) {
    const double sd = std::sqrt(sq[f] / count);
    n.scale.push_back(static_cast<float>(sd > 1e-6 ? 1.0 / sd : 1.0));
  }
  return n;
}

PlanPrediction truth_prediction(const PlanTask& task, const std::vector<int>& device_of,
                                const CostModel& truth) {
  ShardCosts costs(task, truth);
  return predict_plan(task, table_wise_plan(task, device_of), costs);
}

CostSample measure_sample(int pool, const EvalTask& spec, const PlanTask& task,
                          const std::vector<int>& device_of, const CostModel& truth) {
  const PlanPrediction p = truth_prediction(task, device_of, truth);
  CostSample s;
  s.pool = pool;
  s.spec = spec;
  s.device_of = device_of;
  for (const DeviceCosts& d : p.devices) {
    s.device_ms.push_back(d.compute_ms);
    s.device_ms.push_back(d.fwd_comm_ms);
    s.device_ms.push_back(d.bwd_comm_ms);
  }
  s.plan_ms = p.cost_ms;
  return s;
}

json sample_json(const CostSample& s) {
  return {{"pool", s.pool},         {"tables", s.spec.tables},    {"dims", s.spec.dims},
          {"mem_cap_bytes", s.spec.mem_cap_bytes}, {"device_of", s.device_of},
          {"device_ms", s.device_ms}, {"plan_ms", s.plan_ms}};
}

CostSample sample_from(const json& state, size_t i, const std::string& path,
                       const std::vector<Workload>& pools, int devices) {
  const std::string at = fmt::format("/samples/{}/", i);
  const auto field = [&](const char* key, JsonKind kind) -> const json& {
    return json_field(state, at + key, kind, path);
  };
  // Whole numbers in lo..hi - 1, checked before they narrow to int: each
  // picks a pool, a table or a device (from 0), or is a dim (1..1024).
  const auto whole = [&](const std::string& key, const json& x, uint64_t lo, uint64_t hi,
                         const std::string& what) {
    const uint64_t n = x.get<uint64_t>();
    ES_CHECK(n >= lo && n < hi, "{}: field '{}{}' is {}, {}", path, at, key, n, what);
    return static_cast<int>(n);
  };
  const auto wholes = [&](const char* key, uint64_t lo, uint64_t hi, const std::string& what) {
    const json& v = field(key, JsonKind::kCounts);
    std::vector<int> out;
    for (size_t k = 0; k < v.size(); ++k) {
      out.push_back(whole(fmt::format("{}/{}", key, k), v[k], lo, hi, what));
    }
    return out;
  };
  CostSample s;
  s.pool = whole("pool", field("pool", JsonKind::kCount), 0, pools.size(),
                 "the run has " + count_of(static_cast<int64_t>(pools.size()), "pool"));
  const size_t tables = pools[static_cast<size_t>(s.pool)].tables.size();
  s.spec.tables = wholes(
      "tables", 0, tables,
      fmt::format("pool {} has {}", s.pool, count_of(static_cast<int64_t>(tables), "table")));
  s.spec.dims = wholes("dims", 1, 1025, "expected a dim in 1..1024");
  s.device_of = wholes("device_of", 0, static_cast<uint64_t>(devices),
                       "the run has " + count_of(devices, "device"));
  s.spec.mem_cap_bytes = field("mem_cap_bytes", JsonKind::kCount).get<int64_t>();
  s.device_ms = field("device_ms", JsonKind::kNumbers).get<std::vector<double>>();
  s.plan_ms = field("plan_ms", JsonKind::kNumber).get<double>();
  ES_CHECK(s.spec.dims.size() == s.spec.tables.size() &&
               s.device_of.size() == s.spec.tables.size() &&
               s.device_ms.size() == static_cast<size_t>(3 * devices),
           "{}: sample {} holds {} tables, {} dims, {} device_of and {} device_ms, expected one "
           "dim and device per table and 3 x {} device_ms",
           path, i, s.spec.tables.size(), s.spec.dims.size(), s.device_of.size(),
           s.device_ms.size(), devices);
  return s;
}

}  // namespace policy_train

std::vector<PlanTask> draw_policy_tasks(const Workload& pool, const PolicyTrainOptions& options,
                                        int count, uint64_t seed) {
  std::vector<PlanTask> tasks;
  for (const EvalTask& s : policy_train::draw_specs(pool, options, count, seed)) {
    tasks.push_back(policy_train::task_of(pool, s, options.devices));
  }
  return tasks;
}

double policy_plan_cost_ms(const PolicyNets& nets, const PlanTask& task, const CostModel& model) {
  ShardCosts costs(task, model);
  const EpisodeInput in = episode_input(nets, task, &costs);
  const Episode ep = run_episode(nets, task, in, &costs, EpisodeOptions{});
  return predict_plan(task, table_wise_plan(task, ep.device_of), costs).cost_ms;
}

namespace {

// torch::nn::Linear's default initialisation: U(-1/sqrt(in), 1/sqrt(in)).
DenseLayer random_layer(int in, int out, bool relu, std::mt19937_64& rng) {
  DenseLayer l;
  l.in = in;
  l.out = out;
  l.relu = relu;
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  std::uniform_real_distribution<float> u(-bound, bound);
  for (int i = 0; i < in * out; ++i) l.weight.push_back(u(rng));
  for (int i = 0; i < out; ++i) l.bias.push_back(u(rng));
  return l;
}

Mlp random_mlp(const std::vector<int>& sizes, bool relu_last, std::mt19937_64& rng) {
  Mlp m;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    m.layers.push_back(random_layer(sizes[i], sizes[i + 1], i + 2 < sizes.size() || relu_last, rng));
  }
  return m;
}

}  // namespace

PolicyNets untrained_policy(PolicyKind kind, int hidden, int embed, uint64_t seed) {
  ES_CHECK(hidden >= 1 && embed >= 1 && hidden <= Mlp::kMaxWidth && 3 * embed <= Mlp::kMaxWidth,
           "train-policy: --hidden {} / --embed {} out of range", hidden, embed);
  std::mt19937_64 rng(seed);
  PolicyNets n;
  n.kind = kind;
  const int nf = static_cast<int>(policy_feature_names().size());
  const int C = static_cast<int>(policy_device_feature_names(kind).size());
  n.features.mean.assign(nf, 0.0f);
  n.features.scale.assign(nf, 1.0f);
  n.policy_table = random_mlp({nf, hidden, embed}, true, rng);
  if (kind == PolicyKind::kDreamShard) {
    n.cost_table = random_mlp({nf, hidden, embed}, true, rng);
    for (Mlp& h : n.cost_head) h = random_mlp({embed, hidden, 1}, false, rng);
    n.policy_logit = random_mlp({2 * embed + C, hidden, 1}, false, rng);
  } else {
    n.gru.ih = random_layer(embed + C, 3 * embed, false, rng);
    n.gru.hh = random_layer(embed, 3 * embed, false, rng);
    n.policy_logit = random_mlp({2 * embed + C, hidden, 1}, false, rng);
  }
  n.prepare();
  return n;
}

}  // namespace embshard
