// A compute model corrected by measured devices (corrected_model.h).
#include "embshard/cost/corrected_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "embshard/util/error.h"

namespace embshard {
namespace {

// Solves a x = b for a symmetric positive definite `a` [n x n] (Cholesky).
std::vector<double> solve_spd(std::vector<double> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    ES_CHECK(d > 0, "compute correction: the system is not positive definite at row {}", j);
    a[j * n + j] = std::sqrt(d);
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / a[j * n + j];
    }
  }
  for (size_t i = 0; i < n; ++i) {  // L y = b
    for (size_t k = 0; k < i; ++k) b[i] -= a[i * n + k] * b[k];
    b[i] /= a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {  // L^T x = y
    for (size_t k = i + 1; k < n; ++k) b[i] -= a[k * n + i] * b[k];
    b[i] /= a[i * n + i];
  }
  return b;
}

}  // namespace

ComputeCorrection fit_compute_correction(const std::vector<MeasuredSet>& sets, double ridge) {
  ES_CHECK(ridge > 0, "compute correction: ridge {} must be positive", ridge);
  // Each distinct set's cost shares by table, and its log ratio.
  std::vector<std::map<int, double>> shares;
  std::vector<double> y;
  std::set<std::vector<std::pair<int, double>>> seen;
  for (size_t i = 0; i < sets.size(); ++i) {
    const MeasuredSet& s = sets[i];
    ES_CHECK(s.tables.size() == s.single_ms.size() && !s.tables.empty(),
             "compute correction: set {} has {} tables and {} costs", i, s.tables.size(),
             s.single_ms.size());
    ES_CHECK(s.measured_ms > 0 && s.predicted_ms > 0 && std::isfinite(s.measured_ms) &&
                 std::isfinite(s.predicted_ms),
             "compute correction: set {} measured {} ms, predicted {} ms; both must be positive",
             i, s.measured_ms, s.predicted_ms);
    std::vector<std::pair<int, double>> key;
    double total = 0;
    for (size_t k = 0; k < s.tables.size(); ++k) {
      ES_CHECK(s.single_ms[k] > 0 && std::isfinite(s.single_ms[k]),
               "compute correction: set {}, table {}: predicted {} ms alone, must be positive", i,
               s.tables[k], s.single_ms[k]);
      key.emplace_back(s.tables[k], s.single_ms[k]);
      total += s.single_ms[k];
    }
    std::sort(key.begin(), key.end());
    if (!seen.insert(key).second) continue;
    std::map<int, double> share;
    for (const auto& [table, ms] : key) share[table] += ms / total;
    shares.push_back(std::move(share));
    y.push_back(std::log(s.measured_ms / s.predicted_ms));
  }
  ComputeCorrection c;
  c.sets = static_cast<int>(y.size());
  if (y.empty()) return c;
  for (double v : y) c.common += v / y.size();
  // Ridge in its dual form (as many unknowns as sets): alpha = (W W^T +
  // ridge I)^-1 (y - common), each table's factor = W^T alpha.
  const size_t n = y.size();
  std::vector<double> k(n * n, 0.0), r(n);
  for (size_t i = 0; i < n; ++i) {
    r[i] = y[i] - c.common;
    for (size_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (const auto& [table, w] : shares[i]) {
        const auto at = shares[j].find(table);
        if (at != shares[j].end()) dot += w * at->second;
      }
      k[i * n + j] = k[j * n + i] = dot;
    }
    k[i * n + i] += ridge;
  }
  const std::vector<double> alpha = solve_spd(std::move(k), std::move(r));
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [table, w] : shares[i]) c.by_table[table] += w * alpha[i];
  }
  return c;
}

CorrectedComputeModel::CorrectedComputeModel(std::shared_ptr<ComputeModel> base,
                                             ComputeCorrection correction)
    : base_(std::move(base)),
      correction_(std::move(correction)),
      base_state_(base_->state_size()) {}

void CorrectedComputeModel::check_id(int id) const {
  ES_CHECK(id >= 0 && static_cast<size_t>(id) < base_id_.size(),
           "corrected model: table id {} was never added ({} tables)", id, base_id_.size());
}

std::string CorrectedComputeModel::name() const {
  return fmt::format("{}, corrected by {} measured devices", base_->name(), correction_.sets);
}

int CorrectedComputeModel::add_table(const TableFeatures& table) {
  const int id = base_->add_table(table);
  const int ids[] = {id};
  const auto at = table.source_table >= 0 ? correction_.by_table.find(table.source_table)
                                          : correction_.by_table.end();
  base_id_.push_back(id);
  weight_.push_back(base_->compute_ms(ids));
  log_factor_.push_back(at == correction_.by_table.end() ? 0.0 : at->second);
  return static_cast<int>(base_id_.size()) - 1;
}

double CorrectedComputeModel::compute_ms(std::span<const int> table_ids) const {
  if (table_ids.empty()) return 0.0;
  if (base_state_ > 0) {
    std::vector<double> state(state_size(), 0.0);
    for (int id : table_ids) add_to_state(id, state);
    return state_ms(state);
  }
  double weighted = 0, total = 0;
  std::vector<int> base_ids;
  for (int id : table_ids) {
    check_id(id);
    weighted += weight_[id] * log_factor_[id];
    total += weight_[id];
    base_ids.push_back(base_id_[id]);
  }
  const double mean = total > 0 ? weighted / total : 0.0;
  return base_->compute_ms(base_ids) * std::exp(correction_.common + mean);
}

void CorrectedComputeModel::add_to_state(int table_id, std::span<double> state) const {
  check_id(table_id);
  base_->add_to_state(base_id_[table_id], state.first(base_state_));
  state[base_state_] += weight_[table_id] * log_factor_[table_id];
  state[base_state_ + 1] += weight_[table_id];
}

double CorrectedComputeModel::state_ms(std::span<const double> state) const {
  const double total = state[base_state_ + 1];
  if (total <= 0) return base_->state_ms(state.first(base_state_));
  return base_->state_ms(state.first(base_state_)) *
         std::exp(correction_.common + state[base_state_] / total);
}

}  // namespace embshard
