// The CUDA device: whether one can run this build's kernels, its name, its
// device-to-device copy bandwidth; and the useful bytes of a TBE forward.
#include <fmt/format.h>

#include <vector>

#include "embshard/kernel/tbe_cuda.h"
#include "embshard/util/statistics.h"
#include "kernel/cuda_buffer.h"
#include "kernel/tbe_cuda_kernels.h"

namespace embshard {

bool cuda_device_available(std::string* why) {
  auto fail = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    cudaGetLastError();  // leave no error behind for the next CUDA call
    return false;
  };
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return fail(fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorString(err),
                            cudaGetErrorName(err)));
  }
  if (count == 0) return fail("cudaGetDeviceCount found no device");
  int device = 0;
  err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cuda_detail::probe_kernel_image();
  if (err != cudaSuccess) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    return fail(fmt::format(
        "device {} ({}, compute capability {}.{}) cannot run this build's kernels: {} ({}); "
        "configure with -DCMAKE_CUDA_ARCHITECTURES={}{}",
        device, prop.name, prop.major, prop.minor, cudaGetErrorString(err),
        cudaGetErrorName(err), prop.major, prop.minor));
  }
  return true;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp prop{};
  ES_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

double cuda_d2d_copy_gb_per_s(int64_t bytes, int runs) {
  ES_CHECK(bytes > 0 && runs >= 1, "cuda_d2d_copy_gb_per_s: bytes {} and runs {} must be > 0",
           bytes, runs);
  cuda_detail::DeviceBuffer from(bytes, "copy source"), to(bytes, "copy destination");
  ES_CUDA_CHECK(cudaMemset(from.get(), 1, bytes));
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ES_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ES_CUDA_CHECK(cudaEventCreate(&start));
  ES_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> gb_per_s;
  cudaError_t err = cudaDeviceSynchronize();
  for (int run = -1; run < runs && err == cudaSuccess; ++run) {  // run -1: warm-up
    cudaEventRecord(start, stream);
    cudaMemcpyAsync(to.get(), from.get(), bytes, cudaMemcpyDeviceToDevice, stream);
    cudaEventRecord(stop, stream);
    err = cudaEventSynchronize(stop);
    float ms = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, start, stop);
    if (run >= 0 && err == cudaSuccess) gb_per_s.push_back(2.0 * bytes / (ms * 1e6));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  ES_CHECK(err == cudaSuccess, "device-to-device copy of {} bytes failed: {}", bytes,
           cudaGetErrorString(err));
  return median(gb_per_s);
}

TbeUsefulBytes tbe_forward_useful_bytes(const FusedBatch& batch) {
  TbeUsefulBytes u;
  for (const TableBatch& t : batch.tables) {
    const int64_t nnz = batch.batch_size > 0 ? t.offsets[batch.batch_size] : 0;
    u.lookups += nnz;
    u.gathered_bytes += nnz * t.dim * static_cast<int64_t>(sizeof(float));
  }
  u.output_bytes = batch.batch_size * batch.total_dim() * static_cast<int64_t>(sizeof(float));
  return u;
}

}  // namespace embshard
