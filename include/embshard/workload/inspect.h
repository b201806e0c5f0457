// A workload's statistics for people: per-table figures recomputed from the
// trace, the aggregate, and the distance to a published profile
// (`embshard inspect`, and the summary the demo prints).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/workload/stats.h"
#include "embshard/workload/workload.h"

namespace embshard {

struct WorkloadInspection {
  Workload workload;              // specs refreshed from the trace when there is one
  std::vector<TableStats> stats;  // per table
  bool from_trace = false;
  WorkloadStats aggregate;
  std::optional<PublishedStats> published;  // with a comparison profile
  PublishedComparison comparison;
};

// Recomputes every table's statistics from the trace, one table in memory at
// a time; spec-only workloads fall back to the figures in tables.json.
// `compare_profile` ("" for none): also the distance to that published
// profile, read from `stats_dir` ("": data/published under the data root).
WorkloadInspection inspect_workload(const std::string& dir,
                                    const std::string& compare_profile = "",
                                    const std::string& stats_dir = "");
// Aggregates and compares a workload already in memory (its specs' figures).
WorkloadInspection inspect_specs(const Workload& workload, const std::string& compare_profile);

// The terminal report: one row per table, the aggregate, the histograms and
// the comparison.
std::string inspection_text(const WorkloadInspection& in);
// A few lines: size, pooling factor and unique ratio against the profile.
std::string inspection_summary(const WorkloadInspection& in);
// docs/cli.md documents the fields.
nlohmann::json inspection_json(const WorkloadInspection& in);

}  // namespace embshard
