// Importing Meta's dlrm_datasets files: a torch.save'd tuple
// (indices, offsets, lengths), gzip'd or not, into a workload directory.
//
// indices: 1-D int32/int64; offsets: 1-D, T*B+1 entries, cumulative over all
// tables, table-major (table t's bags are offsets[t*B .. t*B+B]); lengths:
// (T, B) with lengths[t][b] = offsets[t*B+b+1] - offsets[t*B+b]. The file is
// read without libtorch, streaming: peak memory is about offsets plus a few
// copies of the largest table's indices, not the file.
#pragma once

#include <cstdint>
#include <string>

#include "embshard/workload/workload.h"

namespace embshard {

class Reporter;

struct ImportOptions {
  int dim = 64;              // the dataset has no dims: every table gets this one
  uint32_t index_bytes = 0;  // trace index width, 4 or 8; 0 = as the file's indices
  Reporter* reporter = nullptr;  // bytes read, now and then, for big files (null: silent)
  uint64_t progress_min_bytes = uint64_t{256} << 20;  // files smaller than this stay quiet
};

// Reads `pt_path` and writes trace.bin and tables.json into `out_dir` (created
// if missing). Tables are named "t<N>", rows = max index + 1 (1 for a table
// without lookups), with pooling factor, unique rows and both reuse histograms
// computed from the batch. Throws Error naming the file, the field and the
// value on anything malformed; on error no new file is left in `out_dir`, and
// `out_dir` itself is removed if this call created it.
Workload import_pt(const std::string& pt_path, const std::string& out_dir,
                   const ImportOptions& options = {});

}  // namespace embshard
