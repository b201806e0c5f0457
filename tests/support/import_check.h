// Test support: checks an imported workload against the batch it came from.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"
#include "support/pt_fixture_data.h"

namespace embshard::testing {

// Reads trace.bin and tables.json back and compares them with `d`: every
// table's local offsets and indices exactly, and the specs against stats
// computed here independently (a std::map of access counts).
inline void expect_workload_matches(const std::string& dir, const DlrmBatch& d, int dim = 64) {
  const Workload w = load_workload(dir);
  ASSERT_EQ(w.batch_size, d.batch);
  ASSERT_EQ(static_cast<int64_t>(w.tables.size()), d.tables);
  TraceReader reader(w.trace_path());
  for (int64_t t = 0; t < d.tables; ++t) {
    SCOPED_TRACE("table " + std::to_string(t));
    const TableTrace trace = reader.read_table(static_cast<uint64_t>(t));
    const int64_t begin = d.offsets[t * d.batch];
    ASSERT_EQ(static_cast<int64_t>(trace.offsets.size()), d.batch + 1);
    for (int64_t b = 0; b <= d.batch; ++b) {
      ASSERT_EQ(trace.offsets[b], d.offsets[t * d.batch + b] - begin) << "bag " << b;
    }
    std::map<int64_t, uint64_t> counts;
    for (size_t i = 0; i < trace.indices.size(); ++i) {
      ASSERT_EQ(trace.indices[i], d.indices[begin + i]) << "index " << i;
      ++counts[trace.indices[i]];
    }
    const TableSpec& spec = w.tables[t];
    EXPECT_EQ(spec.name, "t" + std::to_string(t));
    EXPECT_EQ(spec.dim, dim);
    EXPECT_EQ(spec.rows, counts.empty() ? 1 : counts.rbegin()->first + 1);
    EXPECT_EQ(spec.unique_rows, static_cast<int64_t>(counts.size()));
    EXPECT_DOUBLE_EQ(spec.pooling_factor,
                     static_cast<double>(trace.indices.size()) / static_cast<double>(d.batch));
    ReuseHistogram rows{}, lookups{};
    for (const auto& [row, count] : counts) {
      // Bin 0: one access; bin k: (2^(k-1), 2^k]; written out, not reuse_bin().
      int bin = 0;
      while (bin < kReuseBins - 1 && count > (uint64_t{1} << bin)) ++bin;
      rows[bin] += 1.0 / static_cast<double>(counts.size());
      lookups[bin] += static_cast<double>(count) / static_cast<double>(trace.indices.size());
    }
    for (int k = 0; k < kReuseBins; ++k) {
      EXPECT_NEAR(spec.row_reuse[k], rows[k], 1e-12) << "row_reuse bin " << k;
      EXPECT_NEAR(spec.lookup_reuse[k], lookups[k], 1e-12) << "lookup_reuse bin " << k;
    }
  }
}

}  // namespace embshard::testing
