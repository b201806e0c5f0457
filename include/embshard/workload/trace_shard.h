// What a piece of a table sees of its trace: a row shard's bucketized lookups
// (TorchRec's row-wise input distribution) and a replica's slice of the batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "embshard/workload/stats.h"
#include "embshard/workload/table.h"
#include "embshard/workload/trace.h"

namespace embshard {

// The lookups of `trace` whose rows fall in [row_offset, row_offset + rows),
// remapped to local rows (index - row_offset), bag by bag: the batch keeps
// its size, bags keep their order, a bag may become empty. Error when the
// range is empty or negative.
TableTrace row_shard_trace(const TableTrace& trace, int64_t row_offset, int64_t rows);

// A replica's share of the batch: the bags of samples [B*slice/slices,
// B*(slice+1)/slices) kept, every other bag empty (the executor's batch is
// one per fused call). Error when slice is not in [0, slices).
TableTrace batch_slice_trace(const TableTrace& trace, int slice, int slices);

// Sorts non-negative row indices ascending: an LSD radix sort, 11 bits a
// pass, as many passes as the largest index needs (std::sort is its
// reference). Error on a negative index.
void sort_rows(std::vector<int64_t>& rows);

// The counts of the lookups of a table whose rows fall in [row_offset,
// row_offset + rows), from its indices sorted ascending: the range is one
// slice of them and each distinct row one run. The same counts as
// compute_table_stats(row_shard_trace(trace, row_offset, rows), rows), its
// reference, without copying the trace. Error on an empty or negative range.
TableStats row_range_stats(std::span<const int64_t> sorted, int64_t batch_size,
                           int64_t row_offset, int64_t rows);

// What a piece of a table serves, measured from the workload's trace: its
// pooling factor, distinct rows and both reuse histograms on its own lookups,
// the figures bench compute records for the pieces the cost models learn
// from (a row block of a hot table can hold most of its reuse, or none).
// A table's indices are read and sorted once and kept until another table
// is asked for (the planner asks for a table's row blocks together; its
// trace is read again only for a replica's slice); results are kept per
// piece. Thread-safe.
class PieceStats {
 public:
  explicit PieceStats(std::string trace_path);
  ~PieceStats();
  // `spec` (table `table` of the trace) with rows set to `rows` and its
  // trace-derived fields those of rows [row_offset, row_offset + rows) on
  // batch slice `slice` of `slices` (a replica's share of the batch). Errors
  // name the trace file and the table: a range outside the table, an index
  // outside its rows.
  TableSpec piece(int table, TableSpec spec, int64_t row_offset, int64_t rows, int slice = 0,
                  int slices = 1);
  // The share of the table's lookups whose row falls in [row_offset,
  // row_offset + rows), counted (rows / spec.rows for a table with none).
  double lookup_share(int table, const TableSpec& spec, int64_t row_offset, int64_t rows);

 private:
  void load(int table, const TableSpec& spec);
  // The piece's counts, measured once (the caller holds mutex_).
  const TableStats& stats(int table, const TableSpec& spec, int64_t row_offset, int64_t rows,
                          int slice, int slices);

  std::mutex mutex_;
  TraceReader reader_;
  int loaded_ = -1;              // the table whose indices are held
  int64_t batch_size_ = 0;
  std::vector<int64_t> sorted_;  // its indices, ascending
  TableTrace trace_;             // its trace, once a replica's slice asks for it
  std::map<std::tuple<int, int64_t, int64_t, int, int>, TableStats> done_;
};

}  // namespace embshard
