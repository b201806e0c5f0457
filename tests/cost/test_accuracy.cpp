#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "embshard/cost/accuracy.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

TEST(Accuracy, MapeAndP90OnHandMadeValues) {
  const std::vector<double> pred = {110, 90, 100, 200};
  const std::vector<double> meas = {100, 100, 100, 100};
  const AccuracyFigures f = accuracy(pred, meas);
  EXPECT_EQ(f.count, 4);
  EXPECT_DOUBLE_EQ(f.mape_pct, 30.0);  // (10 + 10 + 0 + 100) / 4
  // Sorted APEs 0, 10, 10, 100: rank 0.9 * 3 = 2.7 -> 10 + 0.7 * 90.
  EXPECT_NEAR(f.p90_ape_pct, 73.0, 1e-12);
  EXPECT_EQ(f.kendall_tau, 0.0);  // measured is constant: nothing to rank
  // Signed errors +10, -10, 0, +100: the median of the middle two.
  EXPECT_DOUBLE_EQ(f.median_error_pct, 5.0);
  const AccuracyFigures low = accuracy(std::vector<double>{80, 90, 50, 100}, meas);
  EXPECT_DOUBLE_EQ(low.median_error_pct, -15.0);  // -50, -20, -10, 0: the model reads low
}

TEST(Accuracy, PerfectPredictionsScoreZeroAndTauOne) {
  const std::vector<double> v = {1, 5, 2, 9, 3};
  const AccuracyFigures f = accuracy(v, v);
  EXPECT_EQ(f.mape_pct, 0.0);
  EXPECT_EQ(f.p90_ape_pct, 0.0);
  EXPECT_EQ(f.median_error_pct, 0.0);
  EXPECT_DOUBLE_EQ(f.kendall_tau, 1.0);
}

TEST(Accuracy, KendallTauOnKnownPermutations) {
  const std::vector<double> x = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, std::vector<double>{1, 2, 3, 4, 5}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, std::vector<double>{5, 4, 3, 2, 1}), -1.0);
  // One swapped neighbour pair: 9 concordant, 1 discordant of 10 pairs.
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, std::vector<double>{1, 3, 2, 4, 5}), 0.8);
}

TEST(Accuracy, KendallTauTextNeedsThreePairs) {
  const std::vector<double> p = {1, 2, 3}, m = {3, 2, 1};
  EXPECT_EQ(kendall_tau_text(accuracy(std::span(p).first(1), std::span(m).first(1))), "-");
  EXPECT_EQ(kendall_tau_text(accuracy(std::span(p).first(2), std::span(m).first(2))), "-");
  EXPECT_EQ(kendall_tau_text(accuracy(p, m)), "-1.000");
}

TEST(Accuracy, KendallTauBHandlesTies) {
  // One pair tied in x: tau-b = 5 / sqrt(5 * 6) (scipy.stats.kendalltau agrees).
  EXPECT_NEAR(kendall_tau_b(std::vector<double>{1, 2, 2, 3}, std::vector<double>{1, 2, 3, 4}),
              5.0 / std::sqrt(30.0), 1e-12);
  // Ties on both sides, one pair tied in both: 4 / sqrt(4 * 5).
  EXPECT_NEAR(kendall_tau_b(std::vector<double>{1, 1, 2, 2}, std::vector<double>{1, 1, 2, 3}),
              4.0 / std::sqrt(20.0), 1e-12);
}

TEST(Accuracy, RejectsBadInput) {
  const std::vector<double> two = {1, 2}, three = {1, 2, 3};
  EXPECT_THROW(accuracy(two, three), Error);
  EXPECT_EQ(accuracy(std::vector<double>{}, std::vector<double>{}).count, 0);
  EXPECT_THROW(accuracy(two, std::vector<double>{1, 0}), Error);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(accuracy(std::vector<double>{1, nan}, two), Error);
  EXPECT_THROW(accuracy(two, std::vector<double>{1, nan}), Error);
}

}  // namespace
}  // namespace embshard
