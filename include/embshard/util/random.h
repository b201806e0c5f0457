// Seeds for deterministic, resumable random draws.
#pragma once

#include <cstdint>

namespace embshard {

// splitmix64's finaliser: decorrelates nearby integers.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The seed of item `index` of a run seeded `seed`: a pure function of both,
// so that a resumed run draws exactly what an uninterrupted one would have.
inline uint64_t item_seed(uint64_t seed, uint64_t index) {
  return splitmix64(seed * 0x100000001b3ULL + splitmix64(index));
}

}  // namespace embshard
