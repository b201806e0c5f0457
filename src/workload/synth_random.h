// Seeded random helpers for the synthetic workload generator.
//
// std::*_distribution are implementation-defined; these are written out so a
// seed gives the same workload with any standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "embshard/util/random.h"

namespace embshard::synth_detail {

using Rng = std::mt19937_64;

// Decorrelated seeds for per-table generators: draw `stream` of the
// splitmix64 stream seeded `seed`.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) { return splitmix64_stream(seed, stream); }

// Uniform in [0, 1).
inline double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [0, n), n > 0 (multiply-shift; bias below 2^-64 * n).
inline uint64_t uniform_below(Rng& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

inline double standard_normal(Rng& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Gamma(shape, 1) for an integer shape: a sum of exponentials.
inline double gamma_int(Rng& rng, int shape) {
  double sum = 0;
  for (int i = 0; i < shape; ++i) sum -= std::log(1.0 - uniform01(rng));
  return sum;
}

template <typename T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[uniform_below(rng, i)]);
  }
}

}  // namespace embshard::synth_detail
