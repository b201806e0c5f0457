// Executors: where a device's fused embedding work runs for real.
//
// Every measurement that becomes ground truth (bench compute, calibrate, the
// measured model, eval, the ranking check, bench kernel) prepares its shards
// on an Executor and times PreparedShard::step(): one fused forward of all the
// shard's tables, then one fused backward with the optimizer update, each
// timed by the executor's own clock (a host clock for the CPU, events for a
// GPU). Executors are created by name (create_executor).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embshard/kernel/tbe.h"

namespace embshard {

// One table of a shard: its shape and one batch of its lookups.
struct ShardTableInput {
  int64_t rows = 0;
  int dim = 0;                       // 1..1024
  const int64_t* offsets = nullptr;  // [batch_size + 1], offsets[0] == 0
  const int64_t* indices = nullptr;  // [offsets[batch_size]], each in [0, rows)
  DataType data_type = DataType::kFp32;  // int8 and int4: forward-only shards only
};

struct ShardInput {
  int64_t batch_size = 0;
  PoolingMode pooling = PoolingMode::kSum;
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
  std::vector<ShardTableInput> tables;
  // Inference: a step is the forward alone (bwd_ms 0), no optimizer state,
  // and quantized (int8, int4) tables may be held.
  bool forward_only = false;
};

struct StepTiming {
  double fwd_ms = 0, bwd_ms = 0;  // backward includes the optimizer update
  double total_ms() const { return fwd_ms + bwd_ms; }
};

// A shard set up on an executor: weights (small varied values: they do not
// change the timing), optimizer state, pooled output and its gradient.
class PreparedShard {
 public:
  virtual ~PreparedShard() = default;
  // One forward, then one backward + update (the forward alone for a
  // forward-only shard). Error naming the failing kernel and its status when
  // a kernel fails.
  virtual StepTiming step() = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // "cpu (1 thread)", "cuda (NVIDIA H100 80GB HBM3)": what the times are of.
  virtual std::string name() const = 0;
  // Error on an invalid shard (a dim outside 1..1024, an index outside its
  // table, ...). The traces must outlive the prepared shard: an executor may
  // read them in place.
  virtual std::unique_ptr<PreparedShard> prepare(const ShardInput& shard) = 0;
  // The bandwidth of a large copy in the memory the shards live in, bytes
  // read plus written per second (1e9): the median of a few copies of 256
  // MiB. What physical floors (cost/floor.h) divide by.
  virtual double copy_gbps() = 0;
};

// The median one-way bandwidth of memcpy (bytes copied once / time, 1e9 per
// second) of a buffer of `bytes` in host memory, which should be far larger
// than the last-level cache, over `runs` copies after one to warm up.
double host_memcpy_gb_per_s(int64_t bytes, int runs);
// The copy executors measure for copy_gbps.
constexpr int64_t kCopyBytes = int64_t{256} << 20;
constexpr int kCopyRuns = 5;

struct ExecutorOptions {
  int threads = 1;  // cpu: OpenMP threads of the fused kernels
  int device = 0;   // cuda: the GPU's ordinal
  // cpu: time steps by the thread's CPU time instead of the wall clock, so
  // that the time the thread waits for a core (an oversubscribed machine)
  // is not counted; stalls on memory still are. One thread only.
  bool thread_cpu_time = false;
};

// The CPU executor's name: "cpu (1 thread)", "cpu (1 thread, thread CPU time)".
std::string cpu_executor_name(int threads, bool thread_cpu_time);

// "cpu", and "cuda" in a build with EMBSHARD_CUDA=ON.
const std::vector<std::string>& executor_names();
// Error listing the valid names when `name` is unknown, or saying why a
// known executor cannot run here (no GPU, a build without CUDA).
std::unique_ptr<Executor> create_executor(const std::string& name,
                                          const ExecutorOptions& options = {});

}  // namespace embshard
