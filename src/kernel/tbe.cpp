// Optimized TBE kernels (FBGEMM's design on CPU).
//
// Forward: each thread pools a contiguous range of bags of every table,
// prefetching the rows of lookups a fixed distance ahead so that DRAM misses
// overlap; accumulators live in registers for the common dims (templates) and
// in the output row otherwise.
// The backward is in tbe_backward.cpp.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "embshard/kernel/precision.h"
#include "kernel/tbe_common.h"

namespace embshard {

namespace {

// Rows are prefetched this many lookups ahead. The distance covers DRAM
// latency (~100 ns) with about 96 cache lines in flight, so narrow rows look
// further ahead than wide ones (dim 128: 12 lookups; dim 32 and less: 32).
int64_t prefetch_distance(int dim) {
  const int lines = (dim * static_cast<int>(sizeof(float)) + 63) / 64;
  return std::clamp<int64_t>(96 / lines, 4, 32);
}

// The first bad index a thread has seen, in (table, position) order.
struct BadIndex {
  int table = -1;
  int64_t position = -1;
  int64_t value = 0;
  void note(int t, int64_t pos, int64_t v) {
    if (table < 0 || t < table || (t == table && pos < position)) {
      table = t;
      position = pos;
      value = v;
    }
  }
};

struct ForwardArgs {
  const TableBatch* table;
  int table_id;
  PoolingMode pooling;
  float* output;        // row 0 of this table's columns
  int64_t out_stride;   // total_dim
  bool stream;          // whole 64-byte lines: store without reading them first
};

// Outputs at least this large cannot stay in cache for their consumer, so the
// forward writes them with streaming stores: a normal store first reads each
// line (read-for-ownership), a third more traffic for a write-once output.
constexpr int64_t kStreamOutputBytes = int64_t{4} << 20;

bool can_stream(const float* output, int64_t total_dim, int64_t column, int dim,
                int64_t batch_size) {
#if defined(__AVX__)
  const int64_t bytes = batch_size * total_dim * static_cast<int64_t>(sizeof(float));
  return bytes >= kStreamOutputBytes && reinterpret_cast<uintptr_t>(output) % 64 == 0 &&
         total_dim % 16 == 0 && column % 16 == 0 && dim % 16 == 0;
#else
  return false;
#endif
}

template <int kDim>
inline void store_output(float* out, const float* acc, float scale, int dim, bool stream) {
#if defined(__AVX__)
  if constexpr (kDim > 0 && kDim % 16 == 0) {
    if (stream) {
      const __m256 s = _mm256_set1_ps(scale);
      for (int d = 0; d < kDim; d += 8) {
        _mm256_stream_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), s));
      }
      return;
    }
  }
#endif
  (void)stream;
  for (int d = 0; d < dim; ++d) out[d] = acc[d] * scale;
}

// Pools bags [bag_begin, bag_end) of one table. kDim > 0 fixes the dim at
// compile time (accumulators in registers); kDim == 0 reads it at run time
// and accumulates in the output row.
template <int kDim, bool kWeighted>
void pool_bags(const ForwardArgs& a, int64_t bag_begin, int64_t bag_end, BadIndex& bad) {
  const TableBatch& t = *a.table;
  const int dim = kDim > 0 ? kDim : t.dim;
  const int64_t* idx = t.indices;
  const int64_t nnz_end = t.offsets[bag_end];
  const int64_t distance = prefetch_distance(dim);
  for (int64_t b = bag_begin; b < bag_end; ++b) {
    float* out = a.output + b * a.out_stride;
    float acc_fixed[kDim > 0 ? kDim : 1];
    float* acc = kDim > 0 ? acc_fixed : out;
    for (int d = 0; d < dim; ++d) acc[d] = 0.0f;
    const int64_t begin = t.offsets[b], end = t.offsets[b + 1];
    for (int64_t i = begin; i < end; ++i) {
      if (i + distance < nnz_end) {
        const int64_t ahead = idx[i + distance];
        if (detail::index_in_range(ahead, t.rows)) {
          detail::prefetch_row(t.weights + ahead * dim, dim);
        }
      }
      const int64_t r = idx[i];
      if (!detail::index_in_range(r, t.rows)) {
        bad.note(a.table_id, i, r);
        continue;
      }
      const float* row = t.weights + r * dim;
      if constexpr (kWeighted) {
        const float w = t.per_sample_weights[i];
        for (int d = 0; d < dim; ++d) acc[d] += w * row[d];
      } else {
        for (int d = 0; d < dim; ++d) acc[d] += row[d];
      }
    }
    const float scale = a.pooling == PoolingMode::kMean ? detail::mean_scale(end - begin) : 1.0f;
    store_output<kDim>(out, acc, scale, dim, a.stream);
  }
}

