// What every executor's prepared shards share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "embshard/util/random.h"

namespace embshard {

// Small, varied values, never denormal. A 64 KiB pattern of hashed values is
// copied over the buffer: gigabytes of weights fill at memcpy speed.
inline void fill_pattern(float* values, size_t count, uint64_t seed) {
  constexpr size_t kPattern = 16384;
  std::vector<float> pattern(kPattern);
  for (size_t i = 0; i < kPattern; ++i) {
    const uint64_t h = splitmix64(seed * kPattern + i);
    pattern[i] = static_cast<float>(static_cast<int>(h % 2001) - 1000) * 1e-4f;
  }
  for (size_t begin = 0; begin < count; begin += kPattern) {
    std::copy_n(pattern.begin(), std::min(kPattern, count - begin), values + begin);
  }
}

}  // namespace embshard
