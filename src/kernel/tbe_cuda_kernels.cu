// The CUDA TBE kernels (see tbe_cuda_kernels.h and docs/measurement.md).
//
// Forward: one launch for all tables. Table t gets ceil(B / (32 / lanes_t))
// warps; each warp pools 32 / lanes_t bags, lanes_t lanes per bag, every
// lane owning columns sub, sub + lanes, ... as float4 (dim % 4 == 0) or
// float. Columns are the outer loop, lookups the inner one (unrolled by 4),
// so the accumulator is one vector in a register whatever the dim.
//
// Backward: keys (global row = table's first row + index) and values (bag,
// occurrence scale) per lookup, a stable radix sort by key (CUB), run heads
// selected into segment starts (CUB), then one warp per distinct row: groups
// of lanes_t lanes sum the segment's gradient rows in parallel, a shuffle
// reduction combines the groups, and the optimizer is applied once. A hot
// row's segment (longer than kRunChunk) is first summed by one warp per chunk
// of kRunChunk positions, each adding its part into the row's gradient with
// atomics, so that a row looked up millions of times does not hold one warp
// for the whole step.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "kernel/tbe_cuda_kernels.h"

namespace embshard::cuda_detail {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kWarpsPerBlock = kBlockThreads / kWarpSize;
constexpr int kMaxDim = 1024;
constexpr int kLinearizeLanes = 8;  // lanes per bag when building the sort keys
constexpr unsigned kFullMask = 0xffffffffu;

// ---- float / float4 arithmetic, so each kernel body is written once ----

__device__ __forceinline__ void set_zero(float& a) { a = 0.0f; }
__device__ __forceinline__ void set_zero(float4& a) { a = make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

// a += s * x, elementwise in the reference's order.
__device__ __forceinline__ void axpy(float s, float x, float& a) { a += s * x; }
__device__ __forceinline__ void axpy(float s, const float4& x, float4& a) {
  a.x += s * x.x;
  a.y += s * x.y;
  a.z += s * x.z;
  a.w += s * x.w;
}

__device__ __forceinline__ void scale(float s, float& a) { a *= s; }
__device__ __forceinline__ void scale(float s, float4& a) {
  a.x *= s;
  a.y *= s;
  a.z *= s;
  a.w *= s;
}

__device__ __forceinline__ float squares(float a) { return a * a; }
__device__ __forceinline__ float squares(const float4& a) {
  return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
}

// a += a of the lane `offset` away (xor), on the full warp.
__device__ __forceinline__ void shuffle_add(float& a, int offset) {
  a += __shfl_xor_sync(kFullMask, a, offset);
}
__device__ __forceinline__ void shuffle_add(float4& a, int offset) {
  a.x += __shfl_xor_sync(kFullMask, a.x, offset);
  a.y += __shfl_xor_sync(kFullMask, a.y, offset);
  a.z += __shfl_xor_sync(kFullMask, a.z, offset);
  a.w += __shfl_xor_sync(kFullMask, a.w, offset);
}

// Vector v of an output or gradient row (float4 loads/stores only when the
// table's columns are 16-byte aligned in the row-major [B, total_dim] array).
template <typename V>
__device__ __forceinline__ V load_io(const float* row, int v, int vector_io);
template <>
__device__ __forceinline__ float load_io<float>(const float* row, int v, int) {
  return row[v];
}
template <>
__device__ __forceinline__ float4 load_io<float4>(const float* row, int v, int vector_io) {
  if (vector_io) return reinterpret_cast<const float4*>(row)[v];
  return make_float4(row[4 * v], row[4 * v + 1], row[4 * v + 2], row[4 * v + 3]);
}
__device__ __forceinline__ void store_io(float* row, int v, int /*vector_io*/, float a) {
  row[v] = a;
}
__device__ __forceinline__ void store_io(float* row, int v, int vector_io, const float4& a) {
  if (vector_io) {
    reinterpret_cast<float4*>(row)[v] = a;
    return;
  }
  row[4 * v] = a.x;
  row[4 * v + 1] = a.y;
  row[4 * v + 2] = a.z;
  row[4 * v + 3] = a.w;
}

// The last i < count with begin[i] <= x (begin is non-decreasing,
// begin[0] <= x): a table by its first warp or row, a run by its start.
template <typename T>
__device__ __forceinline__ int last_at_or_below(const T* begin, int count, T x) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (begin[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

__device__ __forceinline__ int find_table(const int64_t* begin, int num_tables, int64_t x) {
  return last_at_or_below(begin, num_tables, x);
}

// The same expression as detail::mean_scale, so both round alike.
__device__ __forceinline__ float mean_scale(int64_t bag_length) {
  return bag_length > 0 ? 1.0f / static_cast<float>(bag_length) : 0.0f;
}

// ---- forward ----

template <typename V>
__device__ void pool_bag(const DeviceBatch& b, const DeviceTable& table, int t, int64_t bag,
                         int sub) {
  constexpr int kWidth = sizeof(V) / sizeof(float);
  const int vectors = table.dim / kWidth;
  const int64_t bag_global = t * b.batch_size + bag;
  const int64_t begin = b.offsets[bag_global], end = b.offsets[bag_global + 1];
  const V* __restrict__ weights = reinterpret_cast<const V*>(table.weights);
  const int32_t* __restrict__ indices = b.indices;
  const float* __restrict__ psw = table.weighted ? b.per_sample_weights : nullptr;
  float* out = b.output + bag * b.total_dim + table.column;
  for (int v = sub; v < vectors; v += table.lanes) {
    V acc;
    set_zero(acc);
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {  // four rows in flight per lane
      const V x0 = __ldg(weights + int64_t{indices[i]} * vectors + v);
      const V x1 = __ldg(weights + int64_t{indices[i + 1]} * vectors + v);
      const V x2 = __ldg(weights + int64_t{indices[i + 2]} * vectors + v);
      const V x3 = __ldg(weights + int64_t{indices[i + 3]} * vectors + v);
      axpy(psw ? psw[i] : 1.0f, x0, acc);
      axpy(psw ? psw[i + 1] : 1.0f, x1, acc);
      axpy(psw ? psw[i + 2] : 1.0f, x2, acc);
      axpy(psw ? psw[i + 3] : 1.0f, x3, acc);
    }
    for (; i < end; ++i) {
      axpy(psw ? psw[i] : 1.0f, __ldg(weights + int64_t{indices[i]} * vectors + v), acc);
    }
    if (b.mean) scale(mean_scale(end - begin), acc);
    store_io(out, v, table.vector_io, acc);
  }
}

__global__ void __launch_bounds__(kBlockThreads) forward_kernel(DeviceBatch b) {
  const int64_t warp = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize;
  if (warp >= b.total_warps) return;
  const int lane = threadIdx.x % kWarpSize;
  const int t = find_table(b.table_warp_begin, b.num_tables, warp);
  const DeviceTable table = b.tables[t];
  const int64_t bag =
      (warp - b.table_warp_begin[t]) * (kWarpSize / table.lanes) + lane / table.lanes;
  if (bag >= b.batch_size) return;
  if (table.dim % 4 == 0) {
    pool_bag<float4>(b, table, t, bag, lane % table.lanes);
  } else {
    pool_bag<float>(b, table, t, bag, lane % table.lanes);
  }
}

// ---- backward ----

// keys[p] = global row of lookup p, values[p] = bag << 32 | bits of its scale
// (per-sample weight, 1/|bag| for mean, or 1), in position order so that the
// stable sort keeps each row's occurrences in position order.
template <typename Key>
__global__ void __launch_bounds__(kBlockThreads)
    linearize_kernel(DeviceBatch b, Key* __restrict__ keys, uint64_t* __restrict__ values) {
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t bag_global = thread / kLinearizeLanes;
  if (bag_global >= b.num_tables * b.batch_size) return;
  const int sub = static_cast<int>(thread % kLinearizeLanes);
  const int t = static_cast<int>(bag_global / b.batch_size);
  const int64_t bag = bag_global - t * b.batch_size;
  const int64_t begin = b.offsets[bag_global], end = b.offsets[bag_global + 1];
  const int weighted = b.tables[t].weighted;
  const float bag_scale = b.mean ? mean_scale(end - begin) : 1.0f;
  const Key row_base = static_cast<Key>(b.table_row_begin[t]);
  for (int64_t p = begin + sub; p < end; p += kLinearizeLanes) {
    const float s = weighted ? b.per_sample_weights[p] : bag_scale;
    keys[p] = row_base + static_cast<Key>(b.indices[p]);
    values[p] = (static_cast<uint64_t>(bag) << 32) | __float_as_uint(s);
  }
}

// Position i starts a run of equal sorted keys.
template <typename Key>
struct IsRunHead {
  const Key* keys;
  __device__ bool operator()(int32_t i) const { return i == 0 || keys[i] != keys[i - 1]; }
};

// The sum of occurrences values[begin, end) of vector v of a row's gradient,
// over this lane's group (groups of lanes step through the occurrences).
template <typename V>
__device__ __forceinline__ V sum_occurrences(const DeviceBatch& b, const DeviceTable& table,
                                             const uint64_t* __restrict__ values, int32_t begin,
                                             int32_t end, int v, int group, int groups) {
  V acc;
  set_zero(acc);
#pragma unroll 4
  for (int32_t i = begin + group; i < end; i += groups) {
    const uint64_t info = values[i];
    const int64_t bag = static_cast<int64_t>(info >> 32);
    const float s = __uint_as_float(static_cast<uint32_t>(info));
    const float* g = b.grad_output + bag * b.total_dim + table.column;
    axpy(s, load_io<V>(g, v, table.vector_io), acc);
  }
  return acc;
}

// The gradient of one distinct row, summed from its occurrences
// values[begin, end) (or read from `hot_grad`, its chunks' sum, for a hot
// row), then the optimizer step. `grad` is this warp's shared-memory row (the
// whole gradient is needed before row-wise Adagrad can scale any element).
template <typename V>
__device__ void update_row(const DeviceBatch& b, const DeviceTable& table, int64_t row,
                           const uint64_t* __restrict__ values, int32_t begin, int32_t end,
                           const float* hot_grad, float* grad, int lane,
                           const UpdateParams& params) {
  constexpr int kWidth = sizeof(V) / sizeof(float);
  const int vectors = table.dim / kWidth;
  const int lanes = table.lanes, group = lane / lanes, sub = lane % lanes;
  const int groups = kWarpSize / lanes;
  // Reads that do not depend on the gradient go first, so that the row's
  // momentum, weights and gradient rows are in flight together rather than
  // one DRAM latency after another. (Only this warp touches this row.)
  const float momentum = params.row_wise_adagrad ? table.momentum[row] : 0.0f;
  V* w = reinterpret_cast<V*>(table.weights) + row * vectors;
  V w_lane;  // vector `lane` of the row: all of it when the row has <= 32 vectors
  set_zero(w_lane);
  if (lane < vectors) w_lane = w[lane];
  float sum_sq = 0.0f;
  for (int v0 = 0; v0 < vectors; v0 += lanes) {  // uniform across the warp
    const int v = v0 + sub;
    V acc;
    set_zero(acc);
    if (v < vectors && hot_grad == nullptr) {
      acc = sum_occurrences<V>(b, table, values, begin, end, v, group, groups);
    } else if (v < vectors && group == 0) {
      acc = reinterpret_cast<const V*>(hot_grad)[v];
    }
    for (int offset = lanes; offset < kWarpSize; offset *= 2) shuffle_add(acc, offset);
    if (group == 0 && v < vectors) {
      reinterpret_cast<V*>(grad)[v] = acc;
      sum_sq += squares(acc);
    }
  }
  __syncwarp();
  float step = params.learning_rate;
  if (params.row_wise_adagrad) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      sum_sq += __shfl_xor_sync(kFullMask, sum_sq, offset);
    }
    const float m = momentum + sum_sq / static_cast<float>(table.dim);
    step = params.learning_rate / (sqrtf(m) + params.eps);
    if (lane == 0) table.momentum[row] = m;
  }
  const V* g = reinterpret_cast<const V*>(grad);
  for (int v = lane; v < vectors; v += kWarpSize) {
    V x = v == lane ? w_lane : w[v];
    axpy(-step, g[v], x);
    w[v] = x;
  }
  __syncwarp();  // the next run reuses `grad`
}

__device__ __forceinline__ void atomic_add(float* a, float x) { atomicAdd(a, x); }
__device__ __forceinline__ void atomic_add(float4* a, const float4& x) {
  float* f = reinterpret_cast<float*>(a);
  atomicAdd(f, x.x);
  atomicAdd(f + 1, x.y);
  atomicAdd(f + 2, x.z);
  atomicAdd(f + 3, x.w);
}

// Adds occurrences values[begin, end) of the hot row whose key is keys[begin]
// into its gradient row `out`.
template <typename V, typename Key>
__device__ void add_hot_part_of(const DeviceBatch& b, const Key* __restrict__ keys,
                                const uint64_t* __restrict__ values, int32_t begin, int32_t end,
                                float* out, int lane) {
  const int t = find_table(b.table_row_begin, b.num_tables, static_cast<int64_t>(keys[begin]));
  const DeviceTable& table = b.tables[t];
  constexpr int kWidth = sizeof(V) / sizeof(float);
  const int vectors = table.dim / kWidth;
  const int lanes = table.lanes, group = lane / lanes, sub = lane % lanes;
  for (int v0 = 0; v0 < vectors; v0 += lanes) {
    const int v = v0 + sub;
    V acc;
    set_zero(acc);
    if (v < vectors) {
      acc = sum_occurrences<V>(b, table, values, begin, end, v, group, kWarpSize / lanes);
    }
    for (int offset = lanes; offset < kWarpSize; offset *= 2) shuffle_add(acc, offset);
    if (group == 0 && v < vectors) atomic_add(reinterpret_cast<V*>(out) + v, acc);
  }
}

template <typename Key>
__device__ void add_hot_part(const DeviceBatch& b, const Key* keys, const uint64_t* values,
                             int32_t begin, int32_t end, float* out, int lane) {
  const int t = find_table(b.table_row_begin, b.num_tables, static_cast<int64_t>(keys[begin]));
  if (b.tables[t].dim % 4 == 0) {
    add_hot_part_of<float4, Key>(b, keys, values, begin, end, out, lane);
  } else {
    add_hot_part_of<float, Key>(b, keys, values, begin, end, out, lane);
  }
}

// One warp per chunk of kRunChunk sorted positions adds the parts of hot
// runs in it into their gradient rows: the run holding the chunk's first
// position, and the run that starts inside the chunk and runs past it. A hot
// run's row is hot_grads[its first position / kRunChunk] (no other hot run
// starts in that chunk).
template <typename Key>
__global__ void __launch_bounds__(kBlockThreads)
    hot_chunk_kernel(DeviceBatch b, const Key* __restrict__ keys,
                     const uint64_t* __restrict__ values, const int32_t* __restrict__ run_starts,
                     const int32_t* __restrict__ num_runs, float* hot_grads, int64_t stride) {
  const int64_t chunk = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize;
  const int32_t n = static_cast<int32_t>(b.lookups);
  if (chunk * kRunChunk >= n) return;
  const int lane = threadIdx.x % kWarpSize;
  const int32_t runs = *num_runs;
  const int32_t first = static_cast<int32_t>(chunk * kRunChunk);
  const int32_t last = n - first > kRunChunk ? first + kRunChunk : n;  // exclusive
  int32_t r = last_at_or_below(run_starts, runs, first);
  int32_t begin = run_starts[r], end = r + 1 < runs ? run_starts[r + 1] : n;
  if (end - begin > kRunChunk) {
    add_hot_part(b, keys, values, first, end < last ? end : last,
                 hot_grads + (begin / kRunChunk) * stride, lane);
  }
  if (end >= last) return;
  r = last_at_or_below(run_starts, runs, last - 1);
  begin = run_starts[r];
  end = r + 1 < runs ? run_starts[r + 1] : n;
  if (end - begin > kRunChunk) {
    add_hot_part(b, keys, values, begin, last, hot_grads + (begin / kRunChunk) * stride, lane);
  }
}

template <typename Key>
__global__ void __launch_bounds__(kBlockThreads)
    update_kernel(DeviceBatch b, const Key* __restrict__ keys, const uint64_t* __restrict__ values,
                  const int32_t* __restrict__ run_starts, const int32_t* __restrict__ num_runs,
                  const float* __restrict__ hot_grads, int64_t stride, UpdateParams params) {
  __shared__ __align__(16) float grad_rows[kWarpsPerBlock][kMaxDim];
  const int warp_in_block = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int32_t runs = *num_runs;
  const int32_t lookups = static_cast<int32_t>(b.lookups);
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t run = int64_t{blockIdx.x} * kWarpsPerBlock + warp_in_block; run < runs;
       run += warps) {
    const int32_t begin = run_starts[run];
    const int32_t end = run + 1 < runs ? run_starts[run + 1] : lookups;
    const int64_t key = static_cast<int64_t>(keys[begin]);
    const int t = find_table(b.table_row_begin, b.num_tables, key);
    const DeviceTable table = b.tables[t];
    const int64_t row = key - b.table_row_begin[t];
    const float* hot = end - begin > kRunChunk ? hot_grads + (begin / kRunChunk) * stride : nullptr;
    float* grad = grad_rows[warp_in_block];
    if (table.dim % 4 == 0) {
      update_row<float4>(b, table, row, values, begin, end, hot, grad, lane, params);
    } else {
      update_row<float>(b, table, row, values, begin, end, hot, grad, lane, params);
    }
  }
}

int bits_for(int64_t max_value) {
  int bits = 1;
  while (bits < 64 && (static_cast<uint64_t>(max_value) >> bits) != 0) ++bits;
  return bits;
}

int64_t blocks_for(int64_t threads) { return (threads + kBlockThreads - 1) / kBlockThreads; }

template <typename Key>
cudaError_t temp_bytes(int64_t lookups, int64_t total_rows, size_t* bytes) {
  const int n = static_cast<int>(lookups);
  size_t sort_bytes = 0, select_bytes = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const Key*>(nullptr), static_cast<Key*>(nullptr),
      static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr), n, 0,
      bits_for(total_rows - 1));
  if (err != cudaSuccess) return err;
  err = cub::DeviceSelect::If(nullptr, select_bytes, thrust::counting_iterator<int32_t>(0),
                              static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n,
                              IsRunHead<Key>{nullptr});
  *bytes = sort_bytes > select_bytes ? sort_bytes : select_bytes;
  return err;
}

