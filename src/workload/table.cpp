#include "embshard/workload/table.h"

#include <bit>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace embshard {

int reuse_bin(uint64_t count) {
  if (count <= 1) return 0;
  // Bin k >= 1 holds (2^(k-1), 2^k]: the bit width of count - 1.
  const int bin = static_cast<int>(std::bit_width(count - 1));
  return bin < kReuseBins - 1 ? bin : kReuseBins - 1;
}

uint64_t reuse_bin_lower(int bin) {
  if (bin <= 0) return 1;
  return (uint64_t{1} << (bin - 1)) + 1;
}

uint64_t reuse_bin_upper(int bin) {
  if (bin >= kReuseBins - 1) return std::numeric_limits<uint64_t>::max();
  return uint64_t{1} << bin;
}

std::string reuse_bin_label(int bin) {
  if (bin == 0) return "(0, 1]";
  if (bin == kReuseBins - 1) return "(32768+";
  return fmt::format("({}, {}]", uint64_t{1} << (bin - 1), uint64_t{1} << bin);
}

double total_variation(const ReuseHistogram& a, const ReuseHistogram& b) {
  double sum_a = 0, sum_b = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    sum_a += a[k];
    sum_b += b[k];
  }
  double tv = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    const double pa = sum_a > 0 ? a[k] / sum_a : 0.0;
    const double pb = sum_b > 0 ? b[k] / sum_b : 0.0;
    tv += std::fabs(pa - pb);
  }
  return tv / 2;
}

}  // namespace embshard
