// The all-to-alls of model parallelism as embshard measures them: how one
// exchange is timed (AllToAllTiming) and what it moves.
//
// Forward, every device sends its pooled embeddings (batch / N rows of its dim
// sum) to each of the N - 1 others and receives theirs; backward, the
// gradients go the same way back.
#pragma once

#include <cstdint>

namespace embshard {

// The standard reference exchange's columns per rank (eval's and the shipped
// files'; bench comm --probe-dim measures with another).
constexpr int kReferenceExchangeDim = 64;

// How the all-to-alls of one placement are timed: `warmup` untimed runs, then
// `repeats` rounds of the placement's exchanges interleaved (in a random
// order every rank draws alike from `seed`) with `repeats` rounds of a fixed
// reference exchange (`probe_dim` columns on every rank); `batch`
// rows in all (batch / N per rank). Each rank normalizes its own figures by
// the ratio to the reference exchange and its quiet time (measure/interleaved.h).
struct AllToAllTiming {
  int64_t batch = 4096;
  int warmup = 3;
  int repeats = 10;
  uint64_t seed = 0;
  int probe_dim = kReferenceExchangeDim;
};
// A forward's transfer (its time less the wait for the last device's delay)
// is at least this: the drift factor needs a positive figure.
constexpr double kMinExchangeMs = 0.001;

// What device `device` moves in one all-to-all of pooled fp32 embeddings:
// it sends batch / N rows of its dim sum to each of the N - 1 others, and
// receives batch / N rows of each other's dim sum. The one formula every
// cost model and fit uses.
struct AllToAllBytes {
  double sent = 0, received = 0;
  double busiest() const { return sent > received ? sent : received; }
};
// `dim_sum`: the device's; `total_dim`: every device's together; `devices`: N.
inline AllToAllBytes alltoall_bytes(double dim_sum, double total_dim, double devices,
                                    double batch) {
  const double rows_per_peer = batch / devices;
  return {rows_per_peer * dim_sum * 4.0 * (devices - 1),
          rows_per_peer * (total_dim - dim_sum) * 4.0};
}

}  // namespace embshard
