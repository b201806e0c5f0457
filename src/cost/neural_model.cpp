// Neural cost models: features and torch-free inference (the planner's path).
#include "embshard/cost/neural_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "embshard/util/error.h"

namespace embshard {
namespace {

constexpr int kComputeScalarFeatures = 9;

// Mean access count of the rows in a reuse bin: the bin's midpoint, and for
// the open last bin twice its lower bound less a little (a guess; rare).
double bin_mean_count(int bin) {
  if (bin == kReuseBins - 1) return 1.5 * static_cast<double>(reuse_bin_lower(bin));
  return 0.5 * static_cast<double>(reuse_bin_lower(bin) + reuse_bin_upper(bin));
}

// Distinct rows a batch touches, from the histograms: TableFeatures carries no
// unique-row count, and training must see the same estimate as inference.
double estimate_unique_rows(const TableFeatures& t, int64_t batch) {
  const double lookups = static_cast<double>(batch) * t.pooling_factor;
  double unique_per_lookup = 0, lookup_mass = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    unique_per_lookup += t.lookup_reuse[k] / bin_mean_count(k);
    lookup_mass += t.lookup_reuse[k];
  }
  if (lookup_mass <= 0) {
    double lookups_per_unique = 0;
    for (int k = 0; k < kReuseBins; ++k) lookups_per_unique += t.row_reuse[k] * bin_mean_count(k);
    unique_per_lookup = lookups_per_unique > 0 ? 1.0 / lookups_per_unique : 1.0;
  } else {
    unique_per_lookup /= lookup_mass;
  }
  return std::min(static_cast<double>(t.rows), lookups * unique_per_lookup);
}

std::vector<std::string> make_compute_names() {
  std::vector<std::string> names = {"log_rows",           "log_dim",
                                    "log1p_pooling",      "log1p_dim_x_pooling",
                                    "log1p_lookups",      "log1p_unique_rows_est",
                                    "log1p_dim_x_unique", "log_weight_bytes",
                                    "unique_over_rows"};
  for (int k = 0; k < kReuseBins; ++k) names.push_back("row_reuse_" + std::to_string(k));
  for (int k = 0; k < kReuseBins; ++k) names.push_back("lookup_reuse_" + std::to_string(k));
  return names;
}

}  // namespace

float table_exp(float x) { return std::exp(std::clamp(x, -kTableLogClamp, kTableLogClamp)); }

std::vector<int> Mlp::sizes() const {
  std::vector<int> s;
  if (layers.empty()) return s;
  s.push_back(layers.front().in);
  for (const DenseLayer& l : layers) s.push_back(l.out);
  return s;
}

void Mlp::forward(const float* x, float* y) const {
  float buffers[2][kMaxWidth];
  const float* in = x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const DenseLayer& layer = layers[l];
    float* out = l + 1 == layers.size() ? y : buffers[l % 2];
    if (layer.weight_t.size() == layer.weight.size()) {
      // out = bias + sum_i x_i * W^T[i, :]: the inner loop is contiguous and
      // independent per output, so the compiler vectorises it.
      float* __restrict acc = out;
      std::copy(layer.bias.begin(), layer.bias.end(), acc);
      for (int i = 0; i < layer.in; ++i) {
        const float xi = in[i];
        const float* __restrict w = layer.weight_t.data() + static_cast<size_t>(i) * layer.out;
        for (int o = 0; o < layer.out; ++o) acc[o] += w[o] * xi;
      }
      if (layer.relu) {
        for (int o = 0; o < layer.out; ++o) out[o] = std::max(out[o], 0.0f);
      }
      in = out;
      continue;
    }
    for (int o = 0; o < layer.out; ++o) {
      // Double accumulation: the fast path should be closer to exact than torch's sgemm.
      const float* w = layer.weight.data() + static_cast<size_t>(o) * layer.in;
      double acc = layer.bias[o];
      for (int i = 0; i < layer.in; ++i) acc += static_cast<double>(w[i]) * in[i];
      out[o] = layer.relu && acc < 0 ? 0.0f : static_cast<float>(acc);
    }
    in = out;
  }
}

