// Summary statistics: the project's one home for median, quantile, median
// absolute deviation, mean and the distribution-free confidence interval of
// the median. Timings, accuracy figures and reports call these instead of
// sorting by hand, so that "median" means the same thing everywhere.
//
// Every function takes the values by span and does not modify them (the
// order-statistic ones sort a copy). Empty input, NaN values and a quantile
// outside [0, 1] throw embshard::Error.
#pragma once

#include <cstdint>
#include <span>

namespace embshard {

double mean(std::span<const double> values);

// The middle order statistic; for an even count the mean of the two middle ones.
double median(std::span<const double> values);

// The q-quantile by linear interpolation between order statistics (numpy's
// default, "type 7"): rank q * (n - 1) in the sorted values, so q = 0 is the
// minimum, q = 1 the maximum and q = 0.5 the median.
double quantile(std::span<const double> values, double q);

// The mean of the fastest half: the n / 2 smallest values (at least one),
// so the minimum for one to three values. How a measurement repeated in
// passes, some of them inside one of the machine's slow stretches, becomes
// one figure: the minimum removes the stretches but keeps one pass's luck;
// the mean of the fastest half removes them and averages the luck.
double fastest_half_mean(std::span<const double> values);

// median(|x - median(x)|), unscaled (multiply by 1.4826 for a normal sigma).
// Used as a spread that a few wild runs cannot move, unlike the standard
// deviation.
double median_absolute_deviation(std::span<const double> values);

// [low, high] = the order statistics x_(low_rank) and x_(high_rank)
// (0-based, symmetric: high_rank = n - 1 - low_rank) that contain the true
// median with probability `coverage`, for any continuous distribution: the
// count of values below the median is Binomial(n, 1/2), so
//   coverage = P(low_rank < B <= high_rank) = 1 - 2 P(B <= low_rank).
// The narrowest symmetric interval whose coverage is >= `confidence` is
// returned. When even [min, max] falls short (coverage 1 - 2^(1-n): 0 for
// n = 1, 0.5 for n = 2, 0.9375 for n = 5; at 95% it takes n >= 6, at 99%
// n >= 8) [min, max] is returned with that lower coverage, so a caller that
// needs the level must check `coverage` (the interleaved timer does).
struct MedianInterval {
  double low = 0, high = 0;
  int64_t low_rank = 0, high_rank = 0;
  double coverage = 0;
};
MedianInterval median_confidence_interval(std::span<const double> values, double confidence);

// The exact coverage of [x_(k), x_(n-1-k)] (0-based) for n values; 0 when
// the interval is empty or a single point.
double median_interval_coverage(int64_t n, int64_t low_rank);

// The two-sided quantile of Student's t distribution with `df` degrees of
// freedom: the t with P(|T| <= t) = confidence (12.706 for df 1 at 0.95,
// 2.228 for df 10, 1.960 in the limit). Exact for whole df, from the
// distribution function's finite series (Abramowitz and Stegun 26.7.3-4),
// inverted by bisection. Error when df < 1 or confidence is outside (0, 1).
double student_t_quantile(double confidence, int64_t df);

// The mean of `values` and its interval mean +- t * sd / sqrt(n), sd the
// sample standard deviation and t student_t_quantile(confidence, n - 1):
// where the mean of more values like these would lie, if they are about
// normal and independent. For a handful of values (task sets drawn from
// other pools) this is the honest width: a bootstrap over so few runs
// short. Error for fewer than two values, a NaN, or confidence outside (0, 1).
struct MeanInterval {
  double mean = 0, low = 0, high = 0;
};
MeanInterval mean_confidence_interval(std::span<const double> values, double confidence);

// The percentile bootstrap interval of sum(numerators) / sum(denominators)
// over paired items (item i brings numerators[i] and denominators[i]
// together): `resamples` draws of n items with replacement, seeded by
// `seed`, and the (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of
// their ratios. How far a ratio of means over a few tasks could move with
// other tasks of the same kind; it says nothing of what moves every item
// alike. Error when the spans are empty or differ in length, a value is not
// finite, a denominator is not positive, confidence is outside (0, 1) or
// resamples < 1.
struct RatioInterval {
  double low = 0, high = 0;
};
RatioInterval bootstrap_ratio_interval(std::span<const double> numerators,
                                       std::span<const double> denominators, double confidence,
                                       int resamples = 2000, uint64_t seed = 1);

}  // namespace embshard
