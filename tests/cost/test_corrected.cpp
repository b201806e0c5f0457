// The compute model corrected by measured devices (cost/corrected_model.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "embshard/cost/corrected_model.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "search/toy_cost_model.h"

namespace embshard {
namespace {

TableFeatures toy_table(int i) {
  TableFeatures f;
  f.rows = 1000 + 997 * i;
  f.dim = 8 * (1 + i % 4);
  f.pooling_factor = 2 + i % 9;
  f.source_table = i;
  return f;
}

// A base model, and "measurements" that are that model with each table's
// cost off by its own factor (log-normal, sigma 0.2), in the form the
// correction fits: base(S) x exp(cost-weighted mean of the tables' logs).
struct Distorted {
  static constexpr int kTables = 24;
  testing::ToyComputeModel base{true};
  std::vector<double> log_factor;
  std::vector<double> single;

  Distorted() {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 0.2);
    for (int i = 0; i < kTables; ++i) {
      EXPECT_EQ(base.add_table(toy_table(i)), i);
      log_factor.push_back(normal(rng));
      const int ids[] = {i};
      single.push_back(base.compute_ms(ids));
    }
  }
  MeasuredSet measure(const std::vector<int>& ids) const {
    MeasuredSet s;
    double weighted = 0, total = 0;
    for (int id : ids) {
      s.tables.push_back(id);
      s.single_ms.push_back(single[id]);
      weighted += single[id] * log_factor[id];
      total += single[id];
    }
    s.predicted_ms = base.compute_ms(ids);
    s.measured_ms = s.predicted_ms * std::exp(weighted / total);
    return s;
  }
};

std::vector<std::vector<int>> random_sets(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int>> sets;
  for (int i = 0; i < count; ++i) {
    std::vector<int> ids;
    for (int t = 0; t < Distorted::kTables; ++t) {
      if (rng() % 4 == 0) ids.push_back(t);
    }
    if (ids.empty()) ids.push_back(static_cast<int>(rng() % Distorted::kTables));
    sets.push_back(ids);
  }
  return sets;
}

TEST(ComputeCorrection, LearnsPerTableErrorsThatHoldOnSetsItDidNotSee) {
  Distorted d;
  std::vector<MeasuredSet> seen;
  const auto fitted = random_sets(40, 1);
  for (const auto& ids : fitted) seen.push_back(d.measure(ids));
  const ComputeCorrection c = fit_compute_correction(seen, kCorrectionRidge);
  EXPECT_EQ(c.sets, static_cast<int>(std::set<std::vector<int>>(fitted.begin(), fitted.end()).size()));
  auto base = std::make_shared<testing::ToyComputeModel>(true);
  CorrectedComputeModel corrected(base, c);
  for (int i = 0; i < Distorted::kTables; ++i) EXPECT_EQ(corrected.add_table(toy_table(i)), i);
  double before = 0, after = 0;
  const auto unseen = random_sets(40, 2);
  for (const auto& ids : unseen) {
    const MeasuredSet truth = d.measure(ids);
    before += std::abs(std::log(truth.predicted_ms / truth.measured_ms));
    after += std::abs(std::log(corrected.compute_ms(ids) / truth.measured_ms));
  }
  EXPECT_LT(after, 0.5 * before) << "mean |log error| " << before / unseen.size() << " -> "
                                 << after / unseen.size();
}

TEST(ComputeCorrection, ACommonErrorIsOneFactorAndRepeatedSetsCountOnce) {
  Distorted d;
  std::vector<MeasuredSet> sets;
  for (const auto& ids : random_sets(6, 3)) {
    MeasuredSet s = d.measure(ids);
    s.measured_ms = 1.25 * s.predicted_ms;  // every set 25% slow
    sets.push_back(s);
    sets.push_back(s);
  }
  const ComputeCorrection c = fit_compute_correction(sets, kCorrectionRidge);
  EXPECT_EQ(c.sets, 6);
  EXPECT_NEAR(c.common, std::log(1.25), 1e-12);
  for (const auto& [table, log] : c.by_table) EXPECT_NEAR(log, 0.0, 1e-12) << "table " << table;
  // Nothing measured: no correction at all.
  const ComputeCorrection none = fit_compute_correction({}, kCorrectionRidge);
  EXPECT_EQ(none.sets, 0);
  EXPECT_EQ(none.common, 0.0);
  EXPECT_TRUE(none.by_table.empty());
}

TEST(ComputeCorrection, TheStateAndTheWholeSetAgreeAndUnmeasuredTablesTakeTheCommonFactor) {
  Distorted d;
  std::vector<MeasuredSet> sets;
  for (const auto& ids : random_sets(10, 4)) sets.push_back(d.measure(ids));
  ComputeCorrection c = fit_compute_correction(sets, kCorrectionRidge);
  c.by_table.erase(5);
  // The same correction over an incremental base and one without a state.
  CorrectedComputeModel with_state(std::make_shared<testing::ToyComputeModel>(true), c);
  CorrectedComputeModel without(std::make_shared<testing::ToyComputeModel>(false), c);
  EXPECT_EQ(with_state.state_size(), 4u);
  EXPECT_EQ(without.state_size(), 0u);
  for (int i = 0; i < Distorted::kTables; ++i) {
    with_state.add_table(toy_table(i));
    without.add_table(toy_table(i));
  }
  for (const auto& ids : random_sets(10, 5)) {
    std::vector<double> state(with_state.state_size(), 0.0);
    for (int id : ids) with_state.add_to_state(id, state);
    EXPECT_NEAR(with_state.state_ms(state), with_state.compute_ms(ids), 1e-12);
    EXPECT_NEAR(without.compute_ms(ids), with_state.compute_ms(ids), 1e-9);
  }
  const int five[] = {5};
  EXPECT_NEAR(with_state.compute_ms(five), d.single[5] * std::exp(c.common), 1e-12);
  EXPECT_EQ(with_state.compute_ms(std::span<const int>()), 0.0);
  // Ids are the corrected model's own, whatever the base had registered.
  auto shared = std::make_shared<testing::ToyComputeModel>(true);
  for (int i = 0; i < 3; ++i) shared->add_table(toy_table(i));
  CorrectedComputeModel late(shared, c);
  EXPECT_EQ(late.add_table(toy_table(7)), 0);
  const int zero[] = {0}, one[] = {1}, seven[] = {7};
  EXPECT_NEAR(late.compute_ms(zero), with_state.compute_ms(seven), 1e-12);
  EXPECT_THROW(late.compute_ms(one), Error);
}

TEST(ComputeCorrection, BadMeasurementsAreErrorsNamingTheSet) {
  Distorted d;
  std::vector<MeasuredSet> sets = {d.measure({0, 1}), d.measure({2})};
  sets[1].measured_ms = 0;
  try {
    fit_compute_correction(sets, kCorrectionRidge);
    FAIL() << "a set measured at 0 ms was fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set 1 measured 0 ms"), std::string::npos) << e.what();
  }
  sets[1] = d.measure({2});
  sets[1].single_ms.push_back(1.0);
  EXPECT_THROW(fit_compute_correction(sets, kCorrectionRidge), Error);
  sets[1] = d.measure({2});
  EXPECT_THROW(fit_compute_correction(sets, 0.0), Error);
}

}  // namespace
}  // namespace embshard