void Mlp::prepare() {
  for (DenseLayer& l : layers) {
    l.weight_t.resize(l.weight.size());
    for (size_t o = 0; o < static_cast<size_t>(l.out); ++o) {
      for (size_t i = 0; i < static_cast<size_t>(l.in); ++i) {
        l.weight_t[i * l.out + o] = l.weight[o * l.in + i];
      }
    }
  }
}

void Normaliser::apply(float* x) const {
  for (size_t i = 0; i < mean.size(); ++i) x[i] = (x[i] - mean[i]) * scale[i];
}

const std::vector<std::string>& compute_feature_names() {
  static const std::vector<std::string> names = make_compute_names();
  return names;
}

const std::vector<std::string>& comm_fwd_feature_names() {
  static const std::vector<std::string> names = {"log1p_own_dim_sum",
                                                 "log1p_others_dim_sum",
                                                 "log1p_others_max_dim_sum",
                                                 "log1p_others_mean_dim_sum",
                                                 "log1p_others_min_dim_sum",
                                                 "log_devices",
                                                 "log1p_send_mb",
                                                 "log1p_recv_mb",
                                                 "log1p_busiest_device_mb",
                                                 "own_delay_ms",
                                                 "wait_ms",
                                                 "max_delay_ms",
                                                 "log1p_wait_ms"};
  return names;
}

const std::vector<std::string>& comm_bwd_feature_names() {
  static const std::vector<std::string> names(comm_fwd_feature_names().begin(),
                                              comm_fwd_feature_names().begin() + 9);
  return names;
}

void compute_raw_features(const TableFeatures& t, int64_t batch, float* out) {
  ES_CHECK(t.rows > 0 && t.dim > 0 && std::isfinite(t.pooling_factor) && t.pooling_factor >= 0,
           "neural cost model: invalid table (rows {}, dim {}, pooling factor {})", t.rows, t.dim,
           t.pooling_factor);
  for (int k = 0; k < kReuseBins; ++k) {
    ES_CHECK(std::isfinite(t.row_reuse[k]) && std::isfinite(t.lookup_reuse[k]),
             "neural cost model: table (rows {}, dim {}) has a non-finite reuse share in bin {}",
             t.rows, t.dim, k);
  }
  const double unique = estimate_unique_rows(t, batch);
  const double rows = static_cast<double>(t.rows), dim = t.dim;
  const double scalars[kComputeScalarFeatures] = {
      std::log(rows),
      std::log(dim),
      std::log1p(t.pooling_factor),
      std::log1p(dim * t.pooling_factor),
      std::log1p(static_cast<double>(batch) * t.pooling_factor),
      std::log1p(unique),
      std::log1p(dim * unique),
      std::log(rows * dim * 4),
      unique / rows};
  for (int i = 0; i < kComputeScalarFeatures; ++i) out[i] = static_cast<float>(scalars[i]);
  for (int k = 0; k < kReuseBins; ++k) {
    out[kComputeScalarFeatures + k] = static_cast<float>(t.row_reuse[k]);
    out[kComputeScalarFeatures + kReuseBins + k] = static_cast<float>(t.lookup_reuse[k]);
  }
}

