// Neural cost models: features and torch-free inference (the planner's path).
#include "embshard/cost/neural_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/ranges.h>

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

float log_positive(float x) {
  // Subtracting the bits of sqrt(1/2) puts the exponent k of x / sqrt(1/2)
  // in the top bits; x / 2^k is then in [sqrt(1/2), sqrt(2)). Integer ops
  // only, so that loops over arrays vectorise.
  constexpr uint32_t kSqrtHalf = 0x3f3504f3u;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t offset = bits - kSqrtHalf;
  const int32_t k = static_cast<int32_t>(offset) >> 23;
  const float m = std::bit_cast<float>(bits - (offset & 0xff800000u));
  const float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
  const float series =
      t * (2.0f + t2 * (2.0f / 3 + t2 * (2.0f / 5 + t2 * (2.0f / 7 + t2 * (2.0f / 9)))));
  return series + static_cast<float>(k) * 0.693147181f;
}

float table_exp(float x) { return std::exp(std::clamp(x, -kTableLogClamp, kTableLogClamp)); }

std::vector<int> Mlp::sizes() const {
  std::vector<int> s;
  if (layers.empty()) return s;
  s.push_back(layers.front().in);
  for (const DenseLayer& l : layers) s.push_back(l.out);
  return s;
}

namespace {

// out[o0 .. o0+B) = bias + sum_i in[i] * W^T[i, o0 .. o0+B): B accumulators
// that the compiler keeps in vector registers for the whole loop over inputs.
template <int B>
void dense_block(const DenseLayer& layer, const float* in, int o0, float* out) {
  float acc[B];
  for (int o = 0; o < B; ++o) acc[o] = layer.bias[o0 + o];
  const float* w = layer.weight_t.data() + o0;
  for (int i = 0; i < layer.in; ++i, w += layer.out) {
    const float xi = in[i];
    for (int o = 0; o < B; ++o) acc[o] += w[o] * xi;
  }
  for (int o = 0; o < B; ++o) out[o0 + o] = layer.relu ? std::max(acc[o], 0.0f) : acc[o];
}

// out[o] = bias + W[o, :] . in: eight partial sums, so that the loop
// vectorises without reassociating one long chain of adds.
void dense_dot(const DenseLayer& layer, const float* in, int o, float* out) {
  const float* w = layer.weight.data() + static_cast<size_t>(o) * layer.in;
  float part[8] = {};
  int i = 0;
  for (; i + 8 <= layer.in; i += 8) {
    for (int k = 0; k < 8; ++k) part[k] += w[i + k] * in[i + k];
  }
  float acc = layer.bias[o];
  for (; i < layer.in; ++i) acc += w[i] * in[i];
  for (float p : part) acc += p;
  out[o] = layer.relu ? std::max(acc, 0.0f) : acc;
}

}  // namespace

