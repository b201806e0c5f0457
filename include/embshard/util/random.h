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

// Draw n (from 0) of the splitmix64 stream seeded `state`, out of order.
inline uint64_t splitmix64_stream(uint64_t state, uint64_t n) {
  return splitmix64(state + kSplitmixGamma * n);
}

// The splitmix64 stream seeded `state`, drawn in order: draw n is
// splitmix64_stream(state, n).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    const uint64_t z = splitmix64(state);
    state += kSplitmixGamma;
    return z;
  }
};

// The uses of a run's seed that draw apart from its main stream: each mixes
// its own constant in (seed_for), so that no two uses of one seed draw alike.
// A new use takes a new constant; an old one keeps its value, or the draws
// of records, models and files made with it would change.
enum class SeedUse : uint64_t {
  kFitRecords = 0xf17,            // fit: which records are fitted on, which judge
  kFitCommPlacements = 0xc0,      // fit: which comm placements are fitted on
  kHeldOutTables = 0x7ab1e5,      // train: the tables held out to judge
  kKernelGradients = 0xabcdef,    // bench kernel: a case's output gradients
  kPolicyHeadroom = kSplitmixGamma,  // train-policy: each task's memory headroom
  kCommSample = 0xc033,           // bench comm: a placement (with the device count added)
  kCollectiveLoad = 0xc011,       // bench comm: a placement's collectives (likewise)
};

inline uint64_t seed_for(uint64_t seed, SeedUse use) { return seed ^ static_cast<uint64_t>(use); }

// The seed of item `index` of a run seeded `seed`: a pure function of both,
// so that a resumed run draws exactly what an uninterrupted one would have.
inline uint64_t item_seed(uint64_t seed, uint64_t index) {
  return splitmix64(seed * 0x100000001b3ULL + splitmix64(index));
}

}  // namespace embshard
