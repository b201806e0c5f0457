// Internal: the device-side view of a fused batch and the launchers of the
// CUDA TBE kernels (tbe_cuda_kernels.cu). Host code (tbe_cuda.cpp) owns the
// buffers; everything here borrows device pointers. Launchers return the
// launch's cudaError_t and never synchronize.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace embshard::cuda_detail {

constexpr int kWarpSize = 32;

// Lanes that share one bag (forward) or one row (backward): enough for one
// vector (float4 when dim % 4 == 0, else float) per lane across the row,
// a power of two, at most a warp.
inline int lanes_for_dim(int dim) {
  const int vectors = dim % 4 == 0 ? dim / 4 : dim;
  int lanes = 1;
  while (lanes < vectors && lanes < kWarpSize) lanes *= 2;
  return lanes;
}

// One table, as the kernels see it.
struct DeviceTable {
  float* weights = nullptr;   // [rows, dim], 16-byte aligned
  float* momentum = nullptr;  // [rows] or null
  int64_t rows = 0;
  int64_t column = 0;  // column offset in the output and its gradient
  int dim = 0;
  int lanes = 1;       // lanes_for_dim(dim)
  int weighted = 0;    // per_sample_weights apply to this table
  int vector_io = 0;   // output / gradient rows of this table are float4-aligned
};

// A fused batch on the device. Positions are global: table t's lookups are
// indices[offsets[t * batch_size] .. offsets[(t + 1) * batch_size]).
struct DeviceBatch {
  const DeviceTable* tables = nullptr;     // [num_tables]
  const int64_t* table_warp_begin = nullptr;  // [num_tables + 1] first forward warp
  const int64_t* table_row_begin = nullptr;   // [num_tables + 1] first global row (sort key)
  int num_tables = 0;
  int64_t batch_size = 0;
  int64_t total_dim = 0;
  int64_t total_warps = 0;  // forward warps over all tables
  int64_t total_rows = 0;   // sum of rows: keys are in [0, total_rows)
  int64_t lookups = 0;      // all tables' indices (< 2^31)
  const int64_t* offsets = nullptr;  // [num_tables * batch_size + 1]
  const int32_t* indices = nullptr;  // [lookups], validated on upload
  const float* per_sample_weights = nullptr;  // [lookups] or null
  int mean = 0;                      // mean pooling
  float* output = nullptr;           // [batch_size, total_dim]
  const float* grad_output = nullptr;  // [batch_size, total_dim]
};

// A row with more occurrences than this (a hot row) is summed by one warp per
// chunk of kRunChunk sorted positions, not by one warp alone.
constexpr int kRunChunk = 256;
inline int64_t run_chunks(int64_t lookups) { return (lookups + kRunChunk - 1) / kRunChunk; }

// Scratch of one backward: sort keys and values (double-buffered), segment
// starts, the segment count, CUB's temporary storage, and the gradient rows
// of hot rows (one per chunk: at most one hot row starts in a chunk).
struct BackwardScratch {
  void* keys_in = nullptr;   // [lookups] of key_bytes(total_rows) each
  void* keys_out = nullptr;
  uint64_t* values_in = nullptr;  // [lookups] (bag << 32 | scale bits)
  uint64_t* values_out = nullptr;
  int32_t* run_starts = nullptr;  // [lookups]
  int32_t* num_runs = nullptr;    // [1]
  void* temp = nullptr;
  size_t temp_bytes = 0;
  float* hot_grads = nullptr;  // [run_chunks(lookups), hot_stride]
  int64_t hot_stride = 0;      // floats per row: the widest table's dim, rounded up to 4
};

// Sort keys are global rows: 4 bytes when total_rows <= 2^32, else 8.
size_t key_bytes(int64_t total_rows);
// CUB temporary storage the backward of `lookups` lookups needs.
cudaError_t backward_temp_bytes(int64_t lookups, int64_t total_rows, size_t* bytes);

cudaError_t launch_forward(const DeviceBatch& batch, cudaStream_t stream);

struct UpdateParams {
  int row_wise_adagrad = 0;
  float learning_rate = 0;
  float eps = 0;
};
cudaError_t launch_backward_update(const DeviceBatch& batch, const BackwardScratch& scratch,
                                   const UpdateParams& params, int num_sms,
                                   cudaStream_t stream);

cudaError_t launch_fill(float* values, int64_t count, float value, cudaStream_t stream);

// cudaSuccess when this build has a kernel image the current device can run.
cudaError_t probe_kernel_image();

}  // namespace embshard::cuda_detail
