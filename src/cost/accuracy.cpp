// MAPE, 90th-percentile APE and Kendall's tau-b of predictions vs measurements.
#include "embshard/cost/accuracy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "embshard/util/error.h"
#include "embshard/util/statistics.h"

namespace embshard {

double kendall_tau_b(std::span<const double> x, std::span<const double> y) {
  ES_CHECK(x.size() == y.size(), "kendall_tau_b: {} vs {} values", x.size(), y.size());
  // tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = all pairs, n1 / n2 = pairs
  // tied in x / in y; a pair tied in both counts in n1 and n2 but not C or D.
  double concordant = 0, discordant = 0, tied_x = 0, tied_y = 0, pairs = 0;
  const size_t n = x.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      pairs += 1;
      if (dx == 0) tied_x += 1;
      if (dy == 0) tied_y += 1;
      if (dx == 0 || dy == 0) continue;
      if ((dx > 0) == (dy > 0)) {
        concordant += 1;
      } else {
        discordant += 1;
      }
    }
  }
  const double denom = std::sqrt((pairs - tied_x) * (pairs - tied_y));
  return denom > 0 ? (concordant - discordant) / denom : 0.0;
}

AccuracyFigures accuracy(std::span<const double> predicted, std::span<const double> measured) {
  ES_CHECK(predicted.size() == measured.size(), "accuracy: {} predictions for {} measurements",
           predicted.size(), measured.size());
  if (measured.empty()) return {};  // e.g. an empty held-out split: nothing to report
  std::vector<double> ape, signed_pe;
  ape.reserve(measured.size());
  signed_pe.reserve(measured.size());
  for (size_t i = 0; i < measured.size(); ++i) {
    ES_CHECK(std::isfinite(measured[i]) && measured[i] > 0,
             "accuracy: measurement {} is {}, must be finite and positive", i, measured[i]);
    ES_CHECK(std::isfinite(predicted[i]), "accuracy: prediction {} is {}", i, predicted[i]);
    signed_pe.push_back(100.0 * (predicted[i] - measured[i]) / measured[i]);
    ape.push_back(std::abs(signed_pe.back()));
  }
  AccuracyFigures f;
  f.count = static_cast<int64_t>(ape.size());
  double sum = 0;
  for (double a : ape) sum += a;
  f.mape_pct = sum / ape.size();
  // The 90th percentile by linear interpolation between order statistics
  // (numpy's default), so that small sets give a well defined value.
  std::sort(ape.begin(), ape.end());
  const double rank = 0.9 * (ape.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, ape.size() - 1);
  f.p90_ape_pct = ape[lo] + (rank - lo) * (ape[hi] - ape[lo]);
  f.kendall_tau = kendall_tau_b(predicted, measured);
  f.median_error_pct = median(signed_pe);
  return f;
}

std::string kendall_tau_text(const AccuracyFigures& f) {
  return f.count < 3 ? std::string("-") : fmt::format("{:.3f}", f.kendall_tau);
}

}  // namespace embshard
