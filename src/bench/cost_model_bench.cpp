// `embshard bench cost-model`: the neural fast path's shard costs per second.
#include "embshard/bench/cost_model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/workload/workload.h"

namespace embshard {
namespace {

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

// Shards costed per second by `model` over `seconds` (whole blocks of 256).
double shards_per_second(double seconds, const std::vector<std::vector<int>>& shards,
                         const ComputeModel& model) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t done = 0;
  double sink = 0, elapsed = 0;
  do {
    for (int i = 0; i < 256; ++i, ++done) sink += model.compute_ms(shards[done % shards.size()]);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  // A use of every result, so that no call can be optimised away.
  ES_CHECK(std::isfinite(sink), "bench cost-model: {} predicted a non-finite cost", model.name());
  return done / elapsed;
}

}  // namespace

CostModelBenchResult run_cost_model_bench(const CostModelBenchOptions& a,
                                          ComputeModel* reference) {
  ES_CHECK(a.pool >= 1 && a.tables_per_shard >= 1 && a.seconds > 0,
           "bench cost-model: --pool {}, --tables-per-shard {}, --seconds {} must be positive",
           a.pool, a.tables_per_shard, a.seconds);
  NeuralComputeModel model(load_prepared_neural_model(a.model_dir));
  std::vector<TableFeatures> tables;
  if (!a.workload_dir.empty()) {
    const Workload w = load_workload(a.workload_dir);
    for (const TableSpec& spec : w.tables) tables.push_back(table_features(spec, spec.dim));
  } else {
    tables = random_tables(a.pool, a.seed);
  }
  for (const TableFeatures& t : tables) {
    model.add_table(t);
    if (reference != nullptr) reference->add_table(t);
  }
  std::mt19937_64 rng(a.seed + 1);
  std::vector<std::vector<int>> shards(4096);
  for (auto& s : shards) {
    for (int i = 0; i < a.tables_per_shard; ++i) {
      s.push_back(static_cast<int>(rng() % tables.size()));
    }
  }
  CostModelBenchResult r;
  r.tables = static_cast<int>(tables.size());
  r.tables_per_shard = a.tables_per_shard;
  r.fast_shards_per_s = shards_per_second(a.seconds, shards, model);
  if (reference == nullptr) return r;
  r.reference = reference->name();
  for (size_t i = 0; i < std::min<size_t>(shards.size(), 1000); ++i) {
    const double f = model.compute_ms(shards[i]), t = reference->compute_ms(shards[i]);
    r.max_rel_diff = std::max(r.max_rel_diff, std::abs(f - t) / std::abs(t));
  }
  r.reference_shards_per_s = shards_per_second(a.seconds, shards, *reference);
  return r;
}

std::string cost_model_bench_report(const CostModelBenchResult& r) {
  std::string out = fmt::format(
      "fast path (cached per-table MLP outputs, 1 thread): {:.0f} shard costs/s ({:.2f} us "
      "each; {} tables, {} per shard)\n",
      r.fast_shards_per_s, 1e6 / r.fast_shards_per_s, r.tables, r.tables_per_shard);
  if (r.reference.empty()) {
    return out + "(no reference implementation in this build: built without libtorch)\n";
  }
  out += fmt::format("{} (1 thread): {:.0f} shard costs/s ({:.2f} us each)\n", r.reference,
                     r.reference_shards_per_s, 1e6 / r.reference_shards_per_s);
  out += fmt::format("speed-up of the fast path: {:.1f}x; max relative difference over 1000 "
                     "shards: {:.2e}\n",
                     r.fast_shards_per_s / r.reference_shards_per_s, r.max_rel_diff);
  return out;
}

}  // namespace embshard
