// The neural cost models: weights, features, torch-free inference, files.
//
// Compute (NeuroShard's structure): each table's features -> per-table MLP
// -> exp -> sum over the shard's tables -> log -> head MLP -> the normalised
// log of the shard's milliseconds. The sum makes the model serve any number
// of tables, and lets inference cache each table's exp'd MLP output: a
// shard's cost is a sum of cached vectors plus one small head MLP. Summing
// exp'd outputs (a log-sum-exp per channel) rather than raw ReLU outputs
// lets a channel carry a table's log cost, which then adds up exactly: costs
// span five decades, which a ReLU MLP fits poorly on a linear scale.
//
// Communication (beyond NeuroShard): ONE model per direction serves any device
// count. Each device is described by its own dim sum and delay plus
// reductions over the other devices (sum, max, mean, min of dim sums, max
// delay) and the device count; the MLP maps that to the device's log ms.
//
// Training lives in neural_train.h (libtorch); everything here is plain C++
// so that the planner stays fast and torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "embshard/cost/analytic.h"
#include "embshard/cost/cost_model.h"

namespace embshard {

// y = W x + b, then ReLU if `relu`. `weight` is out x in, row-major
// (torch::nn::Linear's layout), so weights copy to and from torch unchanged.
struct DenseLayer {
  int in = 0, out = 0;
  bool relu = true;
  std::vector<float> weight, bias;
  std::vector<float> weight_t;  // in x out: filled by Mlp::prepare for the fast loop
};

struct Mlp {
  std::vector<DenseLayer> layers;
  int in() const { return layers.empty() ? 0 : layers.front().in; }
  int out() const { return layers.empty() ? 0 : layers.back().out; }
  std::vector<int> sizes() const;  // in, hidden..., out
  // y = mlp(x). Activations live on the stack (widths <= kMaxWidth), so
  // forward allocates nothing and is safe to call from many threads.
  static constexpr int kMaxWidth = 512;
  void forward(const float* x, float* y) const;
  // Transposes the weights so that forward's inner loop runs over outputs
  // (contiguous, vectorised); forward falls back to the row-major loop
  // (double accumulation) for layers not prepared.
  void prepare();
};

// x' = (x - mean) * scale, per feature; scale = 1 / std of the training set.
struct Normaliser {
  std::vector<float> mean, scale;
  void apply(float* x) const;
};

// The per-table outputs are clamped to +-kTableLogClamp before exp, so that
// sums stay finite in float.
constexpr float kTableLogClamp = 30.0f;
float table_exp(float x);
// Natural log of a positive normal float, branch-free so that a loop over an
// array vectorises (std::log does not): x = m 2^e with m in [sqrt(1/2),
// sqrt(2)), log m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172, by its
// series to t^9 (truncation < 1e-9). Within a few float ulps of std::log.
float log_positive(float x);

struct ComputeNet {
  Normaliser features;                     // per-table features
  Mlp table;                               // per-table MLP (linear output)
  Mlp head;                                // log(sum of exp(table outputs)) -> normalised log ms
  double target_mean = 0, target_std = 1;  // log ms = y * target_std + target_mean
};

struct CommNet {
  Normaliser features;
  Mlp mlp;
  double target_mean = 0, target_std = 1;
};

struct NeuralModel {
  int64_t batch_size = 0;       // of the compute data
  int64_t comm_batch_size = 0;  // of the comm data (0: no comm model)
  ComputeNet compute;
  bool has_comm = false;
  CommNet comm_fwd, comm_bwd;
  // The largest straggler delay in the comm training data: the networks see
  // delays clipped to [0, this] (comm_network_delays).
  double comm_max_delay_ms = 0;
  // Everything else the manifest says (data files, machine, options, accuracy).
  nlohmann::json info = nlohmann::json::object();
};

// Feature names in order: what the manifest records and load checks.
const std::vector<std::string>& compute_feature_names();
const std::vector<std::string>& comm_fwd_feature_names();
const std::vector<std::string>& comm_bwd_feature_names();  // a prefix of the fwd names

// Raw (unnormalised) features of one table at `batch` bags; `out` gets
// compute_feature_names().size() floats. Error if the table is invalid.
void compute_raw_features(const TableFeatures& table, int64_t batch, float* out);
// Raw features of `device`; `out` gets comm_fwd_feature_names().size() floats
// (the bwd model reads the first comm_bwd_feature_names().size()).
void comm_raw_features(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       int device, int64_t batch, float* out);

// From a network output (normalised log ms) to ms; Error if not finite, and
// clamped to [1e-6, 1e7] ms so that no absurd value reaches the planner.
double output_to_ms(double y, double target_mean, double target_std, const char* what);

// The forward all-to-all of device d cannot end before the last device
// starts its own: forward = wait_d (max delay - delay_d) + a transfer time the
// network predicts. The network is trained on transfer times (measured
// forward - wait, at least kMinTransferMs) and sees the delays clipped to the
// range of its training data, so that a wait of 100 ms is added, not
// extrapolated from waits of 0-5 ms.
constexpr double kMinTransferMs = 0.01;
double comm_wait_ms(std::span<const double> delays_ms, size_t device);
std::vector<double> comm_network_delays(const NeuralModel& model,
                                        std::span<const double> delays_ms);

// Reference predictions (no caching): the slow, obvious path.
double predict_compute_ms(const NeuralModel& model, std::span<const TableFeatures> tables);
void predict_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                     std::span<const double> delays_ms, std::span<double> fwd_ms,
                     std::span<double> bwd_ms);

