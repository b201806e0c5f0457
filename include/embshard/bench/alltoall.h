// The all-to-alls of model parallelism as embshard measures them: how one
// exchange is timed (AllToAllTiming) and what it moves.
//
// Forward, every device sends its pooled embeddings (batch / N rows of its dim
// sum) to each of the N - 1 others and receives theirs; backward, the
// gradients go the same way back.
#pragma once

#include <cstdint>

namespace embshard {

// How the all-to-alls of one placement are timed: the median of `repeats`
// runs after `warmup` runs, `batch` rows in all (batch / N per rank).
struct AllToAllTiming {
  int64_t batch = 4096;
  int warmup = 3;
  int repeats = 10;
};

}  // namespace embshard