void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out) {
  const size_t n = dim_sums.size();
  ES_CHECK(n >= 1 && delays_ms.size() == n && device >= 0 && static_cast<size_t>(device) < n,
           "neural cost model: comm of device {} with {} dim sums and {} delays", device, n,
           delays_ms.size());
  double others_sum = 0, others_max = 0, others_min = n > 1 ? 1e300 : 0, max_delay = 0;
  for (size_t d = 0; d < n; ++d) {
    ES_CHECK(std::isfinite(dim_sums[d]) && dim_sums[d] >= 0 && std::isfinite(delays_ms[d]) &&
                 delays_ms[d] >= 0,
             "neural cost model: device {} has dim sum {} and delay {} ms (must be finite, >= 0)",
             d, dim_sums[d], delays_ms[d]);
    max_delay = std::max(max_delay, delays_ms[d]);
    if (d == static_cast<size_t>(device)) continue;
    others_sum += dim_sums[d];
    others_max = std::max(others_max, dim_sums[d]);
    others_min = std::min(others_min, dim_sums[d]);
  }
  // Bytes each device moves: it sends batch/N rows of its dim sum to each of
  // the N-1 others and receives batch/N rows of each other's dim sum.
  const double rows_per_peer = static_cast<double>(batch) / static_cast<double>(n);
  const double mb = rows_per_peer * 4 / 1e6, total = others_sum + dim_sums[device];
  double busiest_mb = 0;
  for (size_t d = 0; d < n; ++d) {
    busiest_mb = std::max(busiest_mb, mb * (dim_sums[d] * (n - 1) + (total - dim_sums[d])));
  }
  const double own = dim_sums[device], wait = max_delay - delays_ms[device];
  const double values[] = {std::log1p(own),
                           std::log1p(others_sum),
                           std::log1p(others_max),
                           std::log1p(n > 1 ? others_sum / (n - 1) : 0.0),
                           std::log1p(others_min),
                           std::log(static_cast<double>(n)),
                           std::log1p(mb * own * (n - 1)),
                           std::log1p(mb * others_sum),
                           std::log1p(busiest_mb),
                           delays_ms[device],
                           wait,
                           max_delay,
                           std::log1p(wait)};
  static_assert(sizeof(values) / sizeof(values[0]) == 13);
  for (int i = 0; i < 13; ++i) out[i] = static_cast<float>(values[i]);
}

double output_to_ms(double y, double target_mean, double target_std, const char* what) {
  ES_CHECK(std::isfinite(y),
           "neural cost model: the {} network produced {} (not finite): the "
           "model or its inputs are broken",
           what, y);
  const double log_ms = std::clamp(y * target_std + target_mean, std::log(1e-6), std::log(1e7));
  return std::exp(log_ms);
}

double predict_compute_ms(const NeuralModel& model, std::span<const TableFeatures> tables) {
  const ComputeNet& net = model.compute;
  if (tables.empty()) return 0.0;
  std::vector<float> x(compute_feature_names().size()), e(net.table.out()),
      sum(net.table.out(), 0.0f);
  for (const TableFeatures& t : tables) {
    compute_raw_features(t, model.batch_size, x.data());
    net.features.apply(x.data());
    net.table.forward(x.data(), e.data());
    for (size_t i = 0; i < e.size(); ++i) sum[i] += table_exp(e[i]);
  }
  for (float& v : sum) v = std::log(v);
  float y = 0;
  net.head.forward(sum.data(), &y);
  return output_to_ms(y, net.target_mean, net.target_std, "compute");
}

void predict_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                     std::span<const double> delays_ms, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) {
  ES_CHECK(model.has_comm,
           "neural cost model: this model has no communication model (it was "
           "trained without --comm)");
  ES_CHECK(fwd_ms.size() == dim_sums.size() && bwd_ms.size() == dim_sums.size(),
           "neural cost model: comm outputs for {} / {} devices, inputs for {}", fwd_ms.size(),
           bwd_ms.size(), dim_sums.size());
  float x[16];
  for (size_t d = 0; d < dim_sums.size(); ++d) {
    float y = 0;
    comm_raw_features(dim_sums, delays_ms, static_cast<int>(d), model.comm_batch_size, x);
    float xb[16];
    std::copy(x, x + comm_bwd_feature_names().size(), xb);
    model.comm_fwd.features.apply(x);
    model.comm_fwd.mlp.forward(x, &y);
    fwd_ms[d] = output_to_ms(y, model.comm_fwd.target_mean, model.comm_fwd.target_std, "comm fwd");
    model.comm_bwd.features.apply(xb);
    model.comm_bwd.mlp.forward(xb, &y);
    bwd_ms[d] = output_to_ms(y, model.comm_bwd.target_mean, model.comm_bwd.target_std, "comm bwd");
  }
}

