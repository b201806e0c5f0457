// The neural cost models at work: predictions from a loaded NeuralModel
// (neural/model_file.h), and the planner's ComputeModel and CommModel over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model_file.h"

namespace embshard {

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

// Past this many standard deviations of the training tables' log rows, log
// dim or log pooling factor, a table is reported as far from them (about 1
// in 15,000 of a normal distribution's draws).
constexpr float kFarFromTraining = 4.0f;

// How a model serves `batch`: inside the batches its data covered
// [lo, hi], the networks take the batch itself; outside, the nearest covered
// batch, and the cost is scaled linearly by batch / that batch (the work of
// lookups and all-to-alls grows with the batch) -- an extrapolation the
// model's name then admits.
struct BatchFit {
  int64_t network_batch = 0;
  double scale = 1.0;
};
BatchFit fit_batch(int64_t lo, int64_t hi, int64_t batch);
// A fitted model's batch correction at `batch` (1 for a model not fitted).
double batch_factor(const NeuralModel& model, int64_t batch);

// Reference predictions at `batch` (0: the model's batch_size), no caching:
// the slow, obvious path.
double predict_compute_ms(const NeuralModel& model, std::span<const TableFeatures> tables,
                          int64_t batch = 0);
void predict_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                     std::span<const double> delays_ms, std::span<double> fwd_ms,
                     std::span<double> bwd_ms, int64_t batch = 0);

// The device counts the communication data covered, from the manifest's
// data files ({0, 0} when it does not say).
std::pair<int, int> comm_device_range(const NeuralModel& model);

// The planner's view of the compute network: tables' MLP outputs are cached
// at add_table. Predicts for `batch_size` (0: the model's smallest), through
// fit_batch: name() says when that is an extrapolation.
class NeuralComputeModel : public ComputeModel {
 public:
  explicit NeuralComputeModel(std::shared_ptr<const NeuralModel> model, int64_t batch_size = 0);
  std::string name() const override;  // "neural" or "neural (notes)"
  std::vector<std::string> notes() const;  // e.g. "trained at batch 2048, scaled to 4096"
  int64_t batch_size() const override { return batch_size_; }
  int add_table(const TableFeatures& table) override;
  double compute_ms(std::span<const int> table_ids) const override;
  size_t state_size() const override { return static_cast<size_t>(embed_); }
  void add_to_state(int table_id, std::span<double> state) const override;
  double state_ms(std::span<const double> state) const override;
  // Rows, dim or pooling factor more than kFarFromTraining standard
  // deviations from the training tables' mean, on the log scale the network
  // sees them on (or other than a value every training table had). Not the
  // reuse histograms: their bins are heavy-tailed, and tables like the
  // training ones lie past 4 or even the clamp's 6 in one bin or another.
  std::string far_from_training(const TableFeatures& table) const override;
  const NeuralModel& model() const { return *model_; }

 private:
  std::shared_ptr<const NeuralModel> model_;  // networks prepared for the fast path
  int64_t batch_size_ = 0;
  BatchFit fit_;
  int embed_ = 0;                // per-table MLP output width
  std::vector<float> embedded_;  // table id * embed_: cached per-table outputs
};

// The communication networks at `batch_size`, through fit_batch like the
// compute model.
// `outside_range`: the calibration whose all-to-all formula (latency + bytes
// / bandwidth) stands in for the networks at device counts outside
// comm_device_range: a network trained on 2-8 ranks says nothing reliable
// about 64. Without one, such counts are an Error.
class NeuralCommModel : public CommModel {
 public:
  NeuralCommModel(std::shared_ptr<const NeuralModel> model, int64_t batch_size = 0,
                  std::optional<Calibration> outside_range = std::nullopt);
  std::string name() const override;
  std::vector<std::string> notes() const;
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override;
  // The networks learned the pooled all-to-all only: the row-wise and
  // data-parallel collectives are the analytic formula with the calibration
  // given (the shipped analytic.json for the shipped set); Error without one.
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) const override;
  // The analytic floor where the formula stands in; the networks prove none.
  double floor_ms(double total_dims, int devices) const override;

 private:
  bool outside(int devices) const {
    return range_.first > 0 && (devices < range_.first || devices > range_.second);
  }
  std::shared_ptr<const NeuralModel> model_;
  int64_t batch_size_ = 0;
  BatchFit fit_;
  std::pair<int, int> range_;
  std::optional<Calibration> outside_range_;
};

// The model with its networks prepared for the fast path (Mlp::prepare), as
// the compute and comm models want it; load_prepared_neural_model loads `dir`.
std::shared_ptr<const NeuralModel> prepared_neural_model(NeuralModel model);
std::shared_ptr<const NeuralModel> load_prepared_neural_model(const std::string& dir);
// The compute files whose machine a model predicts for: a fitted model's
// (`fitted.scale.compute`: the machine `fit` measured), else its training
// data's (`data.compute`); null when the manifest lists none.
const nlohmann::json* measured_compute_files(const NeuralModel& model);

// The pair, named as reports show it: "neural", or "neural (trained at
// batches 1024-8192, scaled to 65536; analytic comm outside 2-8 devices)".
CostModel make_neural_cost_model(std::shared_ptr<const NeuralModel> model, int64_t batch_size,
                                 std::optional<Calibration> outside_range = std::nullopt);

}  // namespace embshard
