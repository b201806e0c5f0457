// The fused table-batched embedding-bag operator on a CUDA GPU.
//
// Same semantics as the CPU operator (kernel/tbe.h): sum and mean pooling,
// per-sample weights with sum, dims 1..1024, output [batch, total_dim] with
// table t at column_offset(t), backward fused with an exact SGD or row-wise
// Adagrad update of every distinct row exactly once.
//
// A CudaTbe uploads one FusedBatch to the GPU once (weights, momentum,
// offsets, indices, per-sample weights; cudaMalloc, never managed memory) and
// preallocates every buffer a step needs, so forward(), backward_update() and
// time_step() allocate nothing. Indices are validated on upload: an index out
// of range gives the CPU kernels' Status (first bad one in table, position
// order) from both forward() and backward_update(), which then write nothing.
//
// This header is plain C++ (no CUDA headers): any translation unit can
// include it. It is implemented only in builds with EMBSHARD_CUDA=ON
// (library embshard_cuda, compile definition EMBSHARD_WITH_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embshard/kernel/executor.h"
#include "embshard/kernel/tbe.h"

namespace embshard {

// True when a CUDA device can run this build's kernels; otherwise false and
// *why (when not null) says what is missing (no driver, no device, no kernel
// image for the device's compute capability).
bool cuda_device_available(std::string* why);
// "NVIDIA H100 80GB HBM3"; Error when there is no such device.
std::string cuda_device_name(int device = 0);

// Median device-to-device cudaMemcpy bandwidth over `runs` copies of `bytes`
// (after one warm-up copy), in GB/s (1e9 bytes/s) counting the bytes read
// plus the bytes written (2 x bytes per copy): the same accounting as
// TbeUsefulBytes, so the two figures compare directly. Timed with events.
double cuda_d2d_copy_gb_per_s(int64_t bytes, int runs);

// The bytes a forward must move at the least: every looked-up row read once
// per lookup (lookups x dim x 4) plus the pooled output written once
// (batch x total_dim x 4). Indices and offsets are not counted.
struct TbeUsefulBytes {
  int64_t lookups = 0;
  int64_t gathered_bytes = 0;
  int64_t output_bytes = 0;
  int64_t total() const { return gathered_bytes + output_bytes; }
  double gb_per_s(double ms) const { return ms > 0 ? total() / (ms * 1e6) : 0.0; }
};
TbeUsefulBytes tbe_forward_useful_bytes(const FusedBatch& batch);

class CudaTbe {
 public:
  // Guard floats after every device buffer a kernel writes (output, each
  // table's weights and momentum), set to kGuardValue at construction; the
  // output itself starts as kUnwrittenValue so a skipped element shows.
  static constexpr int kGuardFloats = 67;
  static constexpr float kGuardValue = -12345.678f;
  static constexpr float kUnwrittenValue = 777.0f;

  // Uploads `batch` (host pointers, read only here) to device `device` and
  // allocates all scratch. Invalid arguments and out-of-range indices do not
  // throw: they are kept as the status that forward() / backward_update()
  // return. Error when a CUDA call fails (out of memory, no device).
  CudaTbe(const FusedBatch& batch, const OptimizerConfig& optimizer, int device = 0);
  ~CudaTbe();
  CudaTbe(const CudaTbe&) = delete;
  CudaTbe& operator=(const CudaTbe&) = delete;

  // The upload's verdict for forward() and for backward_update() (which also
  // checks the optimizer, e.g. row-wise Adagrad needs momentum).
  const Status& forward_status() const;
  const Status& backward_status() const;

  // [batch_size, total_dim] floats of the gradient of the output; uploaded
  // once, used by every backward_update().
  void set_grad_output(const float* grad_output);

  // Enqueue on this object's stream; return without waiting for the GPU.
  // Error only when a launch itself fails (a CUDA error, not a data error).
  Status forward();
  Status backward_update();

  // One forward, then one backward + update, each timed with CUDA events
  // (waits for both). Error when either returns a non-ok status.
  StepTiming time_step();

  // Blocking copies to the host (tests, checks).
  std::vector<float> download_output() const;        // [batch_size * total_dim]
  std::vector<float> download_weights(int table) const;   // [rows * dim]
  std::vector<float> download_momentum(int table) const;  // [rows]
  // Empty when every guard still holds kGuardValue; otherwise which buffer's
  // guard was overwritten, and where.
  std::string damaged_guards() const;

  int64_t output_size() const;  // batch_size * total_dim

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace embshard