// acc[0..dim) += w x one stored row of type kType (not fp32), read as the
// reference reads it (kernel/precision.h) so that both round alike.
template <DataType kType>
inline void add_row(const uint8_t* row, int dim, float w, float* acc) {
  if constexpr (kType == DataType::kBf16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int d = 0; d < dim; ++d) acc[d] += w * bf16_to_fp32(h[d]);
  } else if constexpr (kType == DataType::kFp16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    int d = 0;
#if defined(__F16C__) && defined(__AVX__)
    const __m256 weight = _mm256_set1_ps(w);
    for (; d + 8 <= dim; d += 8) {
      const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + d)));
      _mm256_storeu_ps(acc + d, _mm256_add_ps(_mm256_loadu_ps(acc + d), _mm256_mul_ps(weight, x)));
    }
#endif
    for (; d < dim; ++d) acc[d] += w * fp16_to_fp32(h[d]);
  } else if constexpr (kType == DataType::kInt8) {
    float scale, bias;
    std::memcpy(&scale, row + dim, 4);
    std::memcpy(&bias, row + dim + 4, 4);
    for (int d = 0; d < dim; ++d) acc[d] += w * (static_cast<float>(row[d]) * scale + bias);
  } else {  // int4: two codes a byte, low nibble first, then fp16 scale and bias
    const int bytes = (dim + 1) / 2;
    uint16_t s, b;
    std::memcpy(&s, row + bytes, 2);
    std::memcpy(&b, row + bytes + 2, 2);
    const float scale = fp16_to_fp32(s), bias = fp16_to_fp32(b);
    alignas(64) float codes[detail::kMaxDim + 1];
    for (int k = 0; k < bytes; ++k) {
      codes[2 * k] = static_cast<float>(row[k] & 0xf);
      codes[2 * k + 1] = static_cast<float>(row[k] >> 4);
    }
    for (int d = 0; d < dim; ++d) acc[d] += w * (codes[d] * scale + bias);
  }
}

// pool_bags for a table stored as kType (not fp32): accumulators in a
// buffer of the table's dim, prefetching by the stored row's bytes.
template <DataType kType, bool kWeighted>
void pool_bags_typed(const ForwardArgs& a, int64_t bag_begin, int64_t bag_end, BadIndex& bad) {
  const TableBatch& t = *a.table;
  const int dim = t.dim;
  const int64_t row_bytes = t.row_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(t.packed);
  const int64_t* idx = t.indices;
  const int64_t nnz_end = t.offsets[bag_end];
  const int64_t distance = std::clamp<int64_t>(96 / ((row_bytes + 63) / 64), 4, 32);
  alignas(64) float acc[detail::kMaxDim];
  for (int64_t b = bag_begin; b < bag_end; ++b) {
    std::fill_n(acc, dim, 0.0f);
    const int64_t begin = t.offsets[b], end = t.offsets[b + 1];
    for (int64_t i = begin; i < end; ++i) {
      if (i + distance < nnz_end && detail::index_in_range(idx[i + distance], t.rows)) {
        detail::prefetch_bytes(base + idx[i + distance] * row_bytes, row_bytes);
      }
      const int64_t r = idx[i];
      if (!detail::index_in_range(r, t.rows)) {
        bad.note(a.table_id, i, r);
        continue;
      }
      add_row<kType>(base + r * row_bytes, dim, kWeighted ? t.per_sample_weights[i] : 1.0f, acc);
    }
    const float scale = a.pooling == PoolingMode::kMean ? detail::mean_scale(end - begin) : 1.0f;
    store_output<0>(a.output + b * a.out_stride, acc, scale, dim, false);
  }
}

