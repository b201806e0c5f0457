// The neural cost models at work: predictions, and the planner's compute and
// communication models over a loaded model.
#include "embshard/cost/neural/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/model.h"
#include "embshard/cost/analytic/terms.h"
#include "embshard/cost/neural/features.h"
#include "embshard/util/error.h"

namespace embshard {

double output_to_ms(double y, double target_mean, double target_std, const char* what) {
  ES_CHECK(std::isfinite(y),
           "neural cost model: the {} network produced {} (not finite): the "
           "model or its inputs are broken",
           what, y);
  const double log_ms = std::clamp(y * target_std + target_mean, std::log(1e-6), std::log(1e7));
  return std::exp(log_ms);
}

double batch_factor(const NeuralModel& model, int64_t batch) {
  if (model.batch_correction == 0) return 1.0;
  return std::pow(static_cast<double>(batch) / static_cast<double>(model.batch_size),
                  model.batch_correction);
}

BatchFit fit_batch(int64_t lo, int64_t hi, int64_t batch) {
  ES_CHECK(lo > 0 && hi >= lo && batch > 0, "neural cost model: batch {} for a model of batches "
           "{}-{}", batch, lo, hi);
  BatchFit f;
  f.network_batch = std::clamp(batch, lo, hi);
  f.scale = static_cast<double>(batch) / static_cast<double>(f.network_batch);
  return f;
}

double predict_compute_ms(const NeuralModel& model, std::span<const TableFeatures> tables,
                          int64_t batch) {
  const ComputeNet& net = model.compute;
  if (tables.empty()) return 0.0;
  const BatchFit fit =
      fit_batch(model.batch_size, model.max_batch_size, batch > 0 ? batch : model.batch_size);
  std::vector<float> x(net.inputs().size()), e(net.table.out()), sum(net.table.out(), 0.0f);
  for (const TableFeatures& t : tables) {
    compute_raw_features(t, fit.network_batch, x.data(), net.inputs());
    net.features.apply(x.data());
    net.table.forward(x.data(), e.data());
    for (size_t i = 0; i < e.size(); ++i) sum[i] += table_exp(e[i]);
  }
  for (float& v : sum) v = std::log(v);
  float y = 0;
  net.head.forward(sum.data(), &y);
  return fit.scale * batch_factor(model, batch > 0 ? batch : model.batch_size) *
         output_to_ms(y, net.target_mean, net.target_std, "compute");
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
                     std::span<double> bwd_ms, int64_t batch) {
  ES_CHECK(model.has_comm,
           "neural cost model: this model has no communication model (it was "
           "trained without --comm)");
  ES_CHECK((fwd_ms.empty() || fwd_ms.size() == dim_sums.size()) &&
               (bwd_ms.empty() || bwd_ms.size() == dim_sums.size()) &&
               delays_ms.size() == dim_sums.size(),
           "neural cost model: comm outputs for {} / {} devices, inputs for {} / {}",
           fwd_ms.size(), bwd_ms.size(), dim_sums.size(), delays_ms.size());
  const BatchFit fit = fit_batch(model.comm_batch_size, model.comm_max_batch_size,
                                 batch > 0 ? batch : model.comm_batch_size);
  // Delays are in this batch's milliseconds; the networks' in their batch's.
  std::vector<double> delays(delays_ms.begin(), delays_ms.end());
  for (double& d : delays) d /= fit.scale;
  const std::vector<double> seen = comm_network_delays(model, delays);
  float x[16];
  for (size_t d = 0; d < dim_sums.size(); ++d) {
    float y = 0;
    comm_raw_features(dim_sums, seen, static_cast<int>(d), fit.network_batch, x);
    if (!bwd_ms.empty()) {
      float xb[16];
      std::copy(x, x + comm_bwd_feature_names().size(), xb);
      model.comm_bwd.features.apply(xb);
      model.comm_bwd.mlp.forward(xb, &y);
      bwd_ms[d] = fit.scale * output_to_ms(y, model.comm_bwd.target_mean,
                                           model.comm_bwd.target_std, "comm bwd");
    }
    if (!fwd_ms.empty()) {
      model.comm_fwd.features.apply(x);
      model.comm_fwd.mlp.forward(x, &y);
      fwd_ms[d] = comm_wait_ms(delays_ms, d) +
                  fit.scale * output_to_ms(y, model.comm_fwd.target_mean,
                                           model.comm_fwd.target_std, "comm fwd");
    }
  }
}

namespace {

// The array at `path` in a model's manifest info; nullptr where there is none
// or it is empty.
const nlohmann::json* info_array(const NeuralModel& model,
                                 std::initializer_list<const char*> path) {
  const nlohmann::json* j = &model.info;
  for (const char* key : path) {
    if (!j->is_object() || !j->contains(key)) return nullptr;
    j = &(*j)[key];
  }
  return j->is_array() && !j->empty() ? j : nullptr;
}

// The device counts of comm data files' headers ({0, 0}: one does not say).
std::pair<int, int> device_range(const nlohmann::json& files) {
  int lo = 0, hi = 0;
  for (const nlohmann::json& f : files) {
    auto n = f.find("num_devices");
    if (n == f.end() || !n->is_number_integer()) return {0, 0};
    const int v = n->get<int>();
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  return {lo, hi};
}

}  // namespace

std::pair<int, int> comm_device_range(const NeuralModel& model) {
  const nlohmann::json* files = info_array(model, {"data", "comm"});
  return model.has_comm && files != nullptr ? device_range(*files) : std::pair<int, int>{0, 0};
}

std::shared_ptr<const NeuralModel> load_prepared_neural_model(const std::string& dir) {
  return prepared_neural_model(load_neural_model(dir));
}

std::shared_ptr<const NeuralModel> prepared_neural_model(NeuralModel loaded) {
  auto model = std::make_shared<NeuralModel>(std::move(loaded));
  model->compute.table.prepare();
  model->compute.head.prepare();
  if (model->has_comm) {
    model->comm_fwd.mlp.prepare();
    model->comm_bwd.mlp.prepare();
  }
  return model;
}

NeuralComputeModel::NeuralComputeModel(std::shared_ptr<const NeuralModel> model,
                                       int64_t batch_size)
    : model_(std::move(model)),
      batch_size_(batch_size > 0 ? batch_size : model_->batch_size),
      fit_(fit_batch(model_->batch_size, model_->max_batch_size, batch_size_)),
      embed_(model_->compute.table.out()) {}

namespace {

std::string neural_name(const std::vector<std::string>& notes) {
  if (notes.empty()) return "neural";
  return fmt::format("neural ({})", fmt::join(notes, "; "));
}

// `what`: "compute" or "comm", whichever networks were scaled.
std::string extrapolation_note(const char* what, int64_t lo, int64_t hi, int64_t batch) {
  if (lo == hi) return fmt::format("{} trained at batch {}, scaled to {}", what, lo, batch);
  return fmt::format("{} trained at batches {}-{}, scaled to {}", what, lo, hi, batch);
}

}  // namespace

std::vector<std::string> NeuralComputeModel::notes() const {
  if (fit_.scale == 1.0) return {};
  return {extrapolation_note("compute", model_->batch_size, model_->max_batch_size, batch_size_)};
}

std::string NeuralComputeModel::name() const { return neural_name(notes()); }

int NeuralComputeModel::add_table(const TableFeatures& table) {
  const ComputeNet& net = model_->compute;
  float x[Mlp::kMaxWidth];
  compute_raw_features(table, fit_.network_batch, x, net.inputs());
  net.features.apply(x);
  const size_t at = embedded_.size();
  embedded_.resize(at + embed_);
  float* e = embedded_.data() + at;
  net.table.forward(x, e);
  for (int i = 0; i < embed_; ++i) e[i] = table_exp(e[i]);
  return static_cast<int>(at / embed_);
}

std::string NeuralComputeModel::far_from_training(const TableFeatures& table) const {
  const Normaliser& n = model_->compute.features;
  float x[Mlp::kMaxWidth];
  compute_raw_features(table, fit_.network_batch, x, model_->compute.inputs());
  // The first three features: log rows, log dim, log(1 + pooling factor).
  const char* const names[] = {"rows", "dim", "pooling factor"};
  const double values[] = {static_cast<double>(table.rows), static_cast<double>(table.dim),
                           table.pooling_factor};
  if (table.data_type != DataType::kFp32) {
    const std::string& type = data_type_name(table.data_type);
    if (!model_->compute.data_type_feature) {
      return fmt::format(
          "data type {}: this model reads every table as fp32 (it was trained "
          "before data types)",
          type);
    }
    const int i = model_->compute.inputs().size() - 1;  // log bytes per weight
    if (n.scale[i] == 1.0f && std::abs(x[i] - n.mean[i]) > 1e-3f) {
      return fmt::format("data type {}: every training table had {:.3g} bytes a weight", type,
                         std::exp(n.mean[i]));
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    const float z = (x[i] - n.mean[i]) * n.scale[i];
    if (n.scale[i] == 1.0f) {  // training leaves a feature every table shared at scale 1
      if (std::abs(x[i] - n.mean[i]) > 1e-3f) {
        return fmt::format("{} {:.4g}: every training table had {:.4g}", names[i], values[i],
                           i < 2 ? std::exp(n.mean[i]) : std::expm1(n.mean[i]));
      }
    } else if (std::abs(z) > kFarFromTraining) {
      return fmt::format("{} {:.4g}: {:.1f} standard deviations {} the training tables' mean, "
                         "on a log scale",
                         names[i], values[i], std::abs(z), z > 0 ? "above" : "below");
    }
  }
  return {};
}

double NeuralComputeModel::compute_ms(std::span<const int> table_ids) const {
  if (table_ids.empty()) return 0.0;
  double state[Mlp::kMaxWidth] = {};
  for (int id : table_ids) add_to_state(id, std::span<double>(state, embed_));
  return state_ms(std::span<const double>(state, embed_));
}

// The state is the sum of the shard's cached per-table outputs (exp'd).
void NeuralComputeModel::add_to_state(int table_id, std::span<double> state) const {
  const int tables = static_cast<int>(embedded_.size() / embed_);
  ES_CHECK(table_id >= 0 && table_id < tables,
           "neural cost model: table id {} was never added ({} tables)", table_id, tables);
  const float* e = embedded_.data() + static_cast<size_t>(table_id) * embed_;
  for (int i = 0; i < embed_; ++i) state[i] += e[i];
}

double NeuralComputeModel::state_ms(std::span<const double> state) const {
  if (state[0] == 0) return 0.0;  // the empty set (every output is exp'd, so > 0)
  float sum[Mlp::kMaxWidth];
  for (int i = 0; i < embed_; ++i) sum[i] = static_cast<float>(state[i]);
  for (int i = 0; i < embed_; ++i) sum[i] = log_positive(sum[i]);
  float y = 0;
  model_->compute.head.forward(sum, &y);
  return fit_.scale * batch_factor(*model_, batch_size_) *
         output_to_ms(y, model_->compute.target_mean, model_->compute.target_std, "compute");
}

NeuralCommModel::NeuralCommModel(std::shared_ptr<const NeuralModel> model, int64_t batch_size,
                                 std::optional<Calibration> outside_range)
    : model_(std::move(model)),
      batch_size_(batch_size > 0 ? batch_size : model_->comm_batch_size),
      fit_(model_->has_comm
               ? fit_batch(model_->comm_batch_size, model_->comm_max_batch_size, batch_size_)
               : BatchFit{batch_size_, 1.0}),
      range_(comm_device_range(*model_)),
      outside_range_(std::move(outside_range)) {}

std::string NeuralCommModel::name() const { return neural_name(notes()); }

std::vector<std::string> NeuralCommModel::notes() const {
  std::vector<std::string> notes;
  if (fit_.scale != 1.0) {
    notes.push_back(
        extrapolation_note("comm", model_->comm_batch_size, model_->comm_max_batch_size,
                           batch_size_));
  }
  if (outside_range_ && range_.first > 0) {
    notes.push_back(
        fmt::format("analytic comm outside {}-{} devices", range_.first, range_.second));
  }
  return notes;
}

void NeuralCommModel::comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
                              std::span<double> fwd_ms, std::span<double> bwd_ms) const {
  const int n = static_cast<int>(dim_sums.size());
  if (outside(n)) {
    ES_CHECK(outside_range_.has_value(),
             "neural cost model: its communication networks were trained on {}-{} devices, not "
             "{}, and no analytic calibration was given to stand in for them",
             range_.first, range_.second, n);
    analytic_comm_ms(*outside_range_, batch_size_, dim_sums, delays_ms, fwd_ms, bwd_ms);
    return;
  }
  predict_comm_ms(*model_, dim_sums, delays_ms, fwd_ms, bwd_ms, batch_size_);
}

double NeuralCommModel::floor_ms(double total_dims, int devices) const {
  if (!outside(devices) || !outside_range_) return 0.0;
  return analytic_comm_floor_ms(*outside_range_, batch_size_, total_dims, devices);
}

void NeuralCommModel::collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                                    std::span<double> bwd_ms) const {
  if (load.empty()) return;
  ES_CHECK(outside_range_.has_value(),
           "neural cost model: its networks learned the pooled all-to-all only, and no analytic "
           "calibration was given for the row-wise and data-parallel collectives");
  analytic_collective_ms(*outside_range_, batch_size_, load, fwd_ms, bwd_ms);
}

const nlohmann::json* measured_compute_files(const NeuralModel& model) {
  const nlohmann::json* fitted = info_array(model, {"fitted", "scale", "compute"});
  return fitted != nullptr ? fitted : info_array(model, {"data", "compute"});
}

namespace {

// The CPU a data file's header names ("an unknown CPU" where it does not).
std::string header_cpu(const nlohmann::json& file) {
  if (file.is_object() && file.contains("machine") && file["machine"].is_object() &&
      file["machine"].contains("cpu") && file["machine"]["cpu"].is_string()) {
    return file["machine"]["cpu"].get<std::string>();
  }
  return "an unknown CPU";
}

// What the model predicts for: the executor and CPU of the first of its
// measured_compute_files (a model set is measured on one machine).
ModelSource neural_source(const NeuralModel& model, const std::optional<Calibration>& constants) {
  ModelSource s;
  s.min_batch = model.batch_size;
  s.max_batch = model.max_batch_size;
  std::string executor = "unknown executor", cpu = "an unknown CPU";
  const nlohmann::json* files = measured_compute_files(model);
  if (files != nullptr && (*files)[0].is_object()) {
    // Data measured before headers named the executor ran on the CPU.
    const nlohmann::json& file = (*files)[0];
    executor = file.contains("executor") && file["executor"].is_string()
                   ? file["executor"].get<std::string>()
                   : "cpu";
    cpu = header_cpu(file);
  }
  const bool on_cpu = executor.rfind("cpu", 0) == 0;
  s.hardware = on_cpu ? fmt::format("{} on {}", executor, cpu) : executor;
  if (on_cpu) s.host_cpu = cpu;
  if (model.has_comm) {
    std::tie(s.min_devices, s.max_devices) = comm_device_range(model);
    s.comm = fmt::format("neural, all-to-alls measured on {} ranks at batches {}-{}",
                         s.min_devices > 0 ? fmt::format("{}-{}", s.min_devices, s.max_devices)
                                           : std::string("unrecorded numbers of"),
                         model.comm_batch_size, model.comm_max_batch_size);
    // Exchanges `fit` measured on another machine: the networks' scale is theirs.
    if (const nlohmann::json* fitted = info_array(model, {"fitted", "scale", "comm"})) {
      const auto [lo, hi] = device_range(*fitted);
      s.comm += fmt::format(", fitted to {} on {} ranks", header_cpu((*fitted)[0]),
                            lo == 0    ? std::string("unrecorded numbers of")
                            : lo == hi ? fmt::format("{}", lo)
                                       : fmt::format("{}-{}", lo, hi));
    }
    s.comm_min_batch = model.comm_batch_size;
    s.comm_max_batch = model.comm_max_batch_size;
  } else {
    s.comm = constants ? analytic_comm_source(*constants) : "none";
  }
  if (constants) s.bandwidths = calibration_bandwidths(*constants);
  // The memory figure is the set's own (its calibration may be another machine's).
  s.bandwidths.memory_gbps = model.copy_gbps;
  s.bandwidths.memory_source = model.copy_source;
  return s;
}

}  // namespace

CostModel make_neural_cost_model(std::shared_ptr<const NeuralModel> model, int64_t batch_size,
                                 std::optional<Calibration> outside_range) {
  CostModel m;
  m.source = neural_source(*model, outside_range);
  auto compute = std::make_shared<NeuralComputeModel>(model, batch_size);
  if (!model->has_comm && outside_range) {
    // A compute-only set (one GPU measures no all-to-all): the analytic
    // all-to-all with the set's constants, named with where they come from.
    m.name = fmt::format("{}; comm: analytic, {:.0f} us + bytes / {:.0f} GB/s ({})",
                         compute->name(), outside_range->comm_latency_us,
                         outside_range->comm_gbps, outside_range->comm_source);
    m.comm = make_analytic_comm_model(*outside_range, compute->batch_size());
    m.compute = std::move(compute);
    return m;
  }
  auto comm = std::make_shared<NeuralCommModel>(model, batch_size, std::move(outside_range));
  std::vector<std::string> notes = compute->notes();
  for (const std::string& note : comm->notes()) {
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  m.name = neural_name(notes);
  m.compute = std::move(compute);
  m.comm = std::move(comm);
  return m;
}

}  // namespace embshard
