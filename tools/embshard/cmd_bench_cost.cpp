// embshard bench cost-model: how many shard costs per second the neural
// model's fast path evaluates (one core), against calling the libtorch module
// once per shard, and how far apart the two are.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "commands.h"
#include "embshard/cost/neural_model.h"
#include "embshard/util/error.h"
#include "embshard/workload/workload.h"

#ifdef EMBSHARD_WITH_TORCH
#include "embshard/cost/neural_train.h"
#endif

namespace embshard::cli {
namespace {

struct BenchCostArgs {
  std::string model_dir, workload_dir;
  int pool = 200;  // tables registered
  int tables_per_shard = 10;
  double seconds = 1.0;  // per path
  uint64_t seed = 0;
};

// Random but plausible tables: the speed does not depend on the values.
std::vector<TableFeatures> random_tables(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int dims[] = {4, 8, 16, 32, 64, 128};
  std::vector<TableFeatures> out;
  for (int i = 0; i < count; ++i) {
    TableFeatures t;
    t.rows = static_cast<int64_t>(std::pow(10.0, 3 + 4 * u(rng)));
    t.dim = dims[rng() % 6];
    t.pooling_factor = 1 + 40 * u(rng);
    double rs = 0, ls = 0;
    for (int k = 0; k < kReuseBins; ++k) {
      rs += t.row_reuse[k] = u(rng) * std::exp(-0.5 * k);
      ls += t.lookup_reuse[k] = u(rng) * std::exp(-0.2 * k);
    }
    for (int k = 0; k < kReuseBins; ++k) t.row_reuse[k] /= rs, t.lookup_reuse[k] /= ls;
    out.push_back(t);
  }
  return out;
}

template <typename F>
std::pair<double, int64_t> shards_per_second(double seconds, int64_t shards, F&& cost) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t done = 0;
  double sink = 0, elapsed = 0;
  do {
    for (int i = 0; i < 256; ++i, ++done) sink += cost(done % shards);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  if (!std::isfinite(sink)) fmt::print("(non-finite sum)\n");  // keeps `sink` alive
  return {done / elapsed, done};
}

void run_bench_cost(const BenchCostArgs& a) {
  NeuralCostModel model(load_neural_model(a.model_dir));
  std::vector<TableFeatures> tables;
  if (!a.workload_dir.empty()) {
    const Workload w = load_workload(a.workload_dir);
    for (const TableSpec& spec : w.tables) tables.push_back(table_features(spec, spec.dim));
  } else {
    tables = random_tables(a.pool, a.seed);
  }
  for (const TableFeatures& t : tables) model.add_table(t);
  std::mt19937_64 rng(a.seed + 1);
  const int64_t num_shards = 4096;
  std::vector<std::vector<int>> shards(num_shards);
  for (auto& s : shards) {
    for (int i = 0; i < a.tables_per_shard; ++i)
      s.push_back(static_cast<int>(rng() % tables.size()));
  }
  const auto [fast_rate, fast_n] = shards_per_second(
      a.seconds, num_shards, [&](int64_t i) { return model.compute_ms(shards[i]); });
  fmt::print(
      "fast path (cached per-table MLP outputs, 1 thread): {:.0f} shard costs/s "
      "({:.2f} us each; {} tables, {} per shard)\n",
      fast_rate, 1e6 / fast_rate, tables.size(), a.tables_per_shard);
#ifdef EMBSHARD_WITH_TORCH
  TorchComputeReference torch_model(model.model());
  for (const TableFeatures& t : tables) torch_model.add_table(t);
  double max_rel = 0;
  for (int64_t i = 0; i < std::min<int64_t>(num_shards, 1000); ++i) {
    const double f = model.compute_ms(shards[i]), t = torch_model.compute_ms(shards[i]);
    max_rel = std::max(max_rel, std::abs(f - t) / std::abs(t));
  }
  const auto [torch_rate, torch_n] = shards_per_second(
      a.seconds, num_shards, [&](int64_t i) { return torch_model.compute_ms(shards[i]); });
  fmt::print(
      "libtorch module per shard (1 thread):              {:.0f} shard costs/s "
      "({:.2f} us each)\n",
      torch_rate, 1e6 / torch_rate);
  fmt::print(
      "speed-up of the fast path: {:.1f}x; max relative difference over 1000 shards: "
      "{:.2e}\n",
      fast_rate / torch_rate, max_rel);
#else
  fmt::print("(built without libtorch: no comparison with the libtorch module)\n");
#endif
}

}  // namespace

void add_bench_cost_model_command(CLI::App& bench) {
  auto args = std::make_shared<BenchCostArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "cost-model", "Shard costs per second of the neural model's fast path vs libtorch");
  cmd->add_option("--model", args->model_dir, "Model directory")->required();
  cmd->add_option("--workload", args->workload_dir,
                  "Take tables from this workload (default: "
                  "random tables)");
  cmd->add_option("--pool", args->pool, "Random tables to register")->capture_default_str();
  cmd->add_option("--tables-per-shard", args->tables_per_shard, "Tables per shard")
      ->capture_default_str();
  cmd->add_option("--seconds", args->seconds, "Seconds per measured path")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of tables and shards")->capture_default_str();
  cmd->callback([args] {
    ES_CHECK(args->pool >= 1 && args->tables_per_shard >= 1 && args->seconds > 0,
             "bench cost-model: --pool {}, --tables-per-shard {}, --seconds {} must be positive",
             args->pool, args->tables_per_shard, args->seconds);
    run_bench_cost(*args);
  });
}

}  // namespace embshard::cli
