// Measured cost data as the cost models read it: `bench compute` and `bench
// comm` files, checked record by record.
//
// This module owns both formats: their names, versions and fields, written by
// `bench compute` / `bench comm` and read by everything else.
//
// Version 2 records hold ground truth normalized against a reference probe
// timed in the same window (measure/interleaved.h): "ms" (and "fwd_ms",
// "bwd_ms") are the quiet-machine figures, "raw_ms" the plain median of the
// sample's own runs, with the probe's figures and the ratio's dispersion
// beside them. Version 1 records (before normalization) are read as raw-only
// and labelled so (`normalized` false); a set of files must not mix the two.
//
// A record that is torn, not JSON, misses a field or holds an invalid value
// (a non-positive or missing ms, a non-finite feature) is never trained on:
// in the skipping mode it is skipped and listed (line number and reason) in
// `problems`, and the loader throws when more than `max_bad_share` of the
// records are bad, since then the file is more likely wrong than damaged; in
// the strict mode the first bad record is an Error naming its line.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/comm_model.h"
#include "embshard/cost/compute_model.h"

namespace embshard {

class Reporter;

constexpr const char* kComputeFormat = "embshard-compute-costs";
constexpr const char* kCommFormat = "embshard-comm-costs";
// `bench comm --collectives`: the row-wise and data-parallel collectives.
constexpr const char* kCollectiveFormat = "embshard-collective-costs";
constexpr int kCostDataVersion = 2;  // 2: normalized against a reference probe

enum class CostDataKind { kCompute, kComm };
enum class RecordCheck { kStrict, kSkipBad };
struct LoadOptions {
  RecordCheck check = RecordCheck::kSkipBad;
  double max_bad_share = 0.1;  // kSkipBad: more bad records than this is an Error
  // Take "raw_ms" (the plain medians) as the ground truth even where the
  // records hold normalized figures: on a device nothing else shares (a
  // dedicated GPU) the raw medians repeat better than the ratio to a probe.
  bool raw = false;
};
// From the header line's "format"; Error names the file if it is neither.
CostDataKind detect_cost_data_kind(const std::string& path);

struct DataProblem {
  int64_t line = 0;  // 1-based line of the file
  std::string reason;
};

struct ComputeRecord {
  int64_t line = 0;
  int file = 0;        // which file of a merged set (merge_compute_data)
  int64_t batch = 0;   // the file's batch
  std::vector<TableFeatures> tables;
  std::vector<int> pool_ids;  // per table: its index in the bench's table pool
  double ms = 0;              // ground truth: normalized (version 2) or raw (version 1)
  double raw_ms = 0;          // the plain median (version 1: the same as ms)
};

// Whether a record's shard holds a row block of a table, or a replica's
// slice of the batch.
bool has_row_blocks(const ComputeRecord& record);
bool has_replica_slices(const ComputeRecord& record);

struct ComputeData {
  std::string path;
  nlohmann::json header;
  int64_t batch_size = 0;     // merged files of several batches: the smallest
  int64_t max_batch_size = 0;
  bool normalized = false;    // version 2
  std::vector<ComputeRecord> records;
  std::vector<DataProblem> problems;  // skipped records
};

struct CommRecord {
  int64_t line = 0;
  std::vector<double> dim_sums, delays_ms, fwd_ms, bwd_ms;  // per device
};

// A `bench comm --collectives` record: the drawn load and what it took.
struct CollectiveRecord {
  int64_t line = 0;
  CollectiveLoad load;
  std::vector<double> fwd_ms, bwd_ms;  // per device, normalized
};

struct CollectiveData {
  std::string path;
  int64_t batch_size = 0;
  int num_devices = 0;
  std::vector<CollectiveRecord> records;
  std::vector<DataProblem> problems;
};

struct CommData {
  std::string path;
  nlohmann::json header;
  int64_t batch_size = 0;
  int num_devices = 0;
  bool normalized = false;  // version 2
  std::vector<CommRecord> records;
  std::vector<DataProblem> problems;
};

ComputeData load_compute_data(const std::string& path, const LoadOptions& options = {});
CommData load_comm_data(const std::string& path, const LoadOptions& options = {});
CollectiveData load_collective_data(const std::string& path, const LoadOptions& options = {});
// Several compute files as one set (records keep their file index and batch;
// pool ids are per file). Error when they mix normalized and raw ground truth.
ComputeData merge_compute_data(std::vector<ComputeData> files);
// "normalized (version 2)" or "raw medians", for reports.
std::string ground_truth_label(bool normalized);

// Tells `reporter` "<path>: skipped N bad record(s)" and the first few
// problems (nothing when there are none).
void report_problems(const std::string& path, const std::vector<DataProblem>& problems,
                     Reporter& reporter);

}  // namespace embshard
