// `bench compute`: measured costs of random shards on the fused executor.
//
// NeuroShard's augmentation: each sample is a shard of 1..max_tables tables
// drawn from the workload's pool, each at a random dim from `dims`, whose
// weights fit `mem_cap_bytes`. The shard's forward + backward + update is
// measured by the shard timer against the reference probe (normalized, see
// measure/shard_timer.h) after `warmup` untimed steps, and one record per shard
// is appended to the output as it is measured (see RecordFile): a rerun of
// the same command resumes after the last complete record, on the file's own
// probe reference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/measure/shard_draw.h"
#include "embshard/measure/shard_timer.h"
#include "embshard/kernel/tbe.h"
#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct ComputeBenchOptions {
  std::string workload_dir;
  std::string out_path;
  int64_t samples = 100;
  int max_tables = 15;
  // The cap the shipped models were trained at: a heavier shard is outside
  // what they learned.
  int64_t mem_cap_bytes = int64_t{128} << 20;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  std::string executor = "cpu";  // create_executor's names
  int threads = 1;
  bool thread_cpu_time = false;  // cpu: ExecutorOptions::thread_cpu_time
  uint64_t seed = 0;
  int warmup = 5;
  int min_rounds = 12, max_rounds = 60;    // interleaved rounds per shard (measure/interleaved.h)
  double target_relative_half_width = 0.02;  // of the ratio's 95% confidence interval
  // The probe's worth in milliseconds (the file's scale): kAnchors fits it on
  // anchor shards priced by the model in `model_dir` ("": the shipped one;
  // cost/anchors.h), so that runs agree with each other and with the model;
  // kWindow takes the probe's quiet time over reference_window_s seconds of
  // probe runs (no model needed: how the shipped models' data were measured).
  enum class Scale { kAnchors, kWindow } scale = Scale::kAnchors;
  std::string model_dir;
  double reference_window_s = 20;
  // Take the scale from this earlier file (same machine, executor and probe)
  // instead: a set of files keeps one scale.
  std::string reference_from;
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
  PoolingMode pooling = PoolingMode::kSum;
  // Share of drawn tables made a piece: a row block of a 2-, 4- or 8-way row
  // split, or a replica's slice of the batch (1/2, 1/4, 1/8), each recorded
  // with the features measured on its own lookups. 0: whole tables only (the
  // draws are then exactly those of earlier versions).
  double piece_share = 0;
  // Each drawn table stored as one of these types, drawn uniformly (trained
  // types only: a sample is a training step); empty: as the workload's
  // table is (the draws are then exactly those of earlier versions).
  std::vector<DataType> data_types;
  // Keep each sample's rounds in its record ("per_round": the work's and the
  // probe's time in every timed round, their ratios and the block ratios), so
  // that another statistic can be computed from the same runs later.
  bool keep_rounds = false;
};

// A run's draws (max tables, cap, dims, pieces, seed), and its sample
// `index` (measure/shard_draw.h: a pure function of seed and index).
ShardDraw shard_draw(const ComputeBenchOptions& options);
std::vector<ShardTable> draw_shard(const Workload& workload, const ComputeBenchOptions& options,
                                   int64_t index);

// The executor of a run (--executor, --threads, --thread-cpu-time).
std::unique_ptr<Executor> create_executor(const ComputeBenchOptions& options);

// The shard timer's options of a run.
ShardTimerOptions shard_timer_options(const ComputeBenchOptions& options);

// Checks the options that do not depend on the workload (counts, sizes,
// dims, rounds): an Error naming the flag. run_compute_bench checks them too.
void check_compute_bench_options(const ComputeBenchOptions& options);

// Runs the whole benchmark (resuming), with progress to `reporter`. Returns
// the number of records in the output file.
int64_t run_compute_bench(const ComputeBenchOptions& options, Reporter& reporter);

// The last `show` records of a `bench compute` file as a table, with a line
// saying how they were measured.
std::string compute_records_table(const std::string& path, int64_t show);

// The probe reference recorded in a `bench compute` or `bench comm` file
// (version 2). Error naming the file when it has none, or when its header
// names another executor than `executor` (another clock is another scale).
ProbeReference probe_reference_of_file(const std::string& path, const std::string& executor);

}  // namespace embshard
