#include "embshard/workload/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "embshard/util/error.h"

namespace embshard {
namespace {

void add_row(TableStats& s, uint64_t count) {
  const int bin = reuse_bin(count);
  s.rows_per_bin[bin] += 1;
  s.lookups_per_bin[bin] += static_cast<int64_t>(count);
  s.unique_rows += 1;
}

void check_indices(const TableTrace& trace, int64_t rows, const std::string& context) {
  for (size_t i = 0; i < trace.indices.size(); ++i) {
    const int64_t index = trace.indices[i];
    ES_CHECK(index >= 0 && (rows <= 0 || index < rows),
             "{}: indices[{}] = {} is out of range [0, {})", context, i, index,
             rows > 0 ? fmt::format("{}", rows) : std::string("inf"));
  }
}

// Few rows relative to lookups: one counter per row, one pass.
void count_dense(const TableTrace& trace, int64_t rows, TableStats& s) {
  std::vector<uint32_t> counts(static_cast<size_t>(rows), 0);
  for (int64_t index : trace.indices) counts[static_cast<size_t>(index)] += 1;
  for (uint32_t c : counts) {
    if (c > 0) add_row(s, c);
  }
}

// Many rows (or unknown): sort a copy of the indices and count runs.
void count_sorted(const TableTrace& trace, TableStats& s) {
  std::vector<int64_t> sorted = trace.indices;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    add_row(s, j - i);
    i = j;
  }
}

ReuseHistogram shares(const ReuseCounts& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ReuseHistogram h{};
  if (total == 0) return h;
  for (int k = 0; k < kReuseBins; ++k) h[k] = static_cast<double>(counts[k]) / total;
  return h;
}

}  // namespace

double TableStats::pooling_factor() const {
  return batch_size > 0 ? static_cast<double>(num_indices) / batch_size : 0.0;
}
ReuseHistogram TableStats::row_reuse() const { return shares(rows_per_bin); }
ReuseHistogram TableStats::lookup_reuse() const { return shares(lookups_per_bin); }

TableStats compute_table_stats(const TableTrace& trace, int64_t rows,
                               const std::string& context) {
  check_indices(trace, rows, context);
  TableStats s;
  s.batch_size = trace.batch_size();
  s.num_indices = static_cast<int64_t>(trace.indices.size());
  const bool dense = rows > 0 && rows <= kDenseCountFactor * std::max<int64_t>(s.num_indices, 1) &&
                     s.num_indices < std::numeric_limits<uint32_t>::max();
  if (dense) {
    count_dense(trace, rows, s);
  } else {
    count_sorted(trace, s);
  }
  return s;
}

void fill_table_spec(const TableStats& stats, TableSpec& spec) {
  spec.pooling_factor = stats.pooling_factor();
  spec.unique_rows = stats.unique_rows;
  spec.row_reuse = stats.row_reuse();
  spec.lookup_reuse = stats.lookup_reuse();
}

TableStats table_stats_from_spec(const TableSpec& spec, int64_t batch_size) {
  TableStats s;
  s.batch_size = batch_size;
  s.num_indices = std::llround(spec.pooling_factor * static_cast<double>(batch_size));
  s.unique_rows = spec.unique_rows;
  double row_total = 0, lookup_total = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    row_total += spec.row_reuse[k];
    lookup_total += spec.lookup_reuse[k];
  }
  for (int k = 0; k < kReuseBins; ++k) {
    if (row_total > 0) s.rows_per_bin[k] = std::llround(spec.row_reuse[k] / row_total * s.unique_rows);
    if (lookup_total > 0) {
      s.lookups_per_bin[k] = std::llround(spec.lookup_reuse[k] / lookup_total * s.num_indices);
    }
  }
  return s;
}

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return s;
}

WorkloadStats aggregate_stats(const std::vector<TableSpec>& specs,
                              const std::vector<TableStats>& stats, int64_t batch_size) {
  ES_CHECK(specs.size() == stats.size(), "aggregate_stats: {} table specs but {} table stats",
           specs.size(), stats.size());
  WorkloadStats w;
  w.num_tables = static_cast<int64_t>(specs.size());
  w.batch_size = batch_size;
  ReuseCounts rows_per_bin{}, lookups_per_bin{};
  std::vector<double> rows, dims, pooling;
  for (size_t t = 0; t < specs.size(); ++t) {
    w.num_indices += stats[t].num_indices;
    w.unique_rows += stats[t].unique_rows;
    for (int k = 0; k < kReuseBins; ++k) {
      rows_per_bin[k] += stats[t].rows_per_bin[k];
      lookups_per_bin[k] += stats[t].lookups_per_bin[k];
    }
    w.weight_bytes += specs[t].weight_bytes();
    rows.push_back(static_cast<double>(specs[t].rows));
    dims.push_back(specs[t].dim);
    pooling.push_back(stats[t].pooling_factor());
  }
  const double lookups_capacity = static_cast<double>(w.num_tables) * batch_size;
  w.avg_pooling_factor = lookups_capacity > 0 ? w.num_indices / lookups_capacity : 0.0;
  w.unique_ratio =
      w.num_indices > 0 ? static_cast<double>(w.unique_rows) / w.num_indices : 0.0;
  w.row_reuse = shares(rows_per_bin);
  w.lookup_reuse = shares(lookups_per_bin);
  w.rows = summarize(rows);
  w.dims = summarize(dims);
  w.pooling = summarize(pooling);
  return w;
}

PublishedComparison compare_to_published(const WorkloadStats& measured, const PublishedStats& target) {
  PublishedComparison c;
  c.row_reuse_tv = total_variation(measured.row_reuse, target.row_reuse);
  c.lookup_reuse_tv = total_variation(measured.lookup_reuse, target.lookup_reuse);
  c.pooling_rel_error =
      (measured.avg_pooling_factor - target.avg_pooling_factor) / target.avg_pooling_factor;
  c.unique_ratio_rel_error = (measured.unique_ratio - target.unique_ratio) / target.unique_ratio;
  return c;
}

}  // namespace embshard
