// Workloads without traces, for planning: a table-spec JSON that may leave
// out what only a trace tells (pooling factor, reuse histograms), or the
// built-in default workload.
#pragma once

#include <cstdint>
#include <string>

#include "embshard/workload/workload.h"

namespace embshard {

// A table-spec JSON: {"batch_size": B, "profile": "2021" (optional),
// "tables": [{"name", "rows", "dim", "pooling_factor"?, "unique_rows"?,
// "row_reuse_histogram"?, "lookup_reuse_histogram"?}]}. A table without a
// pooling factor or histograms takes the named synthetic profile's published
// averages (`profile` unless the file names one); a workload's tables.json is
// a valid table-spec file too. `batch_size` > 0 stands in for the file's,
// which is required otherwise. A table field outside the list above is an
// error. Errors name the file, table and field. The workload has no trace;
// its source is the path.
Workload load_table_specs(const std::string& path, const std::string& profile = "2021",
                          int64_t batch_size = 0);
// The same from JSON text in memory (the Python package's tables); `source`
// names it in errors and is the workload's source.
Workload parse_table_specs(const std::string& text, const std::string& source,
                           const std::string& profile = "2021", int64_t batch_size = 0);

// The built-in default: `num_tables` tables of a synth workload calibrated to
// the published 2021 statistics (seed 1), made in memory without traces.
Workload default_workload(int64_t num_tables = 100, int64_t batch_size = 4096,
                          uint64_t seed = 1);

}  // namespace embshard
