// Internal: the CUDA check macro and an owning device buffer, for the host
// code of the CUDA executor (compiled by the host compiler, not nvcc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "embshard/util/error.h"

// Throws embshard::Error naming the CUDA call and its error when it fails,
// after clearing the runtime's last error so that a later launch check
// (cudaGetLastError) does not report this one again.
#define ES_CUDA_CHECK(call)                                                          \
  do {                                                                               \
    const cudaError_t es_cuda_error_ = (call);                                       \
    if (es_cuda_error_ != cudaSuccess) cudaGetLastError();                           \
    ES_CHECK(es_cuda_error_ == cudaSuccess, "{} failed: {} ({})", #call,             \
             cudaGetErrorString(es_cuda_error_), cudaGetErrorName(es_cuda_error_));     \
  } while (0)

namespace embshard::cuda_detail {

// cudaMalloc'd memory freed on destruction; move-only. Zero bytes holds null.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&data_, bytes);
    if (err != cudaSuccess) cudaGetLastError();  // not sticky: clear it
    ES_CHECK(err == cudaSuccess, "cudaMalloc of {} bytes for {} failed: {} ({})", bytes, what,
             cudaGetErrorString(err), cudaGetErrorName(err));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace embshard::cuda_detail