// A model directory: manifest.json + one weight file per network.
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kManifestFormat = "embshard-neural-cost-model";
constexpr int kManifestVersion = 2;  // 2: forward = wait + network

// Writes the weight files and then the manifest, each atomically.
void save_neural_model(const NeuralModel& model, const std::string& dir);
// Validates everything (format, version, feature names, layer sizes,
// checksums, finite weights); Error names the file at fault.
NeuralModel load_neural_model(const std::string& dir);

// CRC-32 of a file's bytes (zlib), for the manifest's data file hashes.
uint32_t file_crc32(const std::string& path);

// The planner's view: tables' MLP outputs are cached at add_table.
// Predicts for `batch_size` (0: the model's own). At another batch than the
// model was trained at, costs are scaled linearly by the batch ratio (the
// work of embedding lookups and all-to-alls grows with the batch); name()
// says so, and an exact model needs data measured at that batch.
// The device counts the communication data covered, from the manifest's
// data files ({0, 0} when it does not say).
std::pair<int, int> comm_device_range(const NeuralModel& model);

class NeuralCostModel : public CostModel {
 public:
  // `outside_range`: the calibration whose all-to-all formula (latency +
  // bytes / bandwidth) stands in for the communication networks at device
  // counts outside comm_device_range: a network trained on 2-8 ranks says
  // nothing reliable about 64. Without one, such counts are an Error.
  explicit NeuralCostModel(NeuralModel model, int64_t batch_size = 0,
                           std::optional<Calibration> outside_range = std::nullopt);
  std::string name() const override;
  int64_t batch_size() const override { return batch_size_; }
  int add_table(const TableFeatures& table) override;
  double compute_ms(std::span<const int> table_ids) const override;
  size_t state_size() const override { return static_cast<size_t>(embed_); }
  void add_to_state(int table_id, std::span<double> state) const override;
  double state_ms(std::span<const double> state) const override;
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override;
  const NeuralModel& model() const { return model_; }

 private:
  NeuralModel model_;
  int64_t batch_size_ = 0;
  double scale_ = 1.0;           // batch_size_ / the compute model's batch
  double comm_scale_ = 1.0;      // batch_size_ / the communication models' batch
  std::pair<int, int> comm_range_;
  std::optional<Calibration> outside_range_;
  int embed_ = 0;                // per-table MLP output width
  std::vector<float> embedded_;  // table id * embed_: cached per-table outputs
};

}  // namespace embshard
