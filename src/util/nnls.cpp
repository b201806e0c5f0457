// Exact non-negative least squares for a handful of unknowns: the
// calibration fits have at most 7, so trying every active set (2^7 small
// solves) is simpler and more robust than an iterative active-set method.
#include <cmath>
#include <limits>

#include "embshard/util/nnls.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// Solves the normal equations restricted to the columns in `mask` by Gaussian
// elimination with partial pivoting; false when they are (near) singular.
bool solve_subset(const std::vector<double>& a, const std::vector<double>& b, int cols,
                  unsigned mask, std::vector<double>& x) {
  std::vector<int> idx;
  for (int c = 0; c < cols; ++c) {
    if (mask & (1u << c)) idx.push_back(c);
  }
  const int k = static_cast<int>(idx.size());
  const size_t rows = b.size();
  std::vector<double> m(k * (k + 1), 0.0);  // [k x (k+1)] augmented
  for (size_t r = 0; r < rows; ++r) {
    for (int i = 0; i < k; ++i) {
      const double ai = a[r * cols + idx[i]];
      for (int j = 0; j < k; ++j) m[i * (k + 1) + j] += ai * a[r * cols + idx[j]];
      m[i * (k + 1) + k] += ai * b[r];
    }
  }
  for (int p = 0; p < k; ++p) {
    int best = p;
    for (int i = p + 1; i < k; ++i) {
      if (std::abs(m[i * (k + 1) + p]) > std::abs(m[best * (k + 1) + p])) best = i;
    }
    if (std::abs(m[best * (k + 1) + p]) < 1e-300) return false;
    for (int j = 0; j <= k; ++j) std::swap(m[p * (k + 1) + j], m[best * (k + 1) + j]);
    for (int i = 0; i < k; ++i) {
      if (i == p) continue;
      const double f = m[i * (k + 1) + p] / m[p * (k + 1) + p];
      for (int j = p; j <= k; ++j) m[i * (k + 1) + j] -= f * m[p * (k + 1) + j];
    }
  }
  x.assign(cols, 0.0);
  for (int i = 0; i < k; ++i) {
    x[idx[i]] = m[i * (k + 1) + k] / m[i * (k + 1) + i];
    if (!std::isfinite(x[idx[i]])) return false;
  }
  return true;
}

}  // namespace

std::vector<double> nnls(const std::vector<double>& a, const std::vector<double>& b, int cols) {
  ES_CHECK(cols >= 1 && cols <= 12 && a.size() == b.size() * cols,
           "nnls: {} coefficients for {} values and {} unknowns", a.size(), b.size(), cols);
  std::vector<double> best(cols, 0.0), x;
  double best_sse = std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; mask < (1u << cols); ++mask) {
    if (mask != 0 && !solve_subset(a, b, cols, mask, x)) continue;
    if (mask == 0) x.assign(cols, 0.0);
    bool feasible = true;
    for (double v : x) feasible = feasible && v >= 0;
    if (!feasible) continue;
    double sse = 0;
    for (size_t r = 0; r < b.size(); ++r) {
      double pred = 0;
      for (int c = 0; c < cols; ++c) pred += a[r * cols + c] * x[c];
      sse += (pred - b[r]) * (pred - b[r]);
    }
    if (sse < best_sse * (1 - 1e-12)) {
      best_sse = sse;
      best = x;
    }
  }
  return best;
}

}  // namespace embshard
