// Measured cost data as the cost models read it: `bench compute` and `bench
// comm` files, checked record by record.
//
// A record that is torn, not JSON, misses a field or holds an invalid value
// (a non-positive or missing ms, a non-finite feature) is never trained on:
// it is skipped and listed (line number and reason) in `problems`, and the
// loaders throw when more than `max_bad_share` of the records are bad, since
// then the file is more likely wrong than damaged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/compute_model.h"

namespace embshard {

class Reporter;

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

// Tells `reporter` "<path>: skipped N bad record(s)" and the first few
// problems (nothing when there are none).
void report_problems(const std::string& path, const std::vector<DataProblem>& problems,
                     Reporter& reporter);

}  // namespace embshard
