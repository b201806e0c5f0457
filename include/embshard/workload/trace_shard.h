// What a piece of a table sees of its trace: a row shard's bucketized lookups
// (TorchRec's row-wise input distribution) and a replica's slice of the batch.
#pragma once

#include <cstdint>
#include <vector>

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

// The share of the trace's lookups falling in each of `bins` equal row
// ranges of a `rows`-row table (sums to 1; all equal when the trace is
// empty). Error on an index outside [0, rows).
std::vector<double> row_lookup_shares(const TableTrace& trace, int64_t rows, int bins);

}  // namespace embshard
