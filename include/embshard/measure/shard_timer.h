// The one shard timer: a workload's shards timed on an executor with the
// workload's real traces. bench compute, the measured model, eval and the
// ranking check all measure through it.
//
// time() is a plain timer: the medians of a shard's own steps. measure() is
// the ground truth: the shard's steps interleaved with a fixed reference
// probe (measure/interleaved.h), so that a slow phase of a shared machine
// slows both and cancels in their ratio; the shard's cost is the median ratio
// times the probe's reference (its quiet time, estimated once per run).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/measure/interleaved.h"
#include "embshard/kernel/executor.h"
#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"

namespace embshard {

// One table of a shard: which workload table, at which dim; optionally a
// row piece of it (rows [row_offset, row_offset + rows): the trace's lookups
// in that range, bucketized and remapped) or a replica's slice of the batch
// (slice of slices: the other samples' bags empty); stored as `data_type`
// (bench compute may draw another type than the workload table's).
struct ShardTable {
  int table = 0;
  int dim = 0;
  int64_t row_offset = 0;
  int64_t rows = 0;  // 0: all the table's rows
  int batch_slice = 0, batch_slices = 1;
  DataType data_type = DataType::kFp32;
  bool operator==(const ShardTable&) const = default;
};

struct ShardTiming {
  double fwd_ms = 0, bwd_ms = 0, total_ms = 0;
};

// Shards span six decades (a microsecond for a tiny table, a second for
// gigabytes) against one probe of some milliseconds, so the ratio bound is
// wide; it still catches a broken timer. An oversubscribed machine (eight MPI
// ranks on two cores) slows the probe several times over, so the drift bound
// is 10x: past it the reference does not describe the machine.
inline InterleavedOptions shard_interleave_defaults() {
  InterleavedOptions o;
  o.max_ratio = 1e6;
  o.probe_drift_bound = 10;
  return o;
}

struct ShardTimerOptions {
  int warmup = 5;    // untimed steps of a shard
  int repeats = 10;  // time(): timed steps (medians)
  PoolingMode pooling = PoolingMode::kSum;
  OptimizerType optimizer = OptimizerType::kRowWiseAdagrad;
  bool forward_only = false;  // inference: shards step their forward alone (the probe trains)
  InterleavedOptions interleave = shard_interleave_defaults();  // measure()
  ProbeReferenceOptions reference;     // the probe's reference, when estimated here
};

// A measure()d shard: its normalized figures (fwd and bwd keep the raw
// steps' split of the total), the raw medians, and the interleaving.
struct ShardMeasurement {
  ShardTiming normalized, raw;
  InterleavedResult interleaved;
};

class ShardTimer {
 public:
  // `workload` must have a trace; both it and `executor` must outlive the timer.
  ShardTimer(const Workload& workload, Executor& executor, ShardTimerOptions options);
  ~ShardTimer();

  // Prepares the shard on the executor and times it. Error naming the table
  // when a table id or dim is invalid.
  ShardTiming time(const std::vector<ShardTable>& shard);

  // The reference probe's quiet time. Estimated on first use unless set from
  // an earlier run's file (one file, or a set of files, keeps one scale).
  const ProbeReference& probe_reference();
  void set_probe_reference(const ProbeReference& reference);
  // Times against `owner`'s probe instance (same executor) instead of one of
  // its own: work measured by two timers is then on one probe, whose memory
  // (huge pages or not) is the same for both. `owner` must outlive this timer.
  void share_probe(ShardTimer& owner);
  // Drift-cancelled measurement; `label` names the shard in errors.
  ShardMeasurement measure(const std::vector<ShardTable>& shard, const std::string& label);

  // The lookups a shard table executes: its table's trace, or a row piece's
  // bucketized lookups, or a replica's batch slice (cached while they fit).
  const TableTrace& piece_trace(const ShardTable& s);

  const Workload& workload() const { return workload_; }
  Executor& executor() { return executor_; }
  const ShardTimerOptions& options() const { return options_; }

 private:
  const TableTrace& trace(int table);
  std::unique_ptr<PreparedShard> prepare(const std::vector<ShardTable>& shard);
  PreparedShard& probe();

  const Workload& workload_;
  Executor& executor_;
  ShardTimerOptions options_;
  std::unique_ptr<TraceReader> reader_;
  // Traces stay in memory across shards while they fit a budget.
  std::map<int, TableTrace> traces_;
  // Row pieces' and slices' traces: (table, row offset, rows, slice, slices).
  std::map<std::tuple<int, int64_t, int64_t, int, int>, TableTrace> piece_traces_;
  uint64_t trace_bytes_ = 0;
  std::vector<TableTrace> probe_traces_;
  std::unique_ptr<PreparedShard> probe_;
  ShardTimer* probe_owner_ = nullptr;
  bool has_reference_ = false;
  ProbeReference reference_;
  uint64_t measured_ = 0;  // shards measured: seeds each one's round order
};

// The reference probe: a fixed synthetic shard (a DRAM-sized table, a skewed
// mid-sized one and a hot small one at batch 2048), the same on every run and
// for every workload, so that normalized costs share one scale. Its
// description for file headers.
nlohmann::json reference_probe_json();

}  // namespace embshard
