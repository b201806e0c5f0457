// Mlp::forward's fast paths against the reference, and log_positive
// against std::log.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cost_test_util.h"
#include "embshard/cost/neural/mlp.h"

namespace embshard {
namespace {

using testing::random_mlp;

// The blocked fast path of Mlp::forward against the double-accumulation
// reference (unprepared weights), on odd and block-sized widths.
TEST(Mlp, BlockedForwardEqualsReference) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{
           {1, 1}, {3, 7, 1}, {43, 64, 64, 32}, {32, 64, 64, 1}, {9, 33, 65, 8}, {5, 100, 40, 2}}) {
    Mlp ref = random_mlp(sizes, false, rng);
    Mlp fast = ref;
    fast.prepare();
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(sizes.front());
      for (float& v : x) v = u(rng);
      std::vector<float> a(sizes.back()), b(sizes.back());
      ref.forward(x.data(), a.data());
      fast.forward(x.data(), b.data());
      for (size_t o = 0; o < a.size(); ++o) EXPECT_NEAR(b[o], a[o], 1e-5f * (1 + std::abs(a[o])));
    }
  }
}

// Zero inputs are skipped, bit-exactly: inputs mostly zero (and all zero,
// only even ones, only odd ones), on widths over one 64-bit mask word, give
// the reference's outputs; and where at most half the inputs are non-zero,
// the blocks never read the weights from zero inputs: set to NaN in the
// transposed copy the blocks read, they leave the outputs' bits unchanged.
TEST(Mlp, ZeroInputsSkipped) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const std::vector<int>& sizes :
       std::vector<std::vector<int>>{{32, 64, 64, 1}, {43, 64, 64, 32}, {130, 70, 9}, {7, 8, 3}}) {
    Mlp ref = random_mlp(sizes, false, rng);
    Mlp fast = ref;
    fast.prepare();
    const int n = sizes.front();
    for (int trial = 0; trial < 24; ++trial) {
      std::vector<float> x(n, 0.0f);
      for (int i = 0; i < n; ++i) {
        const bool on = trial == 0   ? false
                        : trial == 1 ? i % 2 == 0
                        : trial == 2 ? i % 2 == 1
                        : trial == 3 ? i == n - 1
                                     : rng() % 4 == 0;
        if (on) x[i] = u(rng);
      }
      std::vector<float> a(sizes.back()), b(sizes.back()), c(sizes.back());
      ref.forward(x.data(), a.data());
      fast.forward(x.data(), b.data());
      for (size_t o = 0; o < a.size(); ++o) EXPECT_NEAR(b[o], a[o], 1e-5f * (1 + std::abs(a[o])));
      // Inputs over half non-zero go through every weight (a loop without
      // data-dependent branches), so the NaNs reach them: not checked there.
      if (2 * std::count_if(x.begin(), x.end(), [](float v) { return v != 0.0f; }) > n) continue;
      Mlp poisoned = fast;
      DenseLayer& first = poisoned.layers.front();
      for (int i = 0; i < n; ++i) {
        if (x[i] != 0.0f) continue;
        for (int o = 0; o < first.out; ++o) {
          first.weight_t[static_cast<size_t>(i) * first.out + o] =
              std::numeric_limits<float>::quiet_NaN();
        }
      }
      poisoned.forward(x.data(), c.data());
      for (size_t o = 0; o < b.size(); ++o) {
        EXPECT_EQ(std::bit_cast<uint32_t>(c[o]), std::bit_cast<uint32_t>(b[o])) << o;
      }
    }
  }
}

TEST(LogPositive, MatchesStdLog) {
  std::mt19937_64 rng(3);
  std::vector<float> xs = {1.0f, 2.0f, 0.5f, 1.41421356f, std::nextafter(1.41421356f, 2.0f),
                           std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f),
                           std::numeric_limits<float>::min(), 1e-30f, 1e30f,
                           std::numeric_limits<float>::max()};
  std::uniform_real_distribution<float> exponent(-80, 80);
  for (int i = 0; i < 100000; ++i) xs.push_back(std::exp(exponent(rng)));
  for (float x : xs) {
    const double want = std::log(static_cast<double>(x));
    ASSERT_NEAR(log_positive(x), want, 4e-7 * std::max(1.0, std::abs(want))) << x;
  }
}

}  // namespace
}  // namespace embshard
