// Test support: deterministic (indices, offsets, lengths) batches in the
// layout of Meta's dlrm_datasets, with empty bags and a table without lookups.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "support/pt_writer.h"

namespace embshard::testing {

struct DlrmBatch {
  int64_t tables = 0, batch = 0;
  std::vector<int64_t> indices, offsets, lengths;  // lengths row-major (T, B)
};

// Table t draws bag lengths in 0..max_pooling (so some bags are empty) and
// rows from a skewed distribution over 1..(50 * (t + 1)) rows; table
// `empty_table` (if in range) has no lookups at all.
inline DlrmBatch make_dlrm_batch(int64_t tables, int64_t batch, uint64_t seed,
                                 int max_pooling = 5, int64_t empty_table = 1) {
  DlrmBatch d;
  d.tables = tables;
  d.batch = batch;
  std::mt19937_64 rng(seed);
  d.offsets.push_back(0);
  for (int64_t t = 0; t < tables; ++t) {
    const int64_t rows = 50 * (t + 1);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = t == empty_table ? 0 : static_cast<int64_t>(rng() % (max_pooling + 1));
      for (int64_t k = 0; k < len; ++k) {
        // The product of two uniforms: small rows are hot, as in real traces.
        const int64_t a = static_cast<int64_t>(rng() % rows), c = static_cast<int64_t>(rng() % rows);
        d.indices.push_back(a * c / rows);
      }
      d.lengths.push_back(len);
      d.offsets.push_back(static_cast<int64_t>(d.indices.size()));
    }
  }
  return d;
}

inline PtTensorSpec tensor_spec(const std::vector<int64_t>& values, std::vector<int64_t> sizes,
                                bool int32) {
  PtTensorSpec t;
  t.storage_type = int32 ? "IntStorage" : "LongStorage";
  t.sizes = std::move(sizes);
  const std::vector<int64_t>* v = &values;
  t.fill = [v](uint64_t begin, uint64_t count, int64_t* out) {
    for (uint64_t i = 0; i < count; ++i) out[i] = (*v)[begin + i];
  };
  return t;
}

// The three tensors of a batch; `index_int32` picks the indices' dtype
// (offsets and lengths are int64, as in the dataset).
inline std::vector<PtTensorSpec> batch_tensors(const DlrmBatch& d, bool index_int32) {
  return {tensor_spec(d.indices, {static_cast<int64_t>(d.indices.size())}, index_int32),
          tensor_spec(d.offsets, {static_cast<int64_t>(d.offsets.size())}, false),
          tensor_spec(d.lengths, {d.tables, d.batch}, false)};
}

}  // namespace embshard::testing