template <typename Key>
cudaError_t backward_update(const DeviceBatch& b, const BackwardScratch& s,
                            const UpdateParams& params, int num_sms, cudaStream_t stream) {
  const int n = static_cast<int>(b.lookups);
  Key* keys_in = static_cast<Key*>(s.keys_in);
  Key* keys_out = static_cast<Key*>(s.keys_out);
  const int64_t bags = b.num_tables * b.batch_size;
  linearize_kernel<Key><<<blocks_for(bags * kLinearizeLanes), kBlockThreads, 0, stream>>>(
      b, keys_in, s.values_in);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t bytes = s.temp_bytes;
  err = cub::DeviceRadixSort::SortPairs(s.temp, bytes, keys_in, keys_out, s.values_in,
                                        s.values_out, n, 0, bits_for(b.total_rows - 1), stream);
  if (err != cudaSuccess) return err;
  bytes = s.temp_bytes;
  err = cub::DeviceSelect::If(s.temp, bytes, thrust::counting_iterator<int32_t>(0), s.run_starts,
                              s.num_runs, n, IsRunHead<Key>{keys_out}, stream);
  if (err != cudaSuccess) return err;
  const int64_t chunks = run_chunks(b.lookups);
  err = cudaMemsetAsync(s.hot_grads, 0, chunks * s.hot_stride * sizeof(float), stream);
  if (err != cudaSuccess) return err;
  hot_chunk_kernel<Key><<<blocks_for(chunks * kWarpSize), kBlockThreads, 0, stream>>>(
      b, keys_out, s.values_out, s.run_starts, s.num_runs, s.hot_grads, s.hot_stride);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // At most one warp per lookup, and no more blocks than fit at once (the
  // rest would run after the first wave, doubling the tail): warps loop.
  int blocks_per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, update_kernel<Key>,
                                                      kBlockThreads, 0);
  if (err != cudaSuccess) return err;
  const int64_t max_blocks = int64_t{num_sms} * (blocks_per_sm > 0 ? blocks_per_sm : 1);
  const int64_t needed = (b.lookups + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int64_t grid = needed < max_blocks ? needed : max_blocks;
  update_kernel<Key><<<grid, kBlockThreads, 0, stream>>>(
      b, keys_out, s.values_out, s.run_starts, s.num_runs, s.hot_grads, s.hot_stride, params);
  return cudaGetLastError();
}

