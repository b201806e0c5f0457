// Pieces, and the score-greedy placement the baselines share.
#include "pieces.h"

#include <algorithm>
#include <numeric>

#include "embshard/util/error.h"

namespace embshard::search {

Piece make_piece(const PlanTask& task, ShardCosts& costs, int table, int cols) {
  Piece p;
  p.table = table;
  p.cols = cols;
  p.id = costs.piece_id(table, cols);
  p.mem_bytes = task.memory.shard_bytes(task.tables[table].rows, cols);
  p.single_ms = costs.single_ms(p.id);
  return p;
}

std::vector<Piece> initial_pieces(const PlanTask& task, ShardCosts& costs) {
  const int64_t largest = *std::max_element(task.device_mem_bytes.begin(),
                                            task.device_mem_bytes.end());
  std::vector<Piece> pieces;
  for (int t = 0; t < task.num_tables(); ++t) {
    int cols = task.tables[t].dim;
    int count = 1;
    while (task.splittable(t) && task.memory.shard_bytes(task.tables[t].rows, cols) > largest &&
           task.split.can_halve(cols)) {
      cols /= 2;
      count *= 2;
    }
    const Piece p = make_piece(task, costs, t, cols);
    for (int i = 0; i < count; ++i) pieces.push_back(p);
  }
  return pieces;
}

Plan plan_from_pieces(const PlanTask& task, const std::vector<Piece>& pieces,
                      const std::vector<int>& device_of) {
  Plan plan;
  std::vector<int> next_col(task.tables.size(), 0);
  plan.shards.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    Shard s;
    s.table = p.table;
    s.col_offset = next_col[p.table];
    s.cols = p.cols;
    s.rows = task.tables[p.table].rows;
    s.device = device_of[i];
    next_col[p.table] += p.cols;
    plan.shards.push_back(s);
  }
  // TorchRec lists shards table by table, in column order.
  std::stable_sort(plan.shards.begin(), plan.shards.end(), [](const Shard& a, const Shard& b) {
    return a.table != b.table ? a.table < b.table : a.col_offset < b.col_offset;
  });
  return plan;
}

void throw_no_room(const PlanTask& task, const std::string& planner, const Piece& piece,
                   const std::vector<int64_t>& used) {
  int64_t most_free = 0;
  int best = -1;
  for (int d = 0; d < task.num_devices(); ++d) {
    const int pin = task.pinned_device[piece.table];
    if (pin >= 0 && pin != d) continue;
    const int64_t free = task.device_mem_bytes[d] - used[d];
    if (best < 0 || free > most_free) most_free = free, best = d;
  }
  const TableSpec& s = task.tables[piece.table];
  ES_THROW("{}: no device has room for table '{}' ({} rows x {} of its {} columns, {} bytes): "
           "the most free memory left is {} bytes on device {}",
           planner, s.name, s.rows, piece.cols, s.dim, piece.mem_bytes, most_free, best);
}

std::vector<int> greedy_by_score(const PlanTask& task, const std::string& planner,
                                 ShardCosts& costs, std::vector<Piece>& pieces,
                                 std::vector<double>& score) {
  // Pinned pieces first: they have one device, the others can go around them.
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return task.pinned_device[pieces[i].table] >= 0; });
  std::vector<Piece> sorted;
  std::vector<double> sorted_score;
  for (size_t i : order) sorted.push_back(pieces[i]), sorted_score.push_back(score[i]);
  pieces.swap(sorted);
  score.swap(sorted_score);

  std::vector<int64_t> used(task.num_devices(), 0);
  std::vector<double> load(task.num_devices(), 0.0);
  std::vector<int> device_of;
  for (size_t i = 0; i < pieces.size(); ++i) {
    int best = -1;
    for (int d = 0; d < task.num_devices(); ++d) {
      if (fits(task, pieces[i], used, d) && (best < 0 || load[d] < load[best])) best = d;
    }
    if (best < 0) {
      // Out of room: halve the piece where allowed (scores are per column).
      const Piece p = pieces[i];
      if (!task.splittable(p.table) || !task.split.can_halve(p.cols)) {
        throw_no_room(task, planner, p, used);
      }
      const Piece half = make_piece(task, costs, p.table, p.cols / 2);
      pieces[i] = half;
      pieces.insert(pieces.begin() + i + 1, half);
      score[i] /= 2;
      score.insert(score.begin() + i + 1, score[i]);
      --i;
      continue;
    }
    device_of.push_back(best);
    used[best] += pieces[i].mem_bytes;
    load[best] += score[i];
  }
  return device_of;
}

}  // namespace embshard::search
