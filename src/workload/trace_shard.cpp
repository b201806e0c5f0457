// Row shards and batch slices of a trace.
#include "embshard/workload/trace_shard.h"

#include <algorithm>
#include <utility>

#include "embshard/util/error.h"

namespace embshard {

TableTrace row_shard_trace(const TableTrace& trace, int64_t row_offset, int64_t rows) {
  ES_CHECK(row_offset >= 0 && rows > 0, "row shard: rows [{}, {}) is an empty or negative range",
           row_offset, row_offset + rows);
  TableTrace out;
  out.offsets.reserve(trace.offsets.size());
  out.offsets.push_back(0);
  const int64_t end = row_offset + rows;
  for (int64_t b = 0; b < trace.batch_size(); ++b) {
    for (int64_t i = trace.offsets[b]; i < trace.offsets[b + 1]; ++i) {
      const int64_t row = trace.indices[i];
      if (row >= row_offset && row < end) out.indices.push_back(row - row_offset);
    }
    out.offsets.push_back(static_cast<int64_t>(out.indices.size()));
  }
  return out;
}

TableTrace batch_slice_trace(const TableTrace& trace, int slice, int slices) {
  ES_CHECK(slices >= 1 && slice >= 0 && slice < slices,
           "batch slice {} of {}: need 0 <= slice < slices", slice, slices);
  const int64_t batch = trace.batch_size();
  const int64_t first = batch * slice / slices, last = batch * (slice + 1) / slices;
  TableTrace out;
  out.offsets.assign(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    if (b >= first && b < last) {
      out.indices.insert(out.indices.end(), trace.indices.begin() + trace.offsets[b],
                         trace.indices.begin() + trace.offsets[b + 1]);
    }
    out.offsets[b + 1] = static_cast<int64_t>(out.indices.size());
  }
  return out;
}

void sort_rows(std::vector<int64_t>& rows) {
  constexpr int kDigitBits = 11;
  constexpr size_t kDigits = size_t{1} << kDigitBits;
  if (rows.size() < 2) return;
  int64_t largest = 0;
  for (const int64_t r : rows) {
    ES_CHECK(r >= 0, "sort rows: index {} is negative", r);
    largest = std::max(largest, r);
  }
  std::vector<int64_t> tmp(rows.size());
  std::vector<size_t> start(kDigits);
  for (int shift = 0; shift < 63 && (largest >> shift) > 0; shift += kDigitBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const int64_t r : rows) ++start[(r >> shift) & (kDigits - 1)];
    size_t sum = 0;
    for (size_t& s : start) sum += std::exchange(s, sum);
    for (const int64_t r : rows) tmp[start[(r >> shift) & (kDigits - 1)]++] = r;
    rows.swap(tmp);
  }
}

TableStats row_range_stats(std::span<const int64_t> sorted, int64_t batch_size,
                           int64_t row_offset, int64_t rows) {
  ES_CHECK(row_offset >= 0 && rows > 0, "row range stats: rows [{}, {}) is an empty or negative range",
           row_offset, row_offset + rows);
  TableStats s;
  s.batch_size = batch_size;
  const auto first = std::lower_bound(sorted.begin(), sorted.end(), row_offset);
  const auto last = std::lower_bound(first, sorted.end(), row_offset + rows);
  s.num_indices = last - first;
  for (auto run = first; run != last;) {
    auto end = run;
    while (end != last && *end == *run) ++end;
    const int64_t count = end - run;
    const int bin = reuse_bin(static_cast<uint64_t>(count));
    ++s.unique_rows;
    ++s.rows_per_bin[bin];
    s.lookups_per_bin[bin] += count;
    run = end;
  }
  return s;
}

PieceStats::PieceStats(std::string trace_path) : reader_(std::move(trace_path)) {}
PieceStats::~PieceStats() = default;

void PieceStats::load(int table, const TableSpec& spec) {
  if (loaded_ == table) return;
  loaded_ = -1;
  ES_CHECK(table >= 0 && static_cast<uint64_t>(table) < reader_.info().num_tables,
           "trace {}: table {} ('{}') is not in it ({} tables)", reader_.path(), table, spec.name,
           reader_.info().num_tables);
  trace_ = reader_.read_table(static_cast<uint64_t>(table));
  batch_size_ = trace_.batch_size();
  sorted_ = std::move(trace_.indices);
  trace_ = TableTrace{};  // read again only for a replica's slice
  for (const int64_t row : sorted_) {
    ES_CHECK(row >= 0 && row < spec.rows,
             "trace {}: table {} ('{}'): index {} outside its rows [0, {})", reader_.path(), table,
             spec.name, row, spec.rows);
  }
  sort_rows(sorted_);
  loaded_ = table;
}

const TableStats& PieceStats::stats(int table, const TableSpec& spec, int64_t row_offset,
                                    int64_t rows, int slice, int slices) {
  ES_CHECK(row_offset >= 0 && rows > 0 && row_offset + rows <= spec.rows,
           "trace {}: table {} ('{}'): rows [{}, {}) are not a range of its {} rows", reader_.path(),
           table, spec.name, row_offset, row_offset + rows, spec.rows);
  const auto key = std::make_tuple(table, row_offset, rows, slice, slices);
  auto it = done_.find(key);
  if (it != done_.end()) return it->second;
  load(table, spec);
  TableStats stats;
  if (slices == 1) {
    stats = row_range_stats(sorted_, batch_size_, row_offset, rows);
  } else {
    if (trace_.offsets.empty()) trace_ = reader_.read_table(static_cast<uint64_t>(table));
    const TableTrace t = rows == spec.rows ? batch_slice_trace(trace_, slice, slices)
                                           : batch_slice_trace(row_shard_trace(trace_, row_offset, rows),
                                                               slice, slices);
    stats = compute_table_stats(t, rows, "trace " + reader_.path() + ": table " + spec.name);
  }
  return done_.emplace(key, stats).first->second;
}

TableSpec PieceStats::piece(int table, TableSpec spec, int64_t row_offset, int64_t rows, int slice,
                            int slices) {
  std::lock_guard lock(mutex_);
  fill_table_spec(stats(table, spec, row_offset, rows, slice, slices), spec);
  spec.rows = rows;
  return spec;
}

double PieceStats::lookup_share(int table, const TableSpec& spec, int64_t row_offset,
                                int64_t rows) {
  std::lock_guard lock(mutex_);
  const int64_t in_range = stats(table, spec, row_offset, rows, 0, 1).num_indices;
  const int64_t all = stats(table, spec, 0, spec.rows, 0, 1).num_indices;
  return all > 0 ? static_cast<double>(in_range) / static_cast<double>(all)
                 : static_cast<double>(rows) / static_cast<double>(spec.rows);
}

}  // namespace embshard

