// Fitting a pre-trained neural model to another machine.
#include "embshard/cost/neural/fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model.h"
#include "embshard/cost/neural/train.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/machine.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

// Solves the 3x3 system m[.][0..2] x = m[.][3] by Gaussian elimination with
// partial pivoting; false when it is (near) singular.
bool solve3(double m[3][4], double x[3]) {
  for (int c = 0; c < 3; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 3; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[pivot][c])) pivot = r;
    }
    if (std::abs(m[pivot][c]) < 1e-9 * std::max(1.0, std::abs(m[0][0]))) return false;
    for (int k = 0; k < 4; ++k) std::swap(m[c][k], m[pivot][k]);
    for (int r = 0; r < 3; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int k = c; k < 4; ++k) m[r][k] -= f * m[c][k];
    }
  }
  for (int c = 0; c < 3; ++c) x[c] = m[c][3] / m[c][c];
  return true;
}

// Least squares of y on x, y = a + b x, from the sums over n points; b = 1
// when x does not vary.
std::pair<double, double> line_fit(double n, double sx, double sxx, double sy, double sxy) {
  const double var = sxx / n - (sx / n) * (sx / n);
  const double b = var > 1e-6 ? (sxy / n - (sx / n) * (sy / n)) / var : 1.0;
  return {sy / n - b * sx / n, b};
}

}  // namespace

AccuracyFigures test_accuracy(const NeuralModel& model, const ComputeData& data,
                              std::span<const size_t> records) {
  std::vector<double> predicted, measured;
  for (size_t i : records) {
    predicted.push_back(predict_compute_ms(model, data.records[i].tables, data.records[i].batch));
    measured.push_back(data.records[i].ms);
  }
  return accuracy(predicted, measured);
}