__global__ void fill_kernel(float* values, int64_t count, float value) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    values[i] = value;
  }
}

bool narrow_keys(int64_t total_rows) { return total_rows <= (int64_t{1} << 32); }

}  // namespace

size_t key_bytes(int64_t total_rows) {
  return narrow_keys(total_rows) ? sizeof(uint32_t) : sizeof(uint64_t);
}

cudaError_t backward_temp_bytes(int64_t lookups, int64_t total_rows, size_t* bytes) {
  if (narrow_keys(total_rows)) return temp_bytes<uint32_t>(lookups, total_rows, bytes);
  return temp_bytes<uint64_t>(lookups, total_rows, bytes);
}

cudaError_t launch_forward(const DeviceBatch& b, cudaStream_t stream) {
  if (b.total_warps == 0) return cudaSuccess;
  forward_kernel<<<blocks_for(b.total_warps * kWarpSize), kBlockThreads, 0, stream>>>(b);
  return cudaGetLastError();
}

cudaError_t launch_backward_update(const DeviceBatch& b, const BackwardScratch& scratch,
                                   const UpdateParams& params, int num_sms,
                                   cudaStream_t stream) {
  if (b.lookups == 0) return cudaSuccess;
  if (narrow_keys(b.total_rows)) {
    return backward_update<uint32_t>(b, scratch, params, num_sms, stream);
  }
  return backward_update<uint64_t>(b, scratch, params, num_sms, stream);
}

cudaError_t launch_fill(float* values, int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const int64_t blocks = blocks_for(count);
  fill_kernel<<<blocks < 4096 ? blocks : 4096, kBlockThreads, 0, stream>>>(values, count, value);
  return cudaGetLastError();
}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, fill_kernel);
}

}  // namespace embshard::cuda_detail
