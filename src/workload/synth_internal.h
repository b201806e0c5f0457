// Internals of the synthetic workload generator shared by synth.cpp,
// synth_trace.cpp and the tests.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "embshard/workload/stats.h"

namespace embshard::synth_detail {

// Access-count range of rows generated in a bin (the last bin is capped).
int64_t bin_count_lower(int bin);
int64_t bin_count_upper(int bin);

// Largest-remainder split of `total` in proportion to `weights` (sum > 0
// unless total is 0); ties go to the lower index.
std::vector<int64_t> apportion(int64_t total, const std::vector<double>& weights);
// The same with integer weights, exactly (128-bit arithmetic).
std::vector<int64_t> apportion_exact(int64_t total, const std::vector<int64_t>& parts,
                                     int64_t parts_sum);

// Mean access count of a row in each bin implied by the published histograms
// and unique ratio (clamped into the bin; the bin's geometric middle where the
// published row share rounds to zero).
std::array<double, kReuseBins> mean_counts(const PublishedStats& target);

// Lookups and distinct rows per bin for `num_indices` lookups in all. A bin
// with fewer lookups than one of its rows needs (small batches) folds into the
// bin below or borrows from it, whichever moves fewer lookups.
struct BinTotals {
  ReuseCounts lookups{};
  ReuseCounts rows{};
};
BinTotals bin_totals(const PublishedStats& target, int64_t num_indices);

}  // namespace embshard::synth_detail
