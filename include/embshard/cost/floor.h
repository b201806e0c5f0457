// Physical floors: the least time fused embedding work or a device's
// all-to-alls can take, from the bytes they must move and the bandwidths
// measured on the hardware a model set describes. A prediction under its
// floor is impossible; one far over it says the work is bound by something
// other than bytes (launches, sorting, latency) or that the model errs.
// docs/guide.md ("Read the report") says what they are for users.
#pragma once

#include <cstdint>
#include <string>

#include "embshard/cost/compute_model.h"
#include "embshard/workload/data_type.h"

namespace embshard {

// What a model set says its hardware moves. 0: unknown (no floor).
struct Bandwidths {
  // Device memory traffic, bytes read plus bytes written per second (1e9),
  // as a large device-to-device copy measures it (a copy of N bytes in t
  // seconds: 2N / t).
  double memory_gbps = 0;
  std::string memory_source;  // where the figure comes from, for reports
  // One device's all-to-all link, bytes sent (or received) per second (1e9).
  double link_gbps = 0;
  std::string link_source;
};

// The bytes one fused forward + backward + update of a piece must move at
// `batch` (TableFeatures as the cost models see it: a replica's pooling
// factor is its share of the lookups, its outputs its slice of the batch):
// its distinct rows (estimate_distinct_rows, stored as `type`) read once and
// written once, their optimizer state (`state_bytes_per_row`) read and written, its pooled outputs
// written and their gradients read. Not counted, so that it stays a floor: rows read again, lookup
// indices, sorting, the cache's help with small tables.
struct WorkBytes {
  double rows = 0, state = 0, outputs = 0;
  double total() const { return rows + state + outputs; }
};
WorkBytes fused_work_bytes(const TableFeatures& piece, int64_t batch, DataType type,
                           int64_t state_bytes_per_row);

// `bytes` at `gbps` (1e9 bytes/s) in ms; 0 where the bandwidth is unknown.
double floor_ms(double bytes, double gbps);

// The bytes one device sends or receives (the busier) in its forward pooled
// all-to-all and again in the backward: its dim sum of `total_dim` over N
// devices at `batch`. 0 for one device.
double alltoall_floor_bytes(double dim_sum, double total_dim, int devices, int64_t batch);

// A prediction against its floor: under it, or more than kFarOverFloor times
// over it: the figures to look at first.
constexpr double kFarOverFloor = 10.0;
enum class FloorCheck { kWithin, kUnder, kFarOver };
FloorCheck check_floor(double ms, double floor);

}  // namespace embshard
