// Random sharding tasks for the planner tests (fixed seeds).
#pragma once

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include "embshard/plan/plan.h"

namespace embshard::testing {

inline std::vector<TableSpec> random_tables(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int dims[] = {16, 32, 64, 128};
  std::vector<TableSpec> tables(count);
  for (int t = 0; t < count; ++t) {
    TableSpec& s = tables[t];
    s.name = fmt::format("t{}", t);
    s.rows = static_cast<int64_t>(std::pow(10.0, std::uniform_real_distribution<>(3, 5.5)(rng)));
    s.dim = dims[rng() % 4];
    s.pooling_factor = std::uniform_real_distribution<>(1, 30)(rng);
    s.unique_rows = std::min<int64_t>(s.rows, 1000);
    s.row_reuse[0] = 1;
    s.lookup_reuse[0] = 1;
  }
  return tables;
}

// Memory per device: the tables' total x slack / devices (slack 1.3 binds).
inline PlanTask random_task(int tables, int devices, double slack, uint64_t seed,
                            const TaskConstraints& constraints = {}) {
  std::vector<TableSpec> specs = random_tables(tables, seed);
  MemoryModel memory;
  int64_t total = 0, largest = 0;
  for (const TableSpec& s : specs) {
    total += memory.shard_bytes(DataType::kFp32, s.rows, s.dim);
    largest = std::max(largest, memory.shard_bytes(DataType::kFp32, s.rows, s.dim));
  }
  // Every table fits a device whole, so that the table-wise baselines can pack.
  const int64_t cap =
      std::max<int64_t>(static_cast<int64_t>(total * slack / devices), largest * 21 / 20);
  return make_task(std::move(specs), 4096, std::vector<int64_t>(devices, cap), constraints);
}

}  // namespace embshard::testing
