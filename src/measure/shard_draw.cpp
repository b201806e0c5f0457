// Random shards of a workload's tables.
#include "embshard/measure/shard_draw.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "embshard/util/random.h"

namespace embshard {
namespace {

// A drawn table made a row block or a replica slice (ShardDraw::piece_share).
void make_piece(const TableSpec& spec, std::mt19937_64& rng, ShardTable& t) {
  const int ways = 2 << std::uniform_int_distribution<int>(0, 2)(rng);  // 2, 4, 8
  const int part = std::uniform_int_distribution<int>(0, ways - 1)(rng);
  if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
    t.batch_slice = part;
    t.batch_slices = ways;
    return;
  }
  // TorchRec's blocks of ceil(rows / ways) (plan.h's row_block_sizes; bench
  // sits left of plan): skip a split whose last block would be empty.
  const int64_t block = (spec.rows + ways - 1) / ways;
  if (block * (ways - 1) >= spec.rows) return;
  t.row_offset = block * part;
  t.rows = std::min(block, spec.rows - t.row_offset);
}

}  // namespace

std::vector<ShardTable> draw_shard(const Workload& workload, const ShardDraw& options,
                                   int64_t index) {
  std::mt19937_64 rng(item_seed(options.seed, static_cast<uint64_t>(index)));
  const int pool = static_cast<int>(workload.tables.size());
  const int wanted = std::uniform_int_distribution<int>(1, options.max_tables)(rng);
  std::vector<int> order(pool);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<size_t> pick_dim(0, options.dims.size() - 1);
  std::vector<ShardTable> shard;
  int64_t used_bytes = 0;
  for (int table : order) {
    if (static_cast<int>(shard.size()) == wanted) break;
    const int dim = options.dims[pick_dim(rng)];
    ShardTable t{table, dim};
    t.data_type = workload.tables[table].data_type;
    if (options.piece_share > 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng) < options.piece_share) {
      make_piece(workload.tables[table], rng, t);
    }
    if (!options.data_types.empty()) {
      const size_t last = options.data_types.size() - 1;
      t.data_type = options.data_types[std::uniform_int_distribution<size_t>(0, last)(rng)];
    }
    const int64_t rows = t.rows > 0 ? t.rows : workload.tables[table].rows;
    const int64_t bytes = rows * data_type_row_bytes(t.data_type, dim);
    if (used_bytes + bytes > options.mem_cap_bytes) continue;
    used_bytes += bytes;
    shard.push_back(t);
  }
  if (shard.empty()) {
    // Every draw was too big: fall back to the smallest table at the smallest dim
    // (the caller checks that it fits).
    const int smallest =
        static_cast<int>(std::min_element(workload.tables.begin(), workload.tables.end(),
                                          [](auto& a, auto& b) { return a.rows < b.rows; }) -
                         workload.tables.begin());
    ShardTable t{smallest, *std::min_element(options.dims.begin(), options.dims.end())};
    t.data_type = workload.tables[smallest].data_type;
    shard.push_back(t);
  }
  return shard;
}

}  // namespace embshard
