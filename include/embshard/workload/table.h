// Table specs and the 17-bin reuse histogram of Meta's locality statistics.
//
// A table's reuse histogram counts, for one batch, how often each distinct row
// is accessed. Bin k holds counts in (2^(k-1), 2^k] for k = 1..15, bin 0 holds
// exactly 1 access and bin 16 holds (32768, inf). Two histograms are kept: the
// share of distinct rows per bin, and the share of lookups per bin.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "embshard/workload/data_type.h"

namespace embshard {

constexpr int kReuseBins = 17;
using ReuseHistogram = std::array<double, kReuseBins>;

// The bin of a row accessed `count` (>= 1) times in a batch.
int reuse_bin(uint64_t count);
// Inclusive bounds of a bin's access counts: lower is exclusive upper bound of
// the previous bin plus one; upper is UINT64_MAX for the last bin.
uint64_t reuse_bin_lower(int bin);
uint64_t reuse_bin_upper(int bin);
// "(0, 1]", "(1, 2]", ..., "(32768+" as printed in the published statistics.
std::string reuse_bin_label(int bin);

// Total variation distance between two histograms (each normalised first).
double total_variation(const ReuseHistogram& a, const ReuseHistogram& b);

// The largest mean pooling factor a table may have: published ones are in
// the tens to hundreds; past this a spec is a mistake (and the features
// that carry it saturate).
constexpr double kMaxPoolingFactor = 1e6;
// Tables of one generated workload (synth, bench plan's specs): past it memory
// runs out before anything useful is made.
constexpr int64_t kMaxTables = 1'000'000;
// Past these a table or a batch is a typo, not a model (a table of 1e15
// rows): synth and make_task (plan/plan.h) refuse it, naming the value.
constexpr int64_t kMaxRows = int64_t{1} << 40;  // 1.1e12
constexpr int kMaxDim = 65536;
constexpr int64_t kMaxBatch = int64_t{1} << 31;

struct TableSpec {
  std::string name;
  int64_t rows = 0;
  int dim = 0;
  double pooling_factor = 0.0;   // mean lookups per sample in the batch
  int64_t unique_rows = 0;       // distinct rows accessed in the batch
  ReuseHistogram row_reuse{};     // share of distinct rows per reuse bin
  ReuseHistogram lookup_reuse{};  // share of lookups per reuse bin
  DataType data_type = DataType::kFp32;  // what its weights are stored as

  // The stored weights (row-wise scales and biases included), no optimizer state.
  int64_t weight_bytes() const { return rows * data_type_row_bytes(data_type, dim); }
};

}  // namespace embshard
