#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/statistics.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::error_of;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Uniform in (0, 1) from the project's seeded hash: the same draws on every
// standard library.
double uniform(uint64_t seed, uint64_t index) {
  return (static_cast<double>(item_seed(seed, index) >> 11) + 0.5) * 0x1.0p-53;
}

TEST(Statistics, Mean) {
  EXPECT_DOUBLE_EQ(mean(std::vector<double>{1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(mean(std::vector<double>{-7}), -7);
  EXPECT_THROW(mean(std::vector<double>{}), Error);
}

TEST(Statistics, MedianOddEvenAndSmall) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{42}), 42);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1}), 2);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{9, 1, 100, 2, 3}), 3);  // an outlier does not move it
  const std::vector<double> unsorted{3, 1, 2};
  median(unsorted);
  EXPECT_EQ(unsorted, (std::vector<double>{3, 1, 2})) << "the input must not be reordered";
  EXPECT_THROW(median(std::vector<double>{}), Error);
  EXPECT_THROW(median(std::vector<double>{1, kNaN, 2}), Error);
}

TEST(Statistics, FastestHalfMean) {
  // One to three values: the minimum (what passes kept before).
  EXPECT_DOUBLE_EQ(fastest_half_mean(std::vector<double>{4}), 4);
  EXPECT_DOUBLE_EQ(fastest_half_mean(std::vector<double>{5, 2}), 2);
  EXPECT_DOUBLE_EQ(fastest_half_mean(std::vector<double>{9, 3, 6}), 3);
  // More: the mean of the n / 2 smallest, in any order; a slow stretch
  // (the 40s) does not move it.
  EXPECT_DOUBLE_EQ(fastest_half_mean(std::vector<double>{40, 2, 4, 41}), 3);
  EXPECT_DOUBLE_EQ(fastest_half_mean(std::vector<double>{7, 1, 40, 3, 2, 42, 5}), 2);
  // Against a sort on random inputs.
  for (uint64_t n = 1; n <= 12; ++n) {
    std::vector<double> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = uniform(n, i);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t k = std::max<size_t>(1, n / 2);
    double sum = 0;
    for (size_t i = 0; i < k; ++i) sum += sorted[i];
    EXPECT_NEAR(fastest_half_mean(v), sum / static_cast<double>(k), 1e-15) << n << " values";
  }
  EXPECT_THROW(fastest_half_mean(std::vector<double>{}), Error);
  EXPECT_THROW(fastest_half_mean(std::vector<double>{1, kNaN}), Error);
}

TEST(Statistics, QuantileInterpolatesBetweenOrderStatistics) {
  const std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 2);
  EXPECT_DOUBLE_EQ(quantile(v, 0.1), 1.4);  // rank 0.4 between 1 and 2
  EXPECT_DOUBLE_EQ(quantile(std::vector<double>{10, 20}, 0.3), 13);
  EXPECT_DOUBLE_EQ(quantile(std::vector<double>{7}, 0.9), 7);
  // The median is the 0.5 quantile for even counts too.
  const std::vector<double> even{4, 1, 3, 2, 8, 6};
  EXPECT_DOUBLE_EQ(quantile(even, 0.5), median(even));
}

TEST(Statistics, QuantileRejectsBadInput) {
  const std::vector<double> v{1, 2, 3};
  EXPECT_THROW(quantile(v, -0.01), Error);
  EXPECT_THROW(quantile(v, 1.01), Error);
  EXPECT_THROW(quantile(v, kNaN), Error);
  EXPECT_THROW(quantile(std::vector<double>{}, 0.5), Error);
  try {
    quantile(v, 2.0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q = 2"), std::string::npos) << e.what();
  }
}

TEST(Statistics, MedianAbsoluteDeviation) {
  // median 2; deviations 1 1 0 0 2 4 7 -> median 1.
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{1, 1, 2, 2, 4, 6, 9}), 1);
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{5}), 0);
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{1, 3}), 1);
  // A wild value does not inflate it (the standard deviation would be ~400).
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{10, 11, 9, 10, 1000}), 1);
  EXPECT_THROW(median_absolute_deviation(std::vector<double>{}), Error);
}

TEST(Statistics, MedianIntervalTooFewValuesGivesMinMaxWithItsCoverage) {
  const MedianInterval one = median_confidence_interval(std::vector<double>{4}, 0.95);
  EXPECT_EQ(one.low, 4);
  EXPECT_EQ(one.high, 4);
  EXPECT_EQ(one.coverage, 0);
  const MedianInterval two = median_confidence_interval(std::vector<double>{5, 3}, 0.95);
  EXPECT_EQ(two.low, 3);
  EXPECT_EQ(two.high, 5);
  EXPECT_DOUBLE_EQ(two.coverage, 0.5);
  const MedianInterval five = median_confidence_interval(std::vector<double>{5, 1, 4, 2, 3}, 0.95);
  EXPECT_EQ(five.low_rank, 0);
  EXPECT_EQ(five.high_rank, 4);
  EXPECT_DOUBLE_EQ(five.coverage, 1 - 2.0 / 32);  // short of 95%
  EXPECT_THROW(median_confidence_interval(std::vector<double>{}, 0.95), Error);
  EXPECT_THROW(median_confidence_interval(std::vector<double>{1, 2}, 1.0), Error);
  EXPECT_THROW(median_confidence_interval(std::vector<double>{1, 2}, 0.0), Error);
}

