// `bench comm`: measured all-to-all costs of random placements, one MPI rank per device.
//
// NeuroShard's communication data: each sample is a placement of random tables
// on N devices, reduced to what the all-to-alls see (each device's dim sum),
// plus per-device delays that stand for stragglers (devices whose compute
// finishes late). Every rank times the forward all-to-all of pooled embeddings
// (from the end of its own delay until its all-to-all completes, so waiting
// for stragglers counts) and the backward all-to-all of their gradients (after
// a barrier, no delay): `repeats` runs after `warmup` runs, interleaved with as
// many runs of a fixed reference exchange, and normalized by each rank's quiet
// time of it (measure/alltoall.h); records keep raw and normalized figures.
//
// The sample drawing, option checks and header are pure and live in the core
// library; run_comm_bench (the MPI part) lives in the embshard_mpi library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/measure/alltoall.h"
#include "embshard/cost/comm_model.h"

namespace embshard {

class Reporter;

// Test-only fault injection: a rank that dies or hangs at a sample.
enum class CommFault { kNone, kExit, kHang };

struct CommBenchOptions {
  std::string out_path;
  int64_t samples = 100;
  int64_t batch = 4096;  // global batch; every rank sends batch / N rows to each peer
  uint64_t seed = 0;
  double max_delay_ms = 5;
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};
  // Tables per device on average, drawn per sample in [min, max]: a sample has
  // N * min .. N * max tables.
  std::vector<int> tables_per_device = {1, 15};
  int warmup = 3;
  int repeats = 10;
  int reference_runs = 200;  // of the reference exchange, for its quiet time (new files)
  // Each sample is measured `passes` times, in passes over a block of samples
  // that takes about `pass_block_s` in its first pass (so that one sample's
  // passes lie seconds apart); a rank's figure is the mean of its fastest
  // half of the passes (fastest_half_mean): a stretch in which the machine's
  // neighbours slow the exchanges (the probe does not cancel it) lifts one
  // pass, not all of them.
  int passes = 1;
  double pass_block_s = 10;
  // A new file takes every rank's reference exchange time from this earlier
  // `bench comm` file (same ranks and batch) instead of measuring it: one
  // scale for a set of files (empty: measure).
  std::string reference_from;
  int probe_dim = kReferenceExchangeDim;  // the reference exchange's columns per rank
  double timeout_s = 60;  // every collective must complete within this
  int64_t show = 12;      // records printed at the end
  // Measure the row-wise and data-parallel collectives of drawn loads
  // (draw_collective_load) instead of the pooled all-to-alls.
  bool collectives = false;
  // Hidden test hooks: rank `fault_rank` exits or hangs at sample `fault_sample`.
  CommFault fault = CommFault::kNone;
  int fault_rank = -1;
  int64_t fault_sample = -1;
};

// One sample: a placement of tables on devices and the devices' delays.
struct CommSample {
  std::vector<int> table_dims;     // per drawn table
  std::vector<int> table_device;   // per drawn table: its device
  double move_share = 0;           // share of tables moved off the greedy placement
  std::vector<int64_t> dim_sums;   // per device: sum of its tables' dims
  std::vector<int> num_tables;     // per device
  std::vector<double> delays_ms;   // per device, in [0, max_delay_ms], min 0
};

// Sample `index` of a run on `num_devices` devices: a pure function of
// (seed, num_devices, index, options), so that a resumed run draws exactly what
// an uninterrupted one would have. Tables get random dims from `dims`; a greedy
// (largest dim first, each to the device with the smallest dim sum) places
// them, then a random share (uniform 0..1) of them moves to random devices, so
// that unbalanced placements are drawn too. Delays are uniform in
// [0, max_delay_ms] minus their minimum.
CommSample draw_comm_sample(const CommBenchOptions& options, int num_devices, int64_t index);

// The collectives of sample `index` (pure, like draw_comm_sample): the
// sample's dim sums as each device's row-shard columns; each device's row
// shards receive the indices of the global batch for its tables (8 bytes a
// lookup, pooling factor log-uniform in 1..200 per sample) but for its own
// slice; and, in three samples of four, an all-reduce of log-uniform 64 KiB
// .. 64 MiB of replicated tables' gradients.
CollectiveLoad draw_collective_load(const CommBenchOptions& options, int num_devices,
                                    int64_t index);

// Throws Error naming the option and its value when options cannot run on
// `num_devices` ranks (e.g. a batch not divisible by N, counts past MPI's int).
void check_comm_options(const CommBenchOptions& options, int num_devices);

// Every rank's reference exchange time in a `bench comm` file's header. Error
// naming `path` and the field when the file has none (version 1) or was
// measured over other ranks, at another batch or with a reference exchange of
// other than `probe_dim` columns (another exchange).
std::vector<double> exchange_references_of(const nlohmann::json& header, const std::string& path,
                                           int num_devices, int64_t batch, int probe_dim);

// The header line: format, versions, machine (rank 0's, plus every rank's
// hostname), N and the options that shape the records.
nlohmann::json comm_bench_header(const CommBenchOptions& options, int num_devices,
                                 const std::vector<std::string>& rank_hosts,
                                 const std::vector<double>& reference_ms);

// The header fields a resumed run must match.
const std::vector<std::string>& comm_bench_must_match();

// The last `show` records of a `bench comm` file as a table, then the medians
// over all records of the slowest rank's forward and backward. For a
// --collectives file, beside them the analytic formula's figures (the shipped
// calibration) and its error against the measurements.
std::string comm_records_table(const std::string& path, int64_t show);

struct CommBenchResult {
  int rank = 0;
  int num_ranks = 1;
  int64_t records = 0;  // records in the output file (rank 0 only)
};

// Runs the benchmark under MPI (MPI_Init .. MPI_Finalize inside), resuming the
// output file. Rank 0 writes the file and reports progress, and throws Error when
// the options or the existing file refuse the run; the other ranks then return
// normally, so that mpirun, which ends the job when a rank fails, does not
// end rank 0 before it has said why. Failures during the run
// (a collective past --timeout-s, an error on any rank) print the rank and the
// cause and MPI_Abort the job. Defined in embshard_mpi.
CommBenchResult run_comm_bench(const CommBenchOptions& options, Reporter& reporter);

}  // namespace embshard