NeuralCostModel::NeuralCostModel(NeuralModel model, int64_t batch_size)
    : model_(std::move(model)),
      batch_size_(batch_size > 0 ? batch_size : model_.batch_size),
      // Without a batch asked for, each network predicts at its own batch.
      scale_(batch_size > 0 ? static_cast<double>(batch_size) / model_.batch_size : 1.0),
      comm_scale_(batch_size > 0 && model_.has_comm
                      ? static_cast<double>(batch_size) / model_.comm_batch_size
                      : 1.0),
      embed_(model_.compute.table.out()) {
  model_.compute.table.prepare();
  model_.compute.head.prepare();
  if (model_.has_comm) {
    model_.comm_fwd.mlp.prepare();
    model_.comm_bwd.mlp.prepare();
  }
}

std::string NeuralCostModel::name() const {
  if (scale_ == 1.0 && comm_scale_ == 1.0) return "neural";
  return fmt::format("neural (trained at batch {}, scaled to {})", model_.batch_size, batch_size_);
}

int NeuralCostModel::add_table(const TableFeatures& table) {
  const ComputeNet& net = model_.compute;
  float x[Mlp::kMaxWidth];
  compute_raw_features(table, model_.batch_size, x);
  net.features.apply(x);
  const size_t at = embedded_.size();
  embedded_.resize(at + embed_);
  float* e = embedded_.data() + at;
  net.table.forward(x, e);
  for (int i = 0; i < embed_; ++i) e[i] = table_exp(e[i]);
  return static_cast<int>(at / embed_);
}

double NeuralCostModel::compute_ms(std::span<const int> table_ids) const {
  if (table_ids.empty()) return 0.0;
  const int tables = static_cast<int>(embedded_.size() / embed_);
  float sum[Mlp::kMaxWidth] = {};
  for (int id : table_ids) {
    ES_CHECK(id >= 0 && id < tables, "neural cost model: table id {} was never added ({} tables)",
             id, tables);
    const float* e = embedded_.data() + static_cast<size_t>(id) * embed_;
    for (int i = 0; i < embed_; ++i) sum[i] += e[i];
  }
  for (int i = 0; i < embed_; ++i) sum[i] = std::log(sum[i]);
  float y = 0;
  model_.compute.head.forward(sum, &y);
  return scale_ * output_to_ms(y, model_.compute.target_mean, model_.compute.target_std,
                               "compute");
}

void NeuralCostModel::comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
                              std::span<double> fwd_ms, std::span<double> bwd_ms) const {
  if (comm_scale_ == 1.0) {
    predict_comm_ms(model_, dim_sums, delays_ms, fwd_ms, bwd_ms);
    return;
  }
  // Delays are in this batch's milliseconds; the model's are in its own.
  std::vector<double> delays(delays_ms.begin(), delays_ms.end());
  for (double& d : delays) d /= comm_scale_;
  predict_comm_ms(model_, dim_sums, delays, fwd_ms, bwd_ms);
  for (double& v : fwd_ms) v *= comm_scale_;
  for (double& v : bwd_ms) v *= comm_scale_;
}

}  // namespace embshard

namespace embshard {

std::unique_ptr<CostModel> make_neural_cost_model(const CostModelOptions& options) {
  ES_CHECK(!options.model_dir.empty(), "neural cost model: no model directory given (--model DIR)");
  NeuralModel model = load_neural_model(options.model_dir);
  ES_CHECK(options.batch_size >= 0, "neural cost model: batch size {} is negative",
           options.batch_size);
  return std::make_unique<NeuralCostModel>(std::move(model), options.batch_size);
}

}  // namespace embshard
