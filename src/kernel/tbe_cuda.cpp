// CudaTbe: uploads one fused batch, validates it like the CPU kernels, owns
// every device buffer and launches the kernels of tbe_cuda_kernels.cu.
#include "embshard/kernel/tbe_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernel/cuda_buffer.h"
#include "kernel/tbe_common.h"
#include "kernel/tbe_cuda_kernels.h"

namespace embshard {

using cuda_detail::DeviceBuffer;

namespace {

// Positions, segment starts and run counts are int32 on the device.
constexpr int64_t kMaxLookups = std::numeric_limits<int32_t>::max();

// The first out-of-range index in table, then position order (the CPU
// kernels' order), or the device's size limit.
Status check_lookups(const FusedBatch& batch) {
  int64_t lookups = 0;
  if (Status s = detail::check_indices(batch, &lookups); !s.ok()) return s;
  if (lookups > kMaxLookups) {
    return detail::invalid_argument(-1, lookups, "the cuda executor takes < 2^31 indices per batch");
  }
  return {};
}

// Copies go through the object's stream (non-blocking: it does not order
// with the legacy default stream) and are waited for, so the host buffer may
// go and no kernel can see a half-done copy.
template <typename T>
void upload(const DeviceBuffer& to, const T* from, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  ES_CUDA_CHECK(
      cudaMemcpyAsync(to.get(), from, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  ES_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<float> download(const float* from, size_t count, cudaStream_t stream) {
  std::vector<float> out(count);
  if (count == 0) return out;
  ES_CUDA_CHECK(cudaMemcpyAsync(out.data(), from, count * sizeof(float), cudaMemcpyDeviceToHost,
                                stream));
  ES_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

}  // namespace

struct CudaTbe::Impl {
  int device = 0;
  int num_sms = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t events[3] = {nullptr, nullptr, nullptr};
  Status forward_status, backward_status;
  bool uploaded = false;  // false when the arguments are invalid: nothing on the device
  bool grad_set = false;
  cuda_detail::UpdateParams params;
  std::vector<int64_t> rows;
  std::vector<int> dims;
  std::vector<DeviceBuffer> weights, momentum;  // each followed by kGuardFloats guards
  DeviceBuffer tables, warp_begin, row_begin, offsets, indices, per_sample_weights;
  DeviceBuffer output, grad_output;
  DeviceBuffer keys_in, keys_out, values_in, values_out, run_starts, num_runs, temp, hot_grads;
  cuda_detail::DeviceBatch batch;
  cuda_detail::BackwardScratch scratch;

  Impl(int device_ordinal, const OptimizerConfig& optimizer) : device(device_ordinal) {
    ES_CUDA_CHECK(cudaSetDevice(device));
    ES_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
    ES_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : events) ES_CUDA_CHECK(cudaEventCreate(&e));
    params.row_wise_adagrad = optimizer.type == OptimizerType::kRowWiseAdagrad;
    params.learning_rate = optimizer.learning_rate;
    params.eps = optimizer.eps;
  }

  ~Impl() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  void fill(float* values, int64_t count, float value) {
    ES_CUDA_CHECK(cuda_detail::launch_fill(values, count, value, stream));
  }

  // A buffer of `count` floats followed by guards.
  DeviceBuffer guarded(int64_t count, const char* what) {
    DeviceBuffer b((count + kGuardFloats) * sizeof(float), what);
    fill(b.as<float>() + count, kGuardFloats, kGuardValue);
    return b;
  }

  void upload_tables(const FusedBatch& fb);
  void upload_lookups(const FusedBatch& fb);
  void allocate_scratch();
  std::string check_guard(const DeviceBuffer& b, int64_t count, const std::string& what) const;
};

void CudaTbe::Impl::upload_tables(const FusedBatch& fb) {
  const int num_tables = static_cast<int>(fb.tables.size());
  std::vector<cuda_detail::DeviceTable> meta(num_tables);
  std::vector<int64_t> warp_starts(num_tables + 1, 0), row_starts(num_tables + 1, 0);
  for (int t = 0; t < num_tables; ++t) {
    const TableBatch& tb = fb.tables[t];
    rows.push_back(tb.rows);
    dims.push_back(tb.dim);
    const int64_t count = tb.rows * tb.dim;
    weights.push_back(guarded(count, "weights"));
    upload(weights.back(), tb.weights, count, stream);
    momentum.emplace_back();
    if (tb.momentum != nullptr) {
      momentum.back() = guarded(tb.rows, "momentum");
      upload(momentum.back(), tb.momentum, tb.rows, stream);
    }
    cuda_detail::DeviceTable& m = meta[t];
    m.weights = weights.back().as<float>();
    m.momentum = momentum.back().as<float>();
    m.rows = tb.rows;
    m.column = fb.column_offset(t);
    m.dim = tb.dim;
    m.lanes = cuda_detail::lanes_for_dim(tb.dim);
    m.weighted = tb.per_sample_weights != nullptr;
    m.vector_io = tb.dim % 4 == 0 && m.column % 4 == 0 && fb.total_dim() % 4 == 0;
    const int64_t bags_per_warp = cuda_detail::kWarpSize / m.lanes;
    warp_starts[t + 1] = warp_starts[t] + (fb.batch_size + bags_per_warp - 1) / bags_per_warp;
    row_starts[t + 1] = row_starts[t] + tb.rows;
  }
  tables = DeviceBuffer(meta.size() * sizeof(meta[0]), "table metadata");
  upload(tables, meta.data(), meta.size(), stream);
  warp_begin = DeviceBuffer(warp_starts.size() * sizeof(int64_t), "table warp starts");
  upload(warp_begin, warp_starts.data(), warp_starts.size(), stream);
  row_begin = DeviceBuffer(row_starts.size() * sizeof(int64_t), "table row starts");
  upload(row_begin, row_starts.data(), row_starts.size(), stream);
  batch.tables = tables.as<cuda_detail::DeviceTable>();
  batch.table_warp_begin = warp_begin.as<int64_t>();
  batch.table_row_begin = row_begin.as<int64_t>();
  batch.num_tables = num_tables;
  batch.total_warps = warp_starts.back();
  batch.total_rows = row_starts.back();
}

// Offsets made global (table t's bags follow table t - 1's), indices as
// int32 (rows < 2^31), per-sample weights concatenated.
void CudaTbe::Impl::upload_lookups(const FusedBatch& fb) {
  const int64_t bsz = fb.batch_size;
  std::vector<int64_t> global_offsets{0};
  global_offsets.reserve(fb.tables.size() * bsz + 1);
  std::vector<int32_t> all_indices;
  std::vector<float> all_weights;
  bool any_weighted = false;
  for (const TableBatch& tb : fb.tables) any_weighted |= tb.per_sample_weights != nullptr;
  for (const TableBatch& tb : fb.tables) {
    const int64_t base = global_offsets.back();
    for (int64_t b = 1; b <= bsz; ++b) global_offsets.push_back(base + tb.offsets[b]);
    const int64_t nnz = tb.offsets[bsz];
    for (int64_t i = 0; i < nnz; ++i) all_indices.push_back(static_cast<int32_t>(tb.indices[i]));
    if (any_weighted) {
      for (int64_t i = 0; i < nnz; ++i) {
        all_weights.push_back(tb.per_sample_weights != nullptr ? tb.per_sample_weights[i] : 1.0f);
      }
    }
  }
  offsets = DeviceBuffer(global_offsets.size() * sizeof(int64_t), "offsets");
  upload(offsets, global_offsets.data(), global_offsets.size(), stream);
  indices = DeviceBuffer(all_indices.size() * sizeof(int32_t), "indices");
  upload(indices, all_indices.data(), all_indices.size(), stream);
  per_sample_weights = DeviceBuffer(all_weights.size() * sizeof(float), "per-sample weights");
  upload(per_sample_weights, all_weights.data(), all_weights.size(), stream);
  batch.offsets = offsets.as<int64_t>();
  batch.indices = indices.as<int32_t>();
  batch.per_sample_weights = per_sample_weights.as<float>();
  batch.lookups = static_cast<int64_t>(all_indices.size());
}

void CudaTbe::Impl::allocate_scratch() {
  const int64_t n = batch.lookups;
  const size_t key_bytes = cuda_detail::key_bytes(batch.total_rows);
  keys_in = DeviceBuffer(n * key_bytes, "sort keys");
  keys_out = DeviceBuffer(n * key_bytes, "sorted keys");
  values_in = DeviceBuffer(n * sizeof(uint64_t), "sort values");
  values_out = DeviceBuffer(n * sizeof(uint64_t), "sorted values");
  run_starts = DeviceBuffer(n * sizeof(int32_t), "segment starts");
  num_runs = DeviceBuffer(sizeof(int32_t), "segment count");
  size_t temp_bytes = 0;
  if (n > 0) ES_CUDA_CHECK(cuda_detail::backward_temp_bytes(n, batch.total_rows, &temp_bytes));
  temp = DeviceBuffer(temp_bytes, "CUB temporary storage");
  int max_dim = 0;
  for (int dim : dims) max_dim = std::max(max_dim, dim);
  scratch.hot_stride = (max_dim + 3) / 4 * 4;
  hot_grads = DeviceBuffer(cuda_detail::run_chunks(n) * scratch.hot_stride * sizeof(float),
                           "hot rows' gradients");
  scratch.hot_grads = hot_grads.as<float>();
  scratch.keys_in = keys_in.get();
  scratch.keys_out = keys_out.get();
  scratch.values_in = values_in.as<uint64_t>();
  scratch.values_out = values_out.as<uint64_t>();
  scratch.run_starts = run_starts.as<int32_t>();
  scratch.num_runs = num_runs.as<int32_t>();
  scratch.temp = temp.get();
  scratch.temp_bytes = temp_bytes;
}

std::string CudaTbe::Impl::check_guard(const DeviceBuffer& b, int64_t count,
                                       const std::string& what) const {
  if (b.get() == nullptr) return "";
  const std::vector<float> guard = download(b.as<float>() + count, kGuardFloats, stream);
  for (int i = 0; i < kGuardFloats; ++i) {
    if (guard[i] != kGuardValue) {
      return fmt::format("{}: guard float {} past the end is {} (not {}); ", what, i, guard[i],
                         kGuardValue);
    }
  }
  return "";
}

CudaTbe::CudaTbe(const FusedBatch& fb, const OptimizerConfig& optimizer, int device)
    : impl_(std::make_unique<Impl>(device, optimizer)) {
  Impl& im = *impl_;
  // The CUDA kernels store fp32 tables and know SGD and row-wise Adagrad.
  Status forward_args = detail::check_arguments(fb, nullptr);
  for (size_t t = 0; t < fb.tables.size() && forward_args.ok(); ++t) {
    if (fb.tables[t].type != DataType::kFp32) {
      forward_args = detail::invalid_argument(
          static_cast<int>(t), static_cast<int64_t>(fb.tables[t].type),
          "the CUDA kernels store fp32 tables only, not " + data_type_name(fb.tables[t].type));
    }
  }
  Status backward_args = forward_args.ok() ? detail::check_arguments(fb, &optimizer) : forward_args;
  if (backward_args.ok() && optimizer.type == OptimizerType::kAdam) {
    backward_args = detail::invalid_argument(-1, 0, "the CUDA kernels have no Adam");
  }
  const Status lookups = forward_args.ok() ? check_lookups(fb) : Status{};
  im.forward_status = forward_args.ok() ? lookups : forward_args;
  im.backward_status = backward_args.ok() ? lookups : backward_args;
  // Unusable shapes or pointers, or a batch too large: upload nothing. (Bad
  // index values are uploaded; no kernel ever reads them.)
  if (!forward_args.ok() || lookups.code == Status::Code::kInvalidArgument) return;
  im.batch.batch_size = fb.batch_size;
  im.batch.total_dim = fb.total_dim();
  im.batch.mean = fb.pooling == PoolingMode::kMean;
  im.upload_tables(fb);
  im.upload_lookups(fb);
  const int64_t outputs = fb.batch_size * fb.total_dim();  // output_size() is 0 until uploaded
  im.output = im.guarded(outputs, "output");
  im.fill(im.output.as<float>(), outputs, kUnwrittenValue);
  im.grad_output = DeviceBuffer(outputs * sizeof(float), "grad_output");
  im.batch.output = im.output.as<float>();
  im.batch.grad_output = im.grad_output.as<float>();
  im.allocate_scratch();
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  im.uploaded = true;
}

CudaTbe::~CudaTbe() = default;

const Status& CudaTbe::forward_status() const { return impl_->forward_status; }
const Status& CudaTbe::backward_status() const { return impl_->backward_status; }

int64_t CudaTbe::output_size() const {
  return impl_->uploaded ? impl_->batch.batch_size * impl_->batch.total_dim : 0;
}

void CudaTbe::set_grad_output(const float* grad_output) {
  Impl& im = *impl_;
  if (!im.uploaded) return;
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));  // no step may be reading it
  upload(im.grad_output, grad_output, output_size(), im.stream);
  im.grad_set = true;
}

Status CudaTbe::forward() {
  Impl& im = *impl_;
  if (!im.forward_status.ok()) return im.forward_status;
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cuda_detail::launch_forward(im.batch, im.stream));
  return {};
}

Status CudaTbe::backward_update() {
  Impl& im = *impl_;
  if (!im.backward_status.ok()) return im.backward_status;
  if (!im.grad_set) {
    return detail::invalid_argument(-1, 0, "grad_output not set (call set_grad_output first)");
  }
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(
      cuda_detail::launch_backward_update(im.batch, im.scratch, im.params, im.num_sms, im.stream));
  return {};
}

StepTiming CudaTbe::time_step() {
  Impl& im = *impl_;
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaEventRecord(im.events[0], im.stream));
  Status s = forward();
  ES_CHECK(s.ok(), "cuda tbe: forward failed: {}", s.message());
  ES_CUDA_CHECK(cudaEventRecord(im.events[1], im.stream));
  s = backward_update();
  ES_CHECK(s.ok(), "cuda tbe: backward failed: {}", s.message());
  ES_CUDA_CHECK(cudaEventRecord(im.events[2], im.stream));
  ES_CUDA_CHECK(cudaEventSynchronize(im.events[2]));
  float fwd_ms = 0, bwd_ms = 0;
  ES_CUDA_CHECK(cudaEventElapsedTime(&fwd_ms, im.events[0], im.events[1]));
  ES_CUDA_CHECK(cudaEventElapsedTime(&bwd_ms, im.events[1], im.events[2]));
  StepTiming timing;
  timing.fwd_ms = fwd_ms;
  timing.bwd_ms = bwd_ms;
  return timing;
}

