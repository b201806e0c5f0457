// Workload statistics: per-table and aggregate locality figures computed from
// index traces, and the published aggregate statistics of Meta's synthetic
// DLRM datasets (dlrm_datasets, 2021 and 2022) that `synth` calibrates to.
//
// Reuse bins follow table.h: bin k holds rows accessed (2^(k-1), 2^k] times in
// one batch. The aggregate row-reuse histogram is the number of distinct rows
// per bin summed over tables divided by the total number of distinct rows; the
// lookup-reuse histogram likewise counts lookups. That is how the published
// statistics were computed (each table's rows are distinct from every other's).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "embshard/workload/table.h"
#include "embshard/workload/trace.h"

namespace embshard {

using ReuseCounts = std::array<int64_t, kReuseBins>;

// Exact counts for one table and one batch.
struct TableStats {
  int64_t batch_size = 0;
  int64_t num_indices = 0;
  int64_t unique_rows = 0;
  ReuseCounts rows_per_bin{};     // distinct rows per reuse bin
  ReuseCounts lookups_per_bin{};  // lookups per reuse bin

  double pooling_factor() const;
  ReuseHistogram row_reuse() const;     // shares; all zero for an empty table
  ReuseHistogram lookup_reuse() const;
};

// Counts distinct rows of `trace`. `rows` (the table's row count, 0 if unknown)
// picks the method: a counts array of `rows` entries when rows is at most
// kDenseCountFactor x the number of lookups, else a sorted copy of the indices,
// so a 100M-row table with few lookups never allocates a rows-sized array.
// Throws Error naming `context` if an index is outside [0, rows).
constexpr int64_t kDenseCountFactor = 4;
TableStats compute_table_stats(const TableTrace& trace, int64_t rows,
                               const std::string& context = "trace");

// Writes the trace-derived fields (pooling_factor, unique_rows, both
// histograms) into `spec`; name, rows and dim are left as they are.
void fill_table_spec(const TableStats& stats, TableSpec& spec);

// The counts a spec implies (from its shares), for spec-only workloads.
TableStats table_stats_from_spec(const TableSpec& spec, int64_t batch_size);

struct Summary {
  double min = 0, median = 0, max = 0;
};
Summary summarize(std::vector<double> values);

struct WorkloadStats {
  int64_t num_tables = 0;
  int64_t batch_size = 0;
  int64_t num_indices = 0;
  int64_t unique_rows = 0;
  double avg_pooling_factor = 0;  // num_indices / (num_tables * batch_size)
  double unique_ratio = 0;        // unique_rows / num_indices
  ReuseHistogram row_reuse{};
  ReuseHistogram lookup_reuse{};
  int64_t weight_bytes = 0;       // every table's weights in its data type
  Summary rows, dims, pooling;    // per table
};

// `specs` gives rows and dims; `stats[t]` the measured counts of table t.
WorkloadStats aggregate_stats(const std::vector<TableSpec>& specs,
                              const std::vector<TableStats>& stats, int64_t batch_size);

// ---- published statistics ---------------------------------------------------

struct PublishedStats {
  std::string profile;     // "2021" or "2022"
  std::string file;        // the statistics file it came from
  std::string dataset;     // block name(s), e.g. "fbgemm_t856_bs65536.pt"
  int num_blocks = 0;      // blocks averaged
  int64_t num_tables = 0;  // from the file names (t856)
  int64_t batch_size = 0;  // from the file names (bs65536)
  double avg_indices = 0;
  double avg_unique = 0;
  double avg_pooling_factor = 0;  // avg_indices / (num_tables * batch_size)
  double unique_ratio = 0;        // avg_unique / avg_indices
  ReuseHistogram row_reuse{};     // "Histogram of col sizes"
  ReuseHistogram lookup_reuse{};  // "Ratio of index distribution ..."
};

// Valid profile names, in order ("2021", "2022").
const std::vector<std::string>& published_profiles();
// Where the statistics committed with the repo live: data_root()/data/published.
std::string default_published_stats_dir();

// Parses a locality statistics file. "2021": the block of the unsplit file
// fbgemm_t856_bs65536.pt; "2022": the mean over the file's blocks (16 parts of
// fbgemm_t788_bs131072). Throws Error naming the file, line and value on
// malformed input.
PublishedStats load_published_stats(const std::string& path, const std::string& profile);
// load_published_stats of the profile's file in `dir` (default: default_published_stats_dir()).
PublishedStats load_published_profile(const std::string& profile, const std::string& dir = "");

// Distances of measured aggregate statistics from published ones.
struct PublishedComparison {
  double row_reuse_tv = 0;
  double lookup_reuse_tv = 0;
  double pooling_rel_error = 0;       // (measured - published) / published
  double unique_ratio_rel_error = 0;
};
PublishedComparison compare_to_published(const WorkloadStats& measured, const PublishedStats& target);

}  // namespace embshard