namespace {

// The fit's and the judging files' records, merged; each file's entry goes
// to `scale["compute"]`.
ComputeData load_fit_files(const FitOptions& o, nlohmann::json& scale, Reporter& reporter) {
  std::vector<ComputeData> files;
  LoadOptions lo;
  lo.raw = o.raw;
  for (const auto* paths : {&o.data_paths, &o.test_paths}) {
    for (const std::string& path : *paths) {
      files.push_back(load_compute_data(path, lo));
      ES_CHECK(o.raw || files.back().normalized,
               "fit: {}: version 1 records (raw medians, measured before the drift-cancelling "
               "reference probe): fitting needs normalized ones. Measure them again with this "
               "embshard (fit without --data does), or fit raw medians with --raw",
               path);
      report_problems(path, files.back().problems, reporter);
      scale["compute"].push_back(data_file_entry(path, files.back().header,
                                                 files.back().records.size(),
                                                 files.back().problems.size()));
    }
  }
  return merge_compute_data(std::move(files));
}

// The records' indices, the result's fit_records fit records first, then
// its test_records judging ones (the test files' records, or a seeded share
// of all).
std::vector<size_t> fit_then_test_order(const FitOptions& o, const ComputeData& data,
                                        FitResult& r) {
  std::vector<size_t> order(data.records.size());
  std::iota(order.begin(), order.end(), 0);
  size_t n_fit = 0;
  if (o.test_paths.empty()) {
    std::mt19937_64 rng(seed_for(o.seed, SeedUse::kFitRecords));
    std::shuffle(order.begin(), order.end(), rng);
    n_fit = static_cast<size_t>(std::llround(o.fit_share * order.size()));
  } else {
    const int first_test_file = static_cast<int>(o.data_paths.size());
    n_fit = static_cast<size_t>(std::count_if(
        data.records.begin(), data.records.end(),
        [&](const ComputeRecord& rec) { return rec.file < first_test_file; }));
  }
  r.fit_records = static_cast<int>(n_fit);
  r.test_records = static_cast<int>(order.size() - n_fit);
  ES_CHECK(n_fit >= 10 && r.test_records >= 5,
           "fit: {} records give {} to fit on and {} to judge the fit; need at least 10 and 5",
           order.size(), n_fit, r.test_records);
  return order;
}

// Least squares of log measured on log predicted and log batch over the fit
// records: a machine's speed relative to the training one differs with the
// batch (caches, bandwidth), which one scale cannot follow. Sets the
// result's scale, power and batch power, and folds them into its model.
void fit_plane(const ComputeData& data, std::span<const size_t> fit,
               const std::vector<double>& predicted, FitResult& r) {
  const auto z_of = [&](size_t i) {
    return std::log(static_cast<double>(data.records[i].batch) / r.model.batch_size);
  };
  double m[3][4] = {};
  for (size_t i : fit) {
    const double v[3] = {1.0, std::log(predicted[i]), z_of(i)};
    const double y = std::log(data.records[i].ms);
    for (int p = 0; p < 3; ++p) {
      for (int q = 0; q < 3; ++q) m[p][q] += v[p] * v[q];
      m[p][3] += v[p] * y;
    }
  }
  double x[3] = {0, 1, 0};
  // One batch, or one size of shard, leaves a column without information:
  // fall back to fewer terms rather than fit noise.
  if (!solve3(m, x)) {
    std::tie(x[0], x[1]) = line_fit(m[0][0], m[0][1], m[1][1], m[0][3], m[1][3]);
    x[2] = 0;
  }
  r.power = std::clamp(x[1], 0.5, 2.0);
  r.batch_power = std::clamp(x[2], -1.0, 1.0);
  r.log_scale = x[0];
  // log ms' = a + b (y std + mean) + c log(batch / b0): the first two fold
  // into the output normalisation, the last is the model's batch correction.
  ComputeNet& net = r.model.compute;
  net.target_mean = r.log_scale + r.power * net.target_mean;
  net.target_std = r.power * net.target_std;
  r.model.batch_correction = r.batch_power;
}

// The judging records' accuracy before (`predicted`) and after the fit, on
// all of them and on the pieces (row blocks, replica slices).
void judge_fit(const ComputeData& data, const std::vector<double>& predicted, FitResult& r) {
  const auto before = [&](std::span<const size_t> records) {
    std::vector<double> p, m;
    for (size_t i : records) {
      p.push_back(predicted[i]);
      m.push_back(data.records[i].ms);
    }
    return accuracy(p, m);
  };
  r.before = before(r.test_idx);
  r.after = r.plane = test_accuracy(r.model, data, r.test_idx);
  for (size_t i : r.test_idx) {
    if (has_row_blocks(data.records[i]) || has_replica_slices(data.records[i])) {
      r.piece_test_idx.push_back(i);
    }
  }
  r.pieces_before = before(r.piece_test_idx);
  r.pieces_after = test_accuracy(r.model, data, r.piece_test_idx);
}

// What the fitted model's info says of its fit.
nlohmann::json fitted_info(const FitOptions& o, const FitResult& r, const ComputeData& data,
                           nlohmann::json scale) {
  return {{"from", o.model_dir},
          {"data", data.path},
          {"ground_truth", ground_truth_label(data.normalized)},
          // The machine the files were measured on, which need not be this one.
          {"machine", data.header.contains("machine") ? data.header["machine"] : machine_info()},
          {"log_scale", r.log_scale},
          {"power", r.power},
          {"batch_power", r.batch_power},
          {"fit_records", r.fit_records},
          {"test_records", r.test_records},
          {"test_data",
           o.test_paths.empty() ? "a share of the fit's pools" : "pools the fit never saw"},
          {"test_mape_before_pct", r.before.mape_pct},
          {"test_mape_after_pct", r.after.mape_pct},
          {"test_pieces",
           {{"records", r.pieces_before.count},
            {"mape_before_pct", r.pieces_before.mape_pct},
            {"mape_after_pct", r.pieces_after.mape_pct}}},
          {"scale", std::move(scale)}};
}

}  // namespace