TEST(Statistics, MedianIntervalRanksMatchTheBinomial) {
  struct Case {
    int n;
    double confidence;
    int64_t low_rank, high_rank;
    double coverage;
  };
  // Exact binomial figures (computed independently with integer binomials).
  const Case cases[] = {{6, 0.95, 0, 5, 0.96875},           {7, 0.99, 0, 6, 0.984375},
                        {8, 0.99, 0, 7, 0.9921875},         {20, 0.95, 5, 14, 0.9586105346679688},
                        {20, 0.99, 3, 16, 0.9974231719970703}, {25, 0.95, 7, 17, 0.9567147493362427},
                        {100, 0.95, 39, 60, 0.9647997997822952}, {100, 0.99, 36, 63, 0.9933628794840739}};
  for (const Case& c : cases) {
    std::vector<double> v;
    for (int i = c.n; i >= 1; --i) v.push_back(10.0 * i);  // descending: the function must sort
    const MedianInterval ci = median_confidence_interval(v, c.confidence);
    EXPECT_EQ(ci.low_rank, c.low_rank) << "n " << c.n << " at " << c.confidence;
    EXPECT_EQ(ci.high_rank, c.high_rank) << "n " << c.n;
    EXPECT_NEAR(ci.coverage, c.coverage, 1e-12) << "n " << c.n;
    EXPECT_DOUBLE_EQ(ci.low, 10.0 * (c.low_rank + 1)) << "n " << c.n;
    EXPECT_DOUBLE_EQ(ci.high, 10.0 * (c.high_rank + 1)) << "n " << c.n;
    EXPECT_DOUBLE_EQ(median_interval_coverage(c.n, c.low_rank), ci.coverage);
  }
  // Large n: no underflow of 2^-n, and the interval narrows towards the middle.
  std::vector<double> big(5001);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i);
  const MedianInterval ci = median_confidence_interval(big, 0.95);
  EXPECT_GE(ci.coverage, 0.95);
  EXPECT_LT(ci.coverage, 0.96);
  EXPECT_NEAR(ci.low, 2500 - 1.96 * std::sqrt(5001.0) / 2, 3);
  EXPECT_NEAR(ci.high, 2500 + 1.96 * std::sqrt(5001.0) / 2, 3);
}

TEST(Statistics, MedianIntervalCoversTheTrueMedianAsOftenAsItSays) {
  // Exponential samples (skewed on purpose), true median ln 2.
  const int trials = 4000, n = 25;
  const double true_median = std::log(2.0);
  int covered = 0;
  double stated = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(-std::log(uniform(1234 + t, i)));
    const MedianInterval ci = median_confidence_interval(v, 0.95);
    stated = ci.coverage;
    if (ci.low <= true_median && true_median <= ci.high) ++covered;
  }
  // Stated 0.9567; one rank off either way would state 0.978 or 0.907.
  // Binomial sd of the observed share: sqrt(0.957 * 0.043 / 4000) = 0.0032.
  EXPECT_NEAR(static_cast<double>(covered) / trials, stated, 0.012);
}

// Tasks whose measured cost is the baseline's times 0.9 +- 0.2 (uniform),
// the baseline's own cost uniform in [1, 2]: the true ratio of means is 0.9.
void draw_tasks(uint64_t seed, int n, std::vector<double>& ours, std::vector<double>& base) {
  ours.clear();
  base.clear();
  for (int i = 0; i < n; ++i) {
    base.push_back(1 + uniform(seed, 2 * i));
    ours.push_back(base.back() * (0.7 + 0.4 * uniform(seed, 2 * i + 1)));
  }
}

