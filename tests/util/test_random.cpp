// The one splitmix64 and the seeds derived from a run's seed: every caller
// draws the same numbers from the same definition.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "embshard/util/random.h"
#include "workload/synth_random.h"

namespace embshard {
namespace {

// The published splitmix64 (Steele, Lea and Flood; Vigna's reference code)
// seeded 0 starts with these three outputs.
TEST(Random, SplitMix64IsThePublishedGenerator) {
  SplitMix64 g{0};
  EXPECT_EQ(g.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(g.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(g.next(), 0x06c45d188009454fULL);
}

// The stream drawn in order (kernel bench's fillers), out of order, and as
// synth's per-table seeds: the same numbers.
TEST(Random, EveryCallerDrawsTheSameStream) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{2021}, ~uint64_t{0}}) {
    SplitMix64 g{seed};
    for (uint64_t n = 0; n < 64; ++n) {
      const uint64_t drawn = g.next();
      EXPECT_EQ(drawn, splitmix64_stream(seed, n)) << seed << " " << n;
      EXPECT_EQ(drawn, synth_detail::mix_seed(seed, n)) << seed << " " << n;
    }
  }
}

// Each use of a run's seed draws apart from the others and from the seed
// itself; an item's seed is a function of the run's seed and its index
// alone (a resumed run draws what an uninterrupted one would), distinct
// across items.
TEST(Random, SeedsOfUsesAndItemsDrawApart) {
  const SeedUse uses[] = {SeedUse::kFitRecords,       SeedUse::kFitCommPlacements,
                          SeedUse::kHeldOutTables,    SeedUse::kKernelGradients,
                          SeedUse::kPolicyHeadroom,   SeedUse::kCommSample,
                          SeedUse::kCollectiveLoad};
  for (const uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{7}}) {
    std::set<uint64_t> seeds = {seed};
    for (const SeedUse use : uses) {
      EXPECT_TRUE(seeds.insert(seed_for(seed, use)).second) << static_cast<uint64_t>(use);
    }
    std::set<uint64_t> items;
    for (uint64_t i = 0; i < 1000; ++i) {
      EXPECT_EQ(item_seed(seed, i), item_seed(seed, i));
      EXPECT_TRUE(items.insert(item_seed(seed, i)).second) << i;
    }
  }
}

}  // namespace
}  // namespace embshard