template <bool kWeighted>
void pool_bags_dispatch(const ForwardArgs& a, int64_t bag_begin, int64_t bag_end,
                        BadIndex& bad) {
  switch (a.table->type) {
    case DataType::kFp32:
      break;
    case DataType::kFp16:
      return pool_bags_typed<DataType::kFp16, kWeighted>(a, bag_begin, bag_end, bad);
    case DataType::kBf16:
      return pool_bags_typed<DataType::kBf16, kWeighted>(a, bag_begin, bag_end, bad);
    case DataType::kInt8:
      return pool_bags_typed<DataType::kInt8, kWeighted>(a, bag_begin, bag_end, bad);
    case DataType::kInt4:
      return pool_bags_typed<DataType::kInt4, kWeighted>(a, bag_begin, bag_end, bad);
  }
  switch (a.table->dim) {
    case 8: return pool_bags<8, kWeighted>(a, bag_begin, bag_end, bad);
    case 16: return pool_bags<16, kWeighted>(a, bag_begin, bag_end, bad);
    case 32: return pool_bags<32, kWeighted>(a, bag_begin, bag_end, bad);
    case 64: return pool_bags<64, kWeighted>(a, bag_begin, bag_end, bad);
    case 128: return pool_bags<128, kWeighted>(a, bag_begin, bag_end, bad);
    default: return pool_bags<0, kWeighted>(a, bag_begin, bag_end, bad);
  }
}

Status bad_index_status(const FusedBatch& batch, const BadIndex& bad) {
  if (bad.table < 0) return {};
  return detail::index_out_of_range(bad.table, bad.position, bad.value,
                                    batch.tables[bad.table].rows);
}

}  // namespace

Status tbe_forward(const FusedBatch& batch, float* output, int num_threads) {
  Status s = detail::check_arguments(batch, nullptr);
  if (!s.ok()) return s;
  if (num_threads < 1) return detail::invalid_argument(-1, num_threads, "num_threads < 1");
  const int64_t total_dim = batch.total_dim();
  const int num_tables = static_cast<int>(batch.tables.size());
  std::vector<int64_t> columns(num_tables);
  for (int t = 0; t < num_tables; ++t) columns[t] = batch.column_offset(t);
  BadIndex first_bad;
#pragma omp parallel num_threads(num_threads)
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    // Bags split evenly; every thread walks all tables over its own bags.
    const int64_t bag_begin = batch.batch_size * tid / nt;
    const int64_t bag_end = batch.batch_size * (tid + 1) / nt;
    BadIndex bad;
    for (int t = 0; t < num_tables; ++t) {
      const TableBatch& tb = batch.tables[t];
      const ForwardArgs args{&tb,
                             t,
                             batch.pooling,
                             output + columns[t],
                             total_dim,
                             tb.type == DataType::kFp32 && can_stream(output, total_dim, columns[t],
                                                                      tb.dim, batch.batch_size)};
      if (tb.per_sample_weights != nullptr) {
        pool_bags_dispatch<true>(args, bag_begin, bag_end, bad);
      } else {
        pool_bags_dispatch<false>(args, bag_begin, bag_end, bad);
      }
    }
#if defined(__AVX__)
    _mm_sfence();  // streaming stores are visible before the kernel returns
#endif
#pragma omp critical(embshard_tbe_forward_bad)
    if (bad.table >= 0) first_bad.note(bad.table, bad.position, bad.value);
  }
  return bad_index_status(batch, first_bad);
}

}  // namespace embshard
