// Non-negative least squares for small problems.
#pragma once

#include <vector>

namespace embshard {

// Non-negative least squares min |A x - b|, A row-major [rows x cols], small
// cols (exact: every active set is tried). Used by the calibration fits.
std::vector<double> nnls(const std::vector<double>& a, const std::vector<double>& b, int cols);

}  // namespace embshard
