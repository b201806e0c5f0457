// Row shards and batch slices of a trace.
#include "embshard/workload/trace_shard.h"

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

std::vector<double> row_lookup_shares(const TableTrace& trace, int64_t rows, int bins) {
  ES_CHECK(rows > 0 && bins >= 1, "row lookup shares: {} rows in {} bins", rows, bins);
  std::vector<double> share(bins, 0.0);
  const size_t n = trace.indices.size();
  if (n == 0) return std::vector<double>(bins, 1.0 / bins);
  for (const int64_t row : trace.indices) {
    ES_CHECK(row >= 0 && row < rows, "row lookup shares: index {} outside [0, {})", row, rows);
    // The bin of `row` when bin b holds rows [b*rows/bins, (b+1)*rows/bins).
    const int64_t b = static_cast<int64_t>((static_cast<__int128>(row) * bins) / rows);
    share[b] += 1.0;
  }
  for (double& s : share) s /= static_cast<double>(n);
  return share;
}

}  // namespace embshard
