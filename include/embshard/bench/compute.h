// `bench compute`: measured costs of random shards on the fused executor.
//
// NeuroShard's augmentation: each sample is a shard of 1..max_tables tables
// drawn from the workload's pool, each at a random dim from `dims`, whose
// weights fit `mem_cap_bytes`. The shard's forward + backward + update is
// timed as the median of `repeats` runs after `warmup` runs, and one record
// per shard is appended to the output as it is measured (see RecordFile):
// a rerun of the same command resumes after the last complete record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/bench/shard_timer.h"
#include "embshard/kernel/tbe.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct ComputeBenchOptions {
  std::string workload_dir;
  std::string out_path;
  int64_t samples = 100;
  int max_tables = 15;
  int64_t mem_cap_bytes = int64_t{2} << 30;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  std::string executor = "cpu";  // create_executor's names
  int threads = 1;
  uint64_t seed = 0;
  int warmup = 5;
  int repeats = 10;
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
  PoolingMode pooling = PoolingMode::kSum;
};

// Sample `index` of a run: a pure function of (seed, index), so that a resumed
// run draws exactly the shards an uninterrupted one would have drawn.
std::vector<ShardTable> draw_shard(const Workload& workload, const ComputeBenchOptions& options,
                                   int64_t index);

// The shard timer's options of a run.
ShardTimerOptions shard_timer_options(const ComputeBenchOptions& options);

// Runs the whole benchmark (resuming), with progress to `reporter`. Returns
// the number of records in the output file.
int64_t run_compute_bench(const ComputeBenchOptions& options, Reporter& reporter);

// The last `show` records of a `bench compute` file as a table, with a line
// saying how they were measured.
std::string compute_records_table(const std::string& path, int64_t show);

// The header line's identity: machine, batch, threads, version and options.
nlohmann::json compute_bench_header(const Workload& workload, const ComputeBenchOptions& options,
                                    const std::string& executor);

}  // namespace embshard
