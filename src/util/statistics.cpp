#include "embshard/util/statistics.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "embshard/util/error.h"

namespace embshard {
namespace {

// A sorted copy; NaN would break the sort's ordering, so it is an error here
// rather than a silently wrong median.
std::vector<double> sorted_copy(std::span<const double> values, const char* what) {
  ES_CHECK(!values.empty(), "{}: no values", what);
  std::vector<double> sorted(values.begin(), values.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    ES_CHECK(!std::isnan(sorted[i]), "{}: value {} of {} is NaN", what, i, sorted.size());
  }
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double median_of_sorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// P(B = k) for B ~ Binomial(n, 1/2), in log space so that n in the
// thousands does not underflow 2^-n before the product is formed.
double binomial_half_pmf(int64_t n, int64_t k) {
  const double log_choose = std::lgamma(static_cast<double>(n) + 1) -
                            std::lgamma(static_cast<double>(k) + 1) -
                            std::lgamma(static_cast<double>(n - k) + 1);
  return std::exp(log_choose + static_cast<double>(n) * std::log(0.5));
}

}  // namespace

double mean(std::span<const double> values) {
  ES_CHECK(!values.empty(), "mean: no values");
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double median(std::span<const double> values) {
  return median_of_sorted(sorted_copy(values, "median"));
}

double quantile(std::span<const double> values, double q) {
  // Written so that NaN fails too.
  ES_CHECK(q >= 0.0 && q <= 1.0, "quantile: q = {} must lie in [0, 1]", q);
  return quantile_of_sorted(sorted_copy(values, "quantile"), q);
}

double fastest_half_mean(std::span<const double> values) {
  const std::vector<double> sorted = sorted_copy(values, "fastest_half_mean");
  const size_t k = std::max<size_t>(1, sorted.size() / 2);
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += sorted[i];
  return sum / static_cast<double>(k);
}

double median_absolute_deviation(std::span<const double> values) {
  const std::vector<double> sorted = sorted_copy(values, "median_absolute_deviation");
  const double center = median_of_sorted(sorted);
  std::vector<double> deviations;
  deviations.reserve(sorted.size());
  for (double v : sorted) deviations.push_back(std::abs(v - center));
  std::sort(deviations.begin(), deviations.end());
  return median_of_sorted(deviations);
}

double median_interval_coverage(int64_t n, int64_t low_rank) {
  ES_CHECK(n >= 1 && low_rank >= 0, "median_interval_coverage: n = {}, low_rank = {}", n,
           low_rank);
  if (2 * low_rank >= n - 1) return 0.0;  // empty or a single point
  double cdf = 0;
  for (int64_t k = 0; k <= low_rank; ++k) cdf += binomial_half_pmf(n, k);
  return std::max(0.0, 1.0 - 2.0 * cdf);
}

MedianInterval median_confidence_interval(std::span<const double> values, double confidence) {
  ES_CHECK(confidence > 0.0 && confidence < 1.0,
           "median_confidence_interval: confidence = {} must lie in (0, 1)", confidence);
  const std::vector<double> sorted = sorted_copy(values, "median_confidence_interval");
  const int64_t n = static_cast<int64_t>(sorted.size());
  // Coverage falls as the rank rises, so the narrowest interval that still
  // reaches the level is the last rank before it drops below; rank 0
  // ([min, max]) is kept even when it falls short (see the header). The
  // binomial CDF is accumulated as the rank rises: one pass, not one per rank.
  int64_t low_rank = 0;
  double coverage = median_interval_coverage(n, 0);
  double cdf = binomial_half_pmf(n, 0);
  for (int64_t k = 1; 2 * k < n - 1; ++k) {
    cdf += binomial_half_pmf(n, k);
    const double next = 1.0 - 2.0 * cdf;
    if (next < confidence) break;
    low_rank = k;
    coverage = next;
  }
  MedianInterval interval;
  interval.low_rank = low_rank;
  interval.high_rank = n - 1 - low_rank;
  interval.low = sorted[interval.low_rank];
  interval.high = sorted[interval.high_rank];
  interval.coverage = coverage;
  return interval;
}

namespace {

// P(|T| <= t) for T ~ Student's t with whole df: with theta = atan(t /
// sqrt(df)) and c = cos^2 theta, odd df: (2 / pi) (theta + sin theta cos
// theta (1 + 2/3 c + 2*4/(3*5) c^2 + ...)), the series to the power
// (df - 3) / 2; even df: sin theta (1 + 1/2 c + 1*3/(2*4) c^2 + ...), to
// (df - 2) / 2. Every term is positive: no cancellation at any df.
double student_t_two_sided(double t, int64_t df) {
  const double theta = std::atan(t / std::sqrt(static_cast<double>(df)));
  const double c = std::cos(theta) * std::cos(theta);
  double term = 1, sum = 1;
  if (df % 2 == 1) {
    for (int64_t k = 2; k <= df - 2; k += 2) {
      term *= c * static_cast<double>(k) / static_cast<double>(k + 1);
      sum += term;
    }
    const double tail = df > 1 ? std::sin(theta) * std::cos(theta) * sum : 0;
    return 2 / std::numbers::pi * (theta + tail);
  }
  for (int64_t k = 1; k <= df - 3; k += 2) {
    term *= c * static_cast<double>(k) / static_cast<double>(k + 1);
    sum += term;
  }
  return std::sin(theta) * sum;
}

}  // namespace

double student_t_quantile(double confidence, int64_t df) {
  ES_CHECK(df >= 1, "Student's t: {} degrees of freedom, need at least 1", df);
  ES_CHECK(confidence > 0 && confidence < 1, "Student's t: confidence {} must lie in (0, 1)",
           confidence);
  double low = 0, high = 1;
  while (student_t_two_sided(high, df) < confidence) high *= 2;
  for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
    const double mid = (low + high) / 2;
    (student_t_two_sided(mid, df) < confidence ? low : high) = mid;
  }
  return (low + high) / 2;
}

MeanInterval mean_confidence_interval(std::span<const double> values, double confidence) {
  const size_t n = values.size();
  ES_CHECK(n >= 2, "mean interval: {} values, need at least 2", n);
  for (size_t i = 0; i < n; ++i) {
    ES_CHECK(!std::isnan(values[i]), "mean interval: value {} of {} is NaN", i, n);
  }
  const double m = mean(values);
  double squares = 0;
  for (const double v : values) squares += (v - m) * (v - m);
  const double half = student_t_quantile(confidence, static_cast<int64_t>(n) - 1) *
                      std::sqrt(squares / static_cast<double>(n - 1) / static_cast<double>(n));
  return {m, m - half, m + half};
}

RatioInterval bootstrap_ratio_interval(std::span<const double> numerators,
                                       std::span<const double> denominators, double confidence,
                                       int resamples, uint64_t seed) {
  const size_t n = numerators.size();
  ES_CHECK(n > 0 && denominators.size() == n,
           "bootstrap ratio: {} numerators and {} denominators, need the same count, at least one",
           n, denominators.size());
  ES_CHECK(confidence > 0 && confidence < 1, "bootstrap ratio: confidence {} must lie in (0, 1)",
           confidence);
  ES_CHECK(resamples >= 1, "bootstrap ratio: {} resamples, need at least 1", resamples);
  for (size_t i = 0; i < n; ++i) {
    ES_CHECK(std::isfinite(numerators[i]) && std::isfinite(denominators[i]) && denominators[i] > 0,
             "bootstrap ratio: item {} is {} / {}: needs finite values and a positive denominator",
             i, numerators[i], denominators[i]);
  }
  std::mt19937_64 rng(seed);
  std::vector<double> ratios(static_cast<size_t>(resamples));
  for (double& r : ratios) {
    double num = 0, den = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = static_cast<size_t>(rng() % n);
      num += numerators[i];
      den += denominators[i];
    }
    r = num / den;
  }
  std::sort(ratios.begin(), ratios.end());
  return {quantile_of_sorted(ratios, (1 - confidence) / 2),
          quantile_of_sorted(ratios, (1 + confidence) / 2)};
}

}  // namespace embshard
