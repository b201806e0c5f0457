// Seeded random helpers for the synthetic workload generator.
//
// std::*_distribution are implementation-defined; these are written out so a
// seed gives the same workload with any standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace embshard::synth_detail {

using Rng = std::mt19937_64;

// splitmix64: decorrelated seeds for per-table generators.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

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
