// Accuracy figures of a cost model against measured costs.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace embshard {

struct AccuracyFigures {
  double mape_pct = 0;     // mean of |pred - meas| / meas, in percent
  double p90_ape_pct = 0;  // 90th percentile of the same (linear interpolation)
  double kendall_tau = 0;  // Kendall's tau-b between predicted and measured
  // Median of (pred - meas) / meas, in percent, signed: the model's bias
  // (a model systematically high or low on this data, e.g. another machine).
  double median_error_pct = 0;
  int64_t count = 0;
};

// All zero (count 0) for empty spans. Throws Error when the spans differ in
// length, or a measured value
// is not finite and positive, or a prediction is not finite. tau-b is 0 when
// either side is constant (no ranking to agree with).
AccuracyFigures accuracy(std::span<const double> predicted, std::span<const double> measured);

// tau-b for a table ("0.953"), or "-" under 3 pairs, where a rank
// correlation says nothing (1 pair: 0; 2 pairs: +-1).
std::string kendall_tau_text(const AccuracyFigures& f);

// Kendall's tau-b, O(n^2) pairs (accuracy data holds thousands, not millions).
double kendall_tau_b(std::span<const double> x, std::span<const double> y);

}  // namespace embshard
