// Synthetic workloads calibrated to the published dlrm_datasets statistics.
//
// The generator constructs, rather than samples, the aggregate statistics: it
// derives from the published histograms how many lookups and distinct rows
// each reuse bin holds, splits every bin over the tables (a per-table skew
// tilt, then iterative proportional fitting so both marginals hold), and then
// emits each table's trace from rows whose access counts lie in their bin's
// range. Average pooling factor, unique-rows ratio and both reuse histograms
// therefore match for any seed; the seed decides the tables (rows, dims,
// pooling factors, skew), row ids, order of lookups and bag lengths.
// docs/workloads.md explains the design.
//
// Memory: the plan is O(tables x bins); traces are generated and written one
// table at a time (write_synth_traces), so peak memory is about one table's
// trace, even at 100 tables x batch 65536.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embshard/workload/stats.h"
#include "embshard/workload/table.h"
#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"

namespace embshard {

struct SynthOptions {
  std::string profile = "2021";
  int64_t num_tables = 100;
  int64_t batch_size = 4096;
  uint64_t seed = 1;
  std::vector<int> dims = {16, 32, 64, 128};  // each table draws one
  uint32_t index_bytes = 4;
  // Stress tables for the row-wise and data-parallel evaluation (docs/
  // sharding_types.md): the first `huge_tables` tables get `huge_rows` rows
  // (their accesses spread over them), the next `hot_tables` have every reuse
  // bin's rows and lookups scaled by a whole factor so that their pooling
  // factor is about `hot_pooling`. Off by default; when on, the pool no longer matches the
  // published aggregate statistics.
  int64_t huge_tables = 0, huge_rows = 0;
  int64_t hot_tables = 0;
  double hot_pooling = 0;
};

// Throws Error naming the option and value (profile, tables, batch, dims,
// index bytes).
void validate_synth_options(const SynthOptions& options);

// One table, decided before its trace exists.
struct SynthTablePlan {
  std::string name;
  int64_t rows = 0;  // max(drawn rows, distinct rows it needs)
  int dim = 0;
  uint64_t seed = 0;               // drives this table's trace alone
  double empty_bag_share = 0;      // share of bags left empty (multi-hot tables)
  int bag_shape = 1;               // gamma shape of bag lengths (1: most uneven)
  ReuseCounts rows_per_bin{};      // distinct rows to create per reuse bin
  ReuseCounts lookups_per_bin{};   // their total accesses per bin

  int64_t num_indices() const;
  int64_t unique_rows() const;
};

struct SynthPlan {
  SynthOptions options;
  PublishedStats target;
  std::vector<SynthTablePlan> tables;
};

// Draws the tables and splits every reuse bin's rows and lookups over them.
SynthPlan plan_synth(const SynthOptions& options, const PublishedStats& target);

// The trace of plan.tables[t]: deterministic in (options.seed, t).
TableTrace generate_table_trace(const SynthPlan& plan, size_t t);

// Called after each table: (index, count, spec of what was generated).
using SynthProgress = std::function<void(size_t, size_t, const TableSpec&)>;

// Generates every table in order and appends it to `writer` (which the caller
// finishes), holding one table's trace at a time. Returns the specs with the
// statistics measured on the generated traces.
std::vector<TableSpec> write_synth_traces(const SynthPlan& plan, TraceWriter& writer,
                                          const SynthProgress& progress = {});

// plan_synth + write_synth_traces into `out_dir` (trace.bin, then tables.json).
Workload synthesize_workload(const SynthOptions& options, const PublishedStats& target,
                             const std::string& out_dir, const SynthProgress& progress = {});

// A plan whose tables follow `specs` one for one (names, rows, dims, pooling
// factors, distinct rows and reuse histograms, as table specs give them, at
// their batch size): traces for tables a user describes, so that plans for
// them can be measured. Each table's seed is mixed from `seed` as in plan_synth.
SynthPlan plan_synth_from_specs(const Workload& specs, uint64_t seed, uint32_t index_bytes);

// plan_synth_from_specs + write_synth_traces into `out_dir`.
Workload synthesize_from_specs(const Workload& specs, uint64_t seed, uint32_t index_bytes,
                               const std::string& out_dir, const SynthProgress& progress = {});

}  // namespace embshard
