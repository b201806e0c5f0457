// Optimized TBE backward fused with the optimizer update.
//
// Per table, (row << 32 | bag) keys are radix-sorted by row, with the
// per-sample weights (if any) moved alongside, so that the update loop reads
// everything it needs sequentially except the rows themselves. The sort is
// stable, so each row's occurrences stay in position order and the gradient
// is summed in the same order as the reference. The gradient of each distinct
// row is segment-summed into a per-thread accumulator and the optimizer is
// applied once per row. Threads split the sorted keys of a table at row
// boundaries, so no two threads ever write the same row and no locks or
// atomics are needed. All indices are checked (while building the keys)
// before any weight is written.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "embshard/kernel/precision.h"
#include "kernel/tbe_common.h"

namespace embshard {

struct TbeWorkspace::Impl {
  struct TableScratch {
    std::vector<uint64_t> keys, tmp;    // row << 32 | bag
    std::vector<float> weights, tmp_weights;  // per-sample weights, sorted with keys
    const uint64_t* sorted = nullptr;   // keys or tmp, whichever holds the result
    const float* sorted_weights = nullptr;
    int64_t bad_position = -1;          // first out-of-range index, -1 if none
  };
  std::vector<TableScratch> tables;
};

TbeWorkspace::TbeWorkspace() : impl_(new Impl) {}
TbeWorkspace::~TbeWorkspace() { delete impl_; }

namespace {

using TableScratch = TbeWorkspace::Impl::TableScratch;

// Occurrences ahead whose weight and gradient rows are prefetched.
constexpr int64_t kUpdatePrefetchDistance = 16;
// 11-bit digits: the 2048 counters of a pass stay in L1; 2M rows take 2 passes.
constexpr int kMaxDigitBits = 11;
constexpr int kMaxPasses = 3;  // rows < 2^31

inline uint32_t row_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
inline uint32_t bag_of(uint64_t key) { return static_cast<uint32_t>(key); }

int row_bits(int64_t rows) {
  int bits = 0;
  while (bits < 31 && (int64_t{1} << bits) < rows) ++bits;
  return bits;
}

// Stable LSD radix sort of keys by row; `values` (may be null) move with
// them. Leaves the result in keys/values or tmp/tmp_values and says which.
bool radix_sort_by_row(uint64_t* keys, uint64_t* tmp, float* values, float* tmp_values,
                       int64_t n, int bits) {
  if (bits == 0 || n < 2) return false;
  const int passes = (bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (bits + passes - 1) / passes;
  const uint32_t mask = (1u << digit_bits) - 1;
  static thread_local uint32_t counts[kMaxPasses][1u << kMaxDigitBits];
  for (int p = 0; p < passes; ++p) std::fill_n(counts[p], mask + 1, 0u);
  for (int64_t i = 0; i < n; ++i) {  // every pass's histogram in one read
    const uint32_t row = row_of(keys[i]);
    for (int p = 0; p < passes; ++p) ++counts[p][(row >> (p * digit_bits)) & mask];
  }
  bool in_tmp = false;
  for (int p = 0; p < passes; ++p) {
    const int shift = 32 + p * digit_bits;
    const uint64_t* src = in_tmp ? tmp : keys;
    uint64_t* dst = in_tmp ? keys : tmp;
    if (counts[p][(src[0] >> shift) & mask] == n) continue;  // one digit: already sorted
    uint32_t sum = 0;
    for (uint32_t d = 0; d <= mask; ++d) {
      const uint32_t c = counts[p][d];
      counts[p][d] = sum;
      sum += c;
    }
    if (values != nullptr) {
      const float* vsrc = in_tmp ? tmp_values : values;
      float* vdst = in_tmp ? values : tmp_values;
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t to = counts[p][(src[i] >> shift) & mask]++;
        dst[to] = src[i];
        vdst[to] = vsrc[i];
      }
    } else {
      for (int64_t i = 0; i < n; ++i) dst[counts[p][(src[i] >> shift) & mask]++] = src[i];
    }
    in_tmp = !in_tmp;
  }
  return in_tmp;
}

// Builds and sorts one table's keys; stops at the first out-of-range index.
void build_sorted_keys(const FusedBatch& batch, int table, TableScratch& s) {
  const TableBatch& t = batch.tables[table];
  const int64_t nnz = t.offsets[batch.batch_size];
  const bool weighted = t.per_sample_weights != nullptr;
  s.keys.resize(nnz);
  s.tmp.resize(nnz);
  s.weights.resize(weighted ? nnz : 0);
  s.tmp_weights.resize(weighted ? nnz : 0);
  s.bad_position = -1;
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    for (int64_t i = t.offsets[b]; i < t.offsets[b + 1]; ++i) {
      const int64_t r = t.indices[i];
      if (!detail::index_in_range(r, t.rows)) {
        s.bad_position = i;
        return;
      }
      s.keys[i] = (static_cast<uint64_t>(r) << 32) | static_cast<uint64_t>(b);
    }
  }
  if (weighted) std::copy_n(t.per_sample_weights, nnz, s.weights.data());
  const bool in_tmp = radix_sort_by_row(s.keys.data(), s.tmp.data(),
                                        weighted ? s.weights.data() : nullptr,
                                        s.tmp_weights.data(), nnz, row_bits(t.rows));
  s.sorted = in_tmp ? s.tmp.data() : s.keys.data();
  s.sorted_weights = weighted ? (in_tmp ? s.tmp_weights.data() : s.weights.data()) : nullptr;
}

struct UpdateArgs {
  const FusedBatch* batch;
  const TableBatch* table;
  int table_id;
  const TableScratch* scratch;
  const float* grad;  // grad_output + this table's column offset
  int64_t grad_stride;
  OptimizerConfig optimizer;
};

// `i` indexes the sorted keys.
inline float occurrence_scale(const UpdateArgs& a, int64_t i, uint32_t bag) {
  const TableBatch& t = *a.table;
  if (a.batch->pooling == PoolingMode::kMean) {
    return detail::mean_scale(t.offsets[bag + 1] - t.offsets[bag]);
  }
  return a.scratch->sorted_weights != nullptr ? a.scratch->sorted_weights[i] : 1.0f;
}

// The fp32 update of one row's values `w` (the table's own row for fp32, a
// copy for fp16 and bf16).
inline void update_values(const UpdateArgs& a, uint32_t row, const float* grad, float* w) {
  const TableBatch& t = *a.table;
  const int dim = t.dim;
  const float lr = a.optimizer.learning_rate;
  switch (a.optimizer.type) {
    case OptimizerType::kSgd:
      for (int d = 0; d < dim; ++d) w[d] -= lr * grad[d];
      return;
    case OptimizerType::kRowWiseAdagrad: {
      float sum_sq = 0.0f;
      for (int d = 0; d < dim; ++d) sum_sq += grad[d] * grad[d];
      t.momentum[row] += sum_sq / static_cast<float>(dim);
      const float step = lr / (std::sqrt(t.momentum[row]) + a.optimizer.eps);
      for (int d = 0; d < dim; ++d) w[d] -= step * grad[d];
      return;
    }
    case OptimizerType::kAdam: {
      const detail::AdamStep adam(a.optimizer);
      float* m = t.exp_avg + int64_t{row} * dim;
      float* v = t.exp_avg_sq + int64_t{row} * dim;
      for (int d = 0; d < dim; ++d) adam.apply(grad[d], w[d], m[d], v[d]);
      return;
    }
  }
}

inline void apply_update(const UpdateArgs& a, uint32_t row, const float* grad) {
  const TableBatch& t = *a.table;
  if (t.type == DataType::kFp32) {
    update_values(a, row, grad, t.weights + static_cast<int64_t>(row) * t.dim);
    return;
  }
  // fp16 / bf16: widened, updated in fp32, rounded back.
  alignas(64) float w[detail::kMaxDim];
  uint16_t* h = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(t.packed) + row * t.row_bytes());
  widen_halves(t.type, h, t.dim, w);
  update_values(a, row, grad, w);
  const OptimizerConfig& o = a.optimizer;
  if (!o.stochastic_rounding) {
    narrow_halves(t.type, w, t.dim, h);
    return;
  }
  for (int d = 0; d < t.dim; ++d) {
    h[d] = round_half(t.type, w[d], true, rounding_random(o.seed, o.step, a.table_id, row, d));
  }
}

