// `embshard bench cost-model`: how many shard costs per second the neural
// model's fast path evaluates on one core, against a reference
// implementation (libtorch's module, once per shard) in the same run, and how
// far apart the two are.
#pragma once

#include <cstdint>
#include <string>

namespace embshard {

class ComputeModel;

struct CostModelBenchOptions {
  std::string model_dir;     // a neural model directory
  std::string workload_dir;  // take tables from this workload ("": random tables)
  int pool = 200;            // random tables registered
  int tables_per_shard = 10;
  double seconds = 1.0;      // per measured path
  uint64_t seed = 0;
};

struct CostModelBenchResult {
  int tables = 0, tables_per_shard = 0;
  double fast_shards_per_s = 0;
  std::string reference;            // "" without one
  double reference_shards_per_s = 0;
  double max_rel_diff = 0;          // over the first 1000 shards
};

// `reference` (may be null) gets the same tables; it must predict what the
// fast path predicts.
CostModelBenchResult run_cost_model_bench(const CostModelBenchOptions& options,
                                          ComputeModel* reference);
std::string cost_model_bench_report(const CostModelBenchResult& result);

}  // namespace embshard
