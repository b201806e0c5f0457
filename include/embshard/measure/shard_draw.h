// Random shards of a workload's tables: NeuroShard's augmentation, shared by
// `bench compute` (the samples) and the anchors (cost/anchors.h).
#pragma once

#include <cstdint>
#include <vector>

#include "embshard/measure/shard_timer.h"
#include "embshard/workload/workload.h"

namespace embshard {

struct ShardDraw {
  int max_tables = 15;                              // 1..max_tables tables
  int64_t mem_cap_bytes = int64_t{128} << 20;       // their weight bytes at most
  std::vector<int> dims = {4, 8, 16, 32, 64, 128};  // each table at one of these
  // Share of drawn tables made a piece: a row block of a 2-, 4- or 8-way row
  // split, or a replica's slice of the batch (1/2, 1/4, 1/8). 0: whole
  // tables only.
  double piece_share = 0;
  uint64_t seed = 0;
  // Each table stored as one of these, drawn uniformly; empty: as the
  // workload's table is.
  std::vector<DataType> data_types;
};

// Shard `index`: a pure function of (seed, index), so that a resumed run
// draws exactly the shards an uninterrupted one would have drawn. Every draw
// too big for the cap (weight bytes by type) falls back to the smallest table at the smallest dim;
// the caller checks that it fits.
std::vector<ShardTable> draw_shard(const Workload& workload, const ShardDraw& draw, int64_t index);

}  // namespace embshard