// Segment-sums and updates the distinct rows of sorted keys [begin, end),
// which starts and ends at row boundaries.
void update_rows(const UpdateArgs& a, int64_t begin, int64_t end, float* acc) {
  const TableBatch& t = *a.table;
  const uint64_t* keys = a.scratch->sorted;
  const int dim = t.dim;
  int64_t i = begin;
  while (i < end) {
    const uint32_t row = row_of(keys[i]);
    for (int d = 0; d < dim; ++d) acc[d] = 0.0f;
    for (; i < end && row_of(keys[i]) == row; ++i) {
      if (i + kUpdatePrefetchDistance < end) {
        const uint64_t ahead = keys[i + kUpdatePrefetchDistance];
        if (row_of(ahead) != row_of(keys[i + kUpdatePrefetchDistance - 1])) {  // once per row
          detail::prefetch_bytes_for_write(t.row_data(row_of(ahead)), t.row_bytes());
        }
        detail::prefetch_row(a.grad + int64_t{bag_of(ahead)} * a.grad_stride, dim);
      }
      const uint32_t bag = bag_of(keys[i]);
      const float scale = occurrence_scale(a, i, bag);
      const float* g = a.grad + int64_t{bag} * a.grad_stride;
      for (int d = 0; d < dim; ++d) acc[d] += scale * g[d];
    }
    apply_update(a, row, acc);
  }
}

