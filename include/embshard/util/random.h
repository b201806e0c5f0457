// Seeds for deterministic, resumable random draws.
#pragma once

#include <cstdint>

namespace embshard {

// embshard's one 64-bit mix and fast stream (splitmix64): every seed
// derivation, hash of ids and filler stream uses these.
constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's step and finaliser: decorrelates nearby integers.
inline uint64_t splitmix64(uint64_t x) {
  x += kSplitmixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The splitmix64 stream seeded `state`: draw n (from 0) is
// splitmix64(state + n x kSplitmixGamma), so draws can also be had out of order.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    const uint64_t z = splitmix64(state);
    state += kSplitmixGamma;
    return z;
  }
};

// The seed of item `index` of a run seeded `seed`: a pure function of both,
// so that a resumed run draws exactly what an uninterrupted one would have.
inline uint64_t item_seed(uint64_t seed, uint64_t index) {
  return splitmix64(seed * 0x100000001b3ULL + splitmix64(index));
}

}  // namespace embshard
