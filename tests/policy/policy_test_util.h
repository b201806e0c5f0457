// A table pool for the policy tests: specs only (the policies and the
// analytic and neural cost models need no trace), varied enough that where
// a table goes matters.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "embshard/eval/train_policy.h"
#include "embshard/workload/workload.h"
#include "test_util.h"

namespace embshard::testing {

inline std::string write_policy_pool(const ScratchDir& dir, int tables, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_rows(3, 6.5), pooling(1, 40), hot(0.05, 0.9);
  Workload w;
  w.batch_size = 2048;
  w.source = "policy test pool";
  for (int t = 0; t < tables; ++t) {
    TableSpec s;
    s.name = fmt::format("p{}", t);
    s.rows = static_cast<int64_t>(std::pow(10.0, log_rows(rng)));
    s.dim = 16;
    s.pooling_factor = pooling(rng);
    const double h = hot(rng);
    s.row_reuse[0] = 1 - h;  // rows accessed once / a few times
    s.row_reuse[3] = h;
    s.lookup_reuse[0] = (1 - h) / (1 - h + h * 6);
    s.lookup_reuse[3] = 1 - s.lookup_reuse[0];
    w.tables.push_back(s);
  }
  const std::string path = (dir.path() / fmt::format("pool{}", seed)).string();
  std::filesystem::create_directories(path);
  save_workload_specs(w, path);
  return path;
}

// Small, fast training options (seconds).
inline PolicyTrainOptions quick_policy_options(PolicyKind kind, const std::string& pool,
                                               const std::string& out) {
  PolicyTrainOptions o;
  o.kind = kind;
  o.pool_dirs = {pool};
  o.out_dir = out;
  o.devices = 4;
  o.min_tables = 10;
  o.max_tables = 20;
  o.iterations = 6;
  o.measured_plans = 8;
  o.cost_epochs = 30;
  o.updates = 6;
  o.tasks_per_update = 4;
  o.episodes = 8;
  o.validation_tasks = 4;
  o.truth = "analytic";
  o.seed = 3;
  return o;
}

}  // namespace embshard::testing