// Start of thread `part` of `parts` in sorted keys, moved to a row boundary.
int64_t partition_start(const uint64_t* keys, int64_t n, int part, int parts) {
  int64_t p = n * part / parts;
  while (p > 0 && p < n && row_of(keys[p]) == row_of(keys[p - 1])) ++p;
  return p;
}

}  // namespace

Status tbe_backward_update(const FusedBatch& batch, const float* grad_output,
                           const OptimizerConfig& optimizer, int num_threads,
                           TbeWorkspace& workspace) {
  Status s = detail::check_arguments(batch, &optimizer);
  if (!s.ok()) return s;
  if (num_threads < 1) return detail::invalid_argument(-1, num_threads, "num_threads < 1");
  const int num_tables = static_cast<int>(batch.tables.size());
  std::vector<TableScratch>& scratch = workspace.impl().tables;
  if (scratch.size() < batch.tables.size()) scratch.resize(batch.tables.size());
  const int64_t total_dim = batch.total_dim();
  bool any_bad = false;
#pragma omp parallel num_threads(num_threads)
  {
#pragma omp for schedule(dynamic, 1)
    for (int t = 0; t < num_tables; ++t) build_sorted_keys(batch, t, scratch[t]);
#pragma omp single
    for (int t = 0; t < num_tables; ++t) any_bad = any_bad || scratch[t].bad_position >= 0;
    // (implicit barrier after single: every thread sees any_bad)
    if (!any_bad) {
      alignas(64) float acc[detail::kMaxDim];
      const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
      for (int t = 0; t < num_tables; ++t) {
        const UpdateArgs args{
            &batch,    &batch.tables[t], t, &scratch[t], grad_output + batch.column_offset(t),
            total_dim, optimizer};
        const int64_t nnz = batch.tables[t].offsets[batch.batch_size];
        update_rows(args, partition_start(scratch[t].sorted, nnz, tid, nt),
                    partition_start(scratch[t].sorted, nnz, tid + 1, nt), acc);
      }
    }
  }
  for (int t = 0; t < num_tables; ++t) {
    const int64_t pos = scratch[t].bad_position;
    if (pos >= 0) {
      return detail::index_out_of_range(t, pos, batch.tables[t].indices[pos], batch.tables[t].rows);
    }
  }
  return {};
}

}  // namespace embshard
