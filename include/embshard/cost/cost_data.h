// Measured cost data as the cost models read it: `bench compute` and `bench
// comm` files, checked record by record, and the accuracy figures of a model
// against them.
//
// A record that is torn, not JSON, misses a field or holds an invalid value
// (a non-positive or missing ms, a non-finite feature) is never trained on:
// it is skipped and listed (line number and reason) in `problems`, and the
// loaders throw when more than `max_bad_share` of the records are bad, since
// then the file is more likely wrong than damaged.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "embshard/cost/cost_model.h"

namespace embshard {

enum class CostDataKind { kCompute, kComm };
// From the header line's "format"; Error names the file if it is neither.
CostDataKind detect_cost_data_kind(const std::string& path);

struct DataProblem {
  int64_t line = 0;  // 1-based line of the file
  std::string reason;
};

struct ComputeRecord {
  int64_t line = 0;
  std::vector<TableFeatures> tables;
  std::vector<int> pool_ids;  // per table: its index in the bench's table pool
  double ms = 0;
};

struct ComputeData {
  std::string path;
  nlohmann::json header;
  int64_t batch_size = 0;
  std::vector<ComputeRecord> records;
  std::vector<DataProblem> problems;  // skipped records
};

struct CommRecord {
  int64_t line = 0;
  std::vector<double> dim_sums, delays_ms, fwd_ms, bwd_ms;  // per device
};

struct CommData {
  std::string path;
  nlohmann::json header;
  int64_t batch = 0;
  int num_devices = 0;
  std::vector<CommRecord> records;
  std::vector<DataProblem> problems;
};

ComputeData load_compute_data(const std::string& path, double max_bad_share = 0.1);
CommData load_comm_data(const std::string& path, double max_bad_share = 0.1);

// Prints "<path>: skipped N bad record(s)" and the first few problems to
// stderr (nothing when there are none).
void report_problems(const std::string& path, const std::vector<DataProblem>& problems);

struct AccuracyFigures {
  int64_t count = 0;
  double mape_pct = 0;     // mean absolute percentage error
  double p90_ape_pct = 0;  // 90th percentile of the absolute percentage errors
  double kendall_tau = 0;  // tau-b between predicted and measured
};
AccuracyFigures accuracy_figures(std::span<const double> predicted,
                                 std::span<const double> measured);
double kendall_tau_b(std::span<const double> a, std::span<const double> b);
nlohmann::json to_json(const AccuracyFigures& figures);

// Predicted vs measured, for one named split of the data.
struct Comparison {
  std::string name;   // "compute_test", "comm_fwd_test", ...
  std::string title;  // for the plot and the report
  std::vector<double> predicted, measured;
};

// A predicted-vs-measured scatter plot: log-log axes, the y = x line,
// labelled axes, a title with the MAPE. Plain SVG text.
std::string scatter_svg(const Comparison& comparison);

// Writes report.md, report.json and one <name>.svg per comparison to `dir`
// (atomically); returns the figures as JSON ({name: figures}).
nlohmann::json write_accuracy_report(const std::string& dir, const std::string& heading,
                                     const std::vector<Comparison>& comparisons,
                                     const std::vector<std::string>& notes);

}  // namespace embshard