void Mlp::forward(const float* x, float* y) const {
  float buffers[2][kMaxWidth];
  const float* in = x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const DenseLayer& layer = layers[l];
    float* out = l + 1 == layers.size() ? y : buffers[l % 2];
    if (layer.weight_t.size() == layer.weight.size()) {
      // Blocks of 64 (eight independent vector chains hide the FMA latency),
      // 32 and 8 outputs, then dot products over the inputs (float
      // accumulation, like torch).
      int o = 0;
      for (; o + 64 <= layer.out; o += 64) dense_block<64>(layer, in, o, out);
      for (; o + 32 <= layer.out; o += 32) dense_block<32>(layer, in, o, out);
      for (; o + 8 <= layer.out; o += 8) dense_block<8>(layer, in, o, out);
      for (; o < layer.out; ++o) dense_dot(layer, in, o, out);
      in = out;
      continue;
    }
    // The reference: row-major weights, double accumulation.
    for (int o = 0; o < layer.out; ++o) {
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

double comm_wait_ms(std::span<const double> delays_ms, size_t device) {
  double max_delay = 0;
  for (double d : delays_ms) max_delay = std::max(max_delay, d);
  return std::max(0.0, max_delay - delays_ms[device]);
}

std::vector<double> comm_network_delays(const NeuralModel& model,
                                        std::span<const double> delays_ms) {
  std::vector<double> clipped(delays_ms.begin(), delays_ms.end());
  for (double& d : clipped) d = std::clamp(d, 0.0, model.comm_max_delay_ms);
  return clipped;
}

void predict_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                     std::span<const double> delays_ms, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) {
  ES_CHECK(model.has_comm,
           "neural cost model: this model has no communication model (it was "
           "trained without --comm)");
  ES_CHECK(fwd_ms.size() == dim_sums.size() && bwd_ms.size() == dim_sums.size() &&
               delays_ms.size() == dim_sums.size(),
           "neural cost model: comm outputs for {} / {} devices, inputs for {} / {}",
           fwd_ms.size(), bwd_ms.size(), dim_sums.size(), delays_ms.size());
  const std::vector<double> seen = comm_network_delays(model, delays_ms);
  float x[16];
  for (size_t d = 0; d < dim_sums.size(); ++d) {
    float y = 0;
    comm_raw_features(dim_sums, seen, static_cast<int>(d), model.comm_batch_size, x);
    float xb[16];
    std::copy(x, x + comm_bwd_feature_names().size(), xb);
    model.comm_fwd.features.apply(x);
    model.comm_fwd.mlp.forward(x, &y);
    fwd_ms[d] = comm_wait_ms(delays_ms, d) +
                output_to_ms(y, model.comm_fwd.target_mean, model.comm_fwd.target_std, "comm fwd");
    model.comm_bwd.features.apply(xb);
    model.comm_bwd.mlp.forward(xb, &y);
    bwd_ms[d] = output_to_ms(y, model.comm_bwd.target_mean, model.comm_bwd.target_std, "comm bwd");
  }
}

std::pair<int, int> comm_device_range(const NeuralModel& model) {
  int lo = 0, hi = 0;
  const nlohmann::json* files = nullptr;
  if (auto d = model.info.find("data"); d != model.info.end() && d->is_object()) {
    if (auto c = d->find("comm"); c != d->end() && c->is_array()) files = &*c;
  }
  if (!model.has_comm || files == nullptr) return {0, 0};
  for (const nlohmann::json& f : *files) {
    auto n = f.find("num_devices");
    if (n == f.end() || !n->is_number_integer()) return {0, 0};
    const int v = n->get<int>();
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  return {lo, hi};
}

NeuralCostModel::NeuralCostModel(NeuralModel model, int64_t batch_size,
                                 std::optional<Calibration> outside_range)
    : model_(std::move(model)),
      batch_size_(batch_size > 0 ? batch_size : model_.batch_size),
      // Without a batch asked for, each network predicts at its own batch.
      scale_(batch_size > 0 ? static_cast<double>(batch_size) / model_.batch_size : 1.0),
      comm_scale_(batch_size > 0 && model_.has_comm
                      ? static_cast<double>(batch_size) / model_.comm_batch_size
                      : 1.0),
      comm_range_(comm_device_range(model_)),
      outside_range_(std::move(outside_range)),
      embed_(model_.compute.table.out()) {
  model_.compute.table.prepare();
  model_.compute.head.prepare();
  if (model_.has_comm) {
    model_.comm_fwd.mlp.prepare();
    model_.comm_bwd.mlp.prepare();
  }
}

std::string NeuralCostModel::name() const {
  std::vector<std::string> notes;
  if (scale_ != 1.0 || comm_scale_ != 1.0) {
    notes.push_back(
        fmt::format("trained at batch {}, scaled to {}", model_.batch_size, batch_size_));
  }
  if (outside_range_ && comm_range_.first > 0) {
    notes.push_back(fmt::format("analytic comm outside {}-{} devices", comm_range_.first,
                                comm_range_.second));
  }
  if (notes.empty()) return "neural";
  return fmt::format("neural ({})", fmt::join(notes, "; "));
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
  double state[Mlp::kMaxWidth] = {};
  for (int id : table_ids) add_to_state(id, std::span<double>(state, embed_));
  return state_ms(std::span<const double>(state, embed_));
}

// The state is the sum of the shard's cached per-table outputs (exp'd).
void NeuralCostModel::add_to_state(int table_id, std::span<double> state) const {
  const int tables = static_cast<int>(embedded_.size() / embed_);
  ES_CHECK(table_id >= 0 && table_id < tables,
           "neural cost model: table id {} was never added ({} tables)", table_id, tables);
  const float* e = embedded_.data() + static_cast<size_t>(table_id) * embed_;
  for (int i = 0; i < embed_; ++i) state[i] += e[i];
}

double NeuralCostModel::state_ms(std::span<const double> state) const {
  if (state[0] == 0) return 0.0;  // the empty set (every output is exp'd, so > 0)
  float sum[Mlp::kMaxWidth];
  for (int i = 0; i < embed_; ++i) sum[i] = static_cast<float>(state[i]);
  for (int i = 0; i < embed_; ++i) sum[i] = log_positive(sum[i]);
  float y = 0;
  model_.compute.head.forward(sum, &y);
  return scale_ * output_to_ms(y, model_.compute.target_mean, model_.compute.target_std,
                               "compute");
}

void NeuralCostModel::comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
                              std::span<double> fwd_ms, std::span<double> bwd_ms) const {
  const int n = static_cast<int>(dim_sums.size());
  if (comm_range_.first > 0 && (n < comm_range_.first || n > comm_range_.second)) {
    ES_CHECK(outside_range_.has_value(),
             "neural cost model: its communication networks were trained on {}-{} devices, not "
             "{}, and no analytic calibration was given to stand in for them",
             comm_range_.first, comm_range_.second, n);
    analytic_comm_ms(*outside_range_, batch_size_, dim_sums, delays_ms, fwd_ms, bwd_ms);
    return;
  }
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
  // The analytic all-to-all stands in outside the device counts the
  // communication networks were trained on, when a calibration is at hand.
  std::optional<Calibration> outside_range;
  if (!options.calibration.empty() && std::filesystem::exists(options.calibration)) {
    outside_range = load_calibration(options.calibration);
  }
  return std::make_unique<NeuralCostModel>(std::move(model), options.batch_size,
                                           std::move(outside_range));
}

}  // namespace embshard