FitResult fit_neural_model(const FitOptions& o, Reporter& reporter) {
  ES_CHECK(!o.data_paths.empty(), "fit: no measured data to fit on (--data FILE)");
  ES_CHECK(o.fit_share > 0 && o.fit_share < 1, "fit: --fit-share is {}, must be in (0, 1)",
           o.fit_share);
  FitResult r;
  r.model = load_neural_model(o.model_dir);
  // The fitted model predicts on the scale of the files it is fitted to and
  // judged by (measured here), so eval measures on theirs
  // (model_reference_scale), not on the pre-trained model's.
  nlohmann::json scale = {{"compute", nlohmann::json::array()}};
  ComputeData data = load_fit_files(o, scale, reporter);
  scale["ground_truth"] = ground_truth_label(data.normalized);
  std::vector<double> predicted;
  for (const ComputeRecord& rec : data.records) {
    predicted.push_back(predict_compute_ms(r.model, rec.tables, rec.batch));
  }
  const std::vector<size_t> order = fit_then_test_order(o, data, r);
  const size_t n_fit = static_cast<size_t>(r.fit_records);
  r.fit_idx.assign(order.begin(), order.begin() + n_fit);
  r.test_idx.assign(order.begin() + n_fit, order.end());
  fit_plane(data, r.fit_idx, predicted, r);
  judge_fit(data, predicted, r);
  set_memory_bandwidth(r.model, scale["compute"]);  // the fit's machine's, not the model's
  r.model.info["fitted"] = fitted_info(o, r, data, std::move(scale));
  reporter.note(fmt::format("fit: log ms' = {:.4f} + {:.4f} log ms + {:.4f} log(batch / {}) over "
                            "{} records; test MAPE {:.2f}% -> {:.2f}% ({} records)",
                            r.log_scale, r.power, r.batch_power, r.model.batch_size,
                            r.fit_records, r.before.mape_pct,
                            r.after.mape_pct, r.test_records));
  r.data = std::move(data);
  return r;
}

namespace {

using Placement = std::pair<int, int>;  // (file, record)

// Every device of the given placements: predicted and measured, and the
// forward's wait for the last device's start.
struct CommDeviceCosts {
  std::vector<double> pf, pb, mf, mb, wait;
};

CommDeviceCosts comm_costs_of(const NeuralModel& model, const std::vector<CommData>& files,
                              std::span<const Placement> items) {
  CommDeviceCosts c;
  for (const auto& [f, i] : items) {
    const CommRecord& rec = files[f].records[i];
    const size_t n = rec.dim_sums.size();
    std::vector<double> pf(n), pb(n);
    predict_comm_ms(model, rec.dim_sums, rec.delays_ms, pf, pb, files[f].batch_size);
    for (size_t d = 0; d < n; ++d) c.wait.push_back(comm_wait_ms(rec.delays_ms, d));
    c.pf.insert(c.pf.end(), pf.begin(), pf.end());
    c.pb.insert(c.pb.end(), pb.begin(), pb.end());
    c.mf.insert(c.mf.end(), rec.fwd_ms.begin(), rec.fwd_ms.end());
    c.mb.insert(c.mb.end(), rec.bwd_ms.begin(), rec.bwd_ms.end());
  }
  return c;
}

// Both directions' accuracy on every device of `items`.
AccuracyFigures comm_accuracy(const NeuralModel& model, const std::vector<CommData>& files,
                              std::span<const Placement> items) {
  CommDeviceCosts c = comm_costs_of(model, files, items);
  c.pf.insert(c.pf.end(), c.pb.begin(), c.pb.end());
  c.mf.insert(c.mf.end(), c.mb.begin(), c.mb.end());
  return accuracy(c.pf, c.mf);
}

// log measured on log predicted, the network's part of one direction (a
// forward measured no longer than its wait says nothing of the network),
// folded into the network's output normalisation.
void fit_comm_plane(const CommDeviceCosts& fit, bool forward, CommNet& net, double& log_scale,
                    double& power) {
  const std::vector<double>& pred = forward ? fit.pf : fit.pb;
  const std::vector<double>& meas = forward ? fit.mf : fit.mb;
  double n = 0, sx = 0, sxx = 0, sy = 0, sxy = 0;
  for (size_t k = 0; k < pred.size(); ++k) {
    const double w = forward ? fit.wait[k] : 0, p = pred[k] - w, m = meas[k] - w;
    if (p <= 0 || m <= 0.05 * p) continue;
    const double x = std::log(p), y = std::log(m);
    n += 1, sx += x, sxx += x * x, sy += y, sxy += x * y;
  }
  ES_CHECK(n >= 10, "fit: {} of the comm data's device costs measure the {} network; need 10", n,
           forward ? "forward" : "backward");
  std::tie(log_scale, power) = line_fit(n, sx, sxx, sy, sxy);
  power = std::clamp(power, 0.5, 2.0);
  net.target_mean = log_scale + power * net.target_mean;
  net.target_std = power * net.target_std;
}

// What the fitted model's info says of its communication fit.
void record_comm_fit(NeuralModel& model, const std::vector<CommData>& files,
                     const CommFitResult& r) {
  std::string data;
  nlohmann::json scale = nlohmann::json::array();  // the exchanges' scale, as the compute's
  for (const CommData& f : files) {
    data += (data.empty() ? "" : ",") + f.path;
    scale.push_back(data_file_entry(f.path, f.header, f.records.size(), f.problems.size()));
  }
  model.info["fitted"]["scale"]["comm"] = scale;
  model.info["fitted"]["comm"] = {{"data", data},
                                  {"fwd_log_scale", r.fwd_log_scale},
                                  {"fwd_power", r.fwd_power},
                                  {"bwd_log_scale", r.bwd_log_scale},
                                  {"bwd_power", r.bwd_power},
                                  {"fit_placements", r.fit_records},
                                  {"test_placements", r.test_records},
                                  {"test_mape_before_pct", r.before.mape_pct},
                                  {"test_mape_after_pct", r.after.mape_pct}};
}

}  // namespace