std::vector<float> CudaTbe::download_output() const {
  const Impl& im = *impl_;
  if (!im.uploaded) return {};
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  return download(im.output.as<float>(), output_size(), im.stream);
}

std::vector<float> CudaTbe::download_weights(int table) const {
  const Impl& im = *impl_;
  if (!im.uploaded) return {};
  ES_CHECK(table >= 0 && table < static_cast<int>(im.rows.size()),
           "cuda tbe: no table {} (the batch has {})", table, im.rows.size());
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  return download(im.weights[table].as<float>(), im.rows[table] * im.dims[table], im.stream);
}

std::vector<float> CudaTbe::download_momentum(int table) const {
  const Impl& im = *impl_;
  if (!im.uploaded) return {};
  ES_CHECK(table >= 0 && table < static_cast<int>(im.rows.size()),
           "cuda tbe: no table {} (the batch has {})", table, im.rows.size());
  if (im.momentum[table].get() == nullptr) return {};
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  return download(im.momentum[table].as<float>(), im.rows[table], im.stream);
}

std::string CudaTbe::damaged_guards() const {
  const Impl& im = *impl_;
  if (!im.uploaded) return "";
  ES_CUDA_CHECK(cudaSetDevice(im.device));
  ES_CUDA_CHECK(cudaStreamSynchronize(im.stream));
  std::string damage = im.check_guard(im.output, output_size(), "output");
  for (size_t t = 0; t < im.rows.size(); ++t) {
    damage += im.check_guard(im.weights[t], im.rows[t] * im.dims[t], fmt::format("weights {}", t));
    damage += im.check_guard(im.momentum[t], im.rows[t], fmt::format("momentum {}", t));
  }
  return damage;
}

}  // namespace embshard
