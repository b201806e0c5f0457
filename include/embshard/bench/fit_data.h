// The shards `embshard fit` measures on a new machine when no data is given
// (cost/neural/fit.h fits the model to them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/bench/compute.h"

namespace embshard {

class Reporter;

// What to measure on the new machine when no data is given: two small pools
// of every (profile, batch), one to fit on and one to judge (fit_share of the
// shards to the first), `samples` shards spread over them (a correction
// fitted at one batch does not carry to another), all against one probe
// reference. Besides, `hot_samples` shards in a second pair of pools per
// (profile, batch) where a quarter of the tables are hot (pooling factor
// 500 up to batch 2048, 300 at 4096, 100 at 8192), some of them row blocks
// and replica slices: the pieces a plan makes of hot tables, which the published
// profiles barely hold and the pre-trained model misprices most on a new
// machine. Returns the bench compute files written under `dir`.
struct FitMeasureOptions {
  std::string dir;
  std::vector<std::string> profiles = {"2021", "2022"};
  std::vector<int64_t> batches = {1024, 2048, 4096, 8192};
  int tables = 40;  // per pool
  ComputeBenchOptions bench;  // samples (in all), executor, rounds, ...
  int64_t hot_samples = 0;    // in all, over the hot pools (0: none)
  double hot_piece_share = 0.3;  // ComputeBenchOptions::piece_share there
  int hot_max_tables = 8;        // ComputeBenchOptions::max_tables there
};
struct FitFiles {
  std::vector<std::string> fit, test;
};
FitFiles measure_fit_data(const FitMeasureOptions& options, double fit_share, Reporter& reporter);

}  // namespace embshard