CommFitResult fit_comm_model(NeuralModel& model, const std::vector<CommData>& files,
                             const FitOptions& o, Reporter& reporter) {
  ES_CHECK(model.has_comm, "fit: --comm-data given, but {} has no communication networks",
           o.model_dir);
  std::vector<Placement> placements;
  for (size_t f = 0; f < files.size(); ++f) {
    for (size_t r = 0; r < files[f].records.size(); ++r) {
      placements.emplace_back(static_cast<int>(f), static_cast<int>(r));
    }
  }
  std::mt19937_64 rng(seed_for(o.seed, SeedUse::kFitCommPlacements));
  std::shuffle(placements.begin(), placements.end(), rng);
  CommFitResult r;
  r.fit_records = static_cast<int>(std::llround(o.fit_share * placements.size()));
  r.test_records = static_cast<int>(placements.size()) - r.fit_records;
  ES_CHECK(r.fit_records >= 10 && r.test_records >= 5,
           "fit: {} placements give {} to fit on and {} to judge the fit; need at least 10 and 5",
           placements.size(), r.fit_records, r.test_records);
  const std::span<const Placement> fit_items(placements.data(), r.fit_records);
  const std::span<const Placement> test_items(placements.data() + r.fit_records, r.test_records);
  const CommDeviceCosts fit = comm_costs_of(model, files, fit_items);
  r.before = comm_accuracy(model, files, test_items);
  fit_comm_plane(fit, true, model.comm_fwd, r.fwd_log_scale, r.fwd_power);
  fit_comm_plane(fit, false, model.comm_bwd, r.bwd_log_scale, r.bwd_power);
  r.after = comm_accuracy(model, files, test_items);
  record_comm_fit(model, files, r);
  reporter.note(fmt::format("fit: comm log ms' = {:.4f} + {:.4f} log ms (forward), {:.4f} + "
                            "{:.4f} log ms (backward) over {} placements; test MAPE {:.2f}% -> "
                            "{:.2f}% ({} placements)",
                            r.fwd_log_scale, r.fwd_power, r.bwd_log_scale, r.bwd_power,
                            r.fit_records, r.before.mape_pct, r.after.mape_pct, r.test_records));
  return r;
}

void check_fine_tune_options(const FineTuneOptions& o) {
  ES_CHECK(o.epochs >= 1, "fit: --fine-tune-epochs is {}, must be >= 1", o.epochs);
  ES_CHECK(std::isfinite(o.anchor) && o.anchor >= 0,
           "fit: --fine-tune-anchor is {}, must be finite and >= 0", o.anchor);
}

}  // namespace embshard