TEST(Statistics, BootstrapRatioIntervalCoversTheRatioOfMeans) {
  // A constant ratio has nothing to move.
  const std::vector<double> base = {1, 2, 3, 4}, same = {0.9, 1.8, 2.7, 3.6};
  const RatioInterval flat = bootstrap_ratio_interval(same, base, 0.95);
  EXPECT_NEAR(flat.low, 0.9, 1e-12);
  EXPECT_NEAR(flat.high, 0.9, 1e-12);

  std::vector<double> ours, theirs;
  int covered = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    draw_tasks(100 + t, 30, ours, theirs);
    const RatioInterval ci = bootstrap_ratio_interval(ours, theirs, 0.95, 1000, t);
    EXPECT_LE(ci.low, ci.high);
    if (ci.low <= 0.9 && 0.9 <= ci.high) ++covered;
  }
  // The percentile bootstrap runs a little short of its level at n = 30;
  // binomial sd of the share at 0.95: 0.011. Half-width intervals would
  // cover about 0.68, and [min, max] of the resamples nearly always.
  EXPECT_GT(static_cast<double>(covered) / trials, 0.90);
  EXPECT_LT(static_cast<double>(covered) / trials, 0.99);

  // Seeded: the same interval again; more tasks, a narrower one.
  draw_tasks(7, 8, ours, theirs);
  const RatioInterval few = bootstrap_ratio_interval(ours, theirs, 0.95);
  const RatioInterval again = bootstrap_ratio_interval(ours, theirs, 0.95);
  EXPECT_EQ(few.low, again.low);
  EXPECT_EQ(few.high, again.high);
  draw_tasks(7, 128, ours, theirs);
  const RatioInterval many = bootstrap_ratio_interval(ours, theirs, 0.95);
  EXPECT_LT(many.high - many.low, (few.high - few.low) / 2);
}

TEST(Statistics, StudentTQuantileMatchesTheTables) {
  // Two-sided 95% and 99% points from the standard tables (to the tables'
  // own rounding), and the normal's in the limit.
  const std::vector<std::pair<int64_t, double>> at95 = {
      {1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {7, 2.365}, {10, 2.228}, {30, 2.042}};
  for (const auto& [df, t] : at95) EXPECT_NEAR(student_t_quantile(0.95, df), t, 5e-4) << df;
  EXPECT_NEAR(student_t_quantile(0.99, 1), 63.657, 5e-3);
  EXPECT_NEAR(student_t_quantile(0.99, 5), 4.032, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.90, 8), 1.860, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.95, 100000), 1.95996, 1e-4);
  EXPECT_NE(error_of([] { student_t_quantile(0.95, 0); }).find("0 degrees of freedom"),
            std::string::npos);
  EXPECT_NE(error_of([] { student_t_quantile(1, 3); }).find("confidence 1 must lie in (0, 1)"),
            std::string::npos);
}

TEST(Statistics, MeanIntervalCoversTheMeanOfAFewSets) {
  const std::vector<double> v = {1, 2, 3, 6};  // mean 3, sd sqrt(14 / 3)
  const MeanInterval ci = mean_confidence_interval(v, 0.95);
  EXPECT_DOUBLE_EQ(ci.mean, 3);
  EXPECT_NEAR(ci.high - ci.mean, 3.182446 * std::sqrt(14.0 / 3) / 2, 1e-5);
  EXPECT_NEAR(ci.mean - ci.low, ci.high - ci.mean, 1e-12);

  // Four sets' ratios, each 0.9 moved by its own +-15% (uniform): the t
  // interval covers 0.9 about as often as it says (a simulation of the same
  // design: 0.93); the normal's 1.96 in its place would cover about 0.84.
  const int sets = 4, trials = 2000;
  int covered = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> ratios;
    for (int g = 0; g < sets; ++g) ratios.push_back(0.9 * (1 + 0.15 * (2 * uniform(900 + t, g) - 1)));
    const MeanInterval r = mean_confidence_interval(ratios, 0.95);
    covered += r.low <= 0.9 && 0.9 <= r.high ? 1 : 0;
  }
  EXPECT_GT(static_cast<double>(covered) / trials, 0.91);  // binomial sd 0.006
  EXPECT_LT(static_cast<double>(covered) / trials, 0.97);

  const std::vector<double> one = {1}, nan = {1, kNaN};
  EXPECT_NE(error_of([&] { mean_confidence_interval(one, 0.95); }).find("1 values, need at least 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { mean_confidence_interval(nan, 0.95); }).find("value 1 of 2 is NaN"),
            std::string::npos);
}

TEST(Statistics, BootstrapRatioIntervalRejectsBadInput) {
  const std::vector<double> one = {1}, two = {1, 2}, zero = {0}, nan = {kNaN}, none;
  const auto fails = [](auto f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  fails([&] { bootstrap_ratio_interval(one, two, 0.95); }, "1 numerators and 2 denominators");
  fails([&] { bootstrap_ratio_interval(none, none, 0.95); }, "0 numerators");
  fails([&] { bootstrap_ratio_interval(one, zero, 0.95); }, "item 0 is 1 / 0");
  fails([&] { bootstrap_ratio_interval(nan, one, 0.95); }, "item 0 is nan / 1");
  fails([&] { bootstrap_ratio_interval(one, one, 1.0); }, "confidence 1 must lie in (0, 1)");
  fails([&] { bootstrap_ratio_interval(one, one, 0.95, 0); }, "0 resamples");
}

}  // namespace
}  // namespace embshard
