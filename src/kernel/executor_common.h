// What every executor's prepared shards share, and the executors
// create_executor reaches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "embshard/kernel/executor.h"
#include "embshard/kernel/tbe.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "kernel/tbe_common.h"

namespace embshard {

// Small, varied values, never denormal. A 64 KiB pattern of hashed values is
// copied over the buffer: gigabytes of weights fill at memcpy speed.
inline void fill_pattern(float* values, size_t count, uint64_t seed) {
  constexpr size_t kPattern = 16384;
  std::vector<float> pattern(kPattern);
  for (size_t i = 0; i < kPattern; ++i) {
    const uint64_t h = splitmix64(seed * kPattern + i);
    pattern[i] = static_cast<float>(static_cast<int>(h % 2001) - 1000) * 1e-4f;
  }
  for (size_t begin = 0; begin < count; begin += kPattern) {
    std::copy_n(pattern.begin(), std::min(kPattern, count - begin), values + begin);
  }
}

// Error naming the executor (`who`) unless table `i` of a shard can run:
// rows, a dim of 1..kMaxDim, a trace, a type that trains unless the shard is
// forward only.
inline void check_shard_table(const ShardTableInput& t, size_t i, bool forward_only,
                              const char* who) {
  ES_CHECK(t.rows > 0 && t.dim >= 1 && t.dim <= detail::kMaxDim && t.offsets && t.indices,
           "{}: table {} of the shard has rows {}, dim {} (must be > 0 and 1..{}) or no trace", who,
           i, t.rows, t.dim, detail::kMaxDim);
  ES_CHECK(forward_only || data_type_trains(t.data_type),
           "{}: table {} of the shard is {}: a shard's step trains, and quantized tables are "
           "forward-only",
           who, i, data_type_name(t.data_type));
}

// The shard's table over its weights and optimizer state.
inline TableBatch table_batch(const ShardTableInput& t, float* weights, float* momentum) {
  TableBatch b;
  b.weights = weights;
  b.momentum = momentum;
  b.rows = t.rows;
  b.dim = t.dim;
  b.offsets = t.offsets;
  b.indices = t.indices;
  return b;
}

// The implementations, reached through create_executor.
std::unique_ptr<Executor> make_cpu_executor(const ExecutorOptions& options);
std::unique_ptr<Executor> make_cuda_executor(const ExecutorOptions& options);

}  // namespace embshard
