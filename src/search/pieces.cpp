// Pieces, and the score-greedy placement the baselines share.
#include "pieces.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "embshard/util/error.h"

namespace embshard::search {

Piece make_piece(const PlanTask& task, ShardCosts& costs, int table, int cols) {
  Piece p;
  p.table = table;
  p.cols = cols;
  p.rows = task.tables[table].rows;
  p.id = costs.piece_id(table, cols);
  p.mem_bytes = task.piece_bytes(table, p.rows, cols);
  p.single_ms = costs.single_ms(p.id);
  return p;
}

Piece make_row_piece(const PlanTask& task, ShardCosts& costs, int table, int cols, int k,
                     int block, int group) {
  const TableSpec& spec = task.tables[table];
  const std::vector<int64_t> sizes = row_block_sizes(spec, k);
  Piece p;
  p.table = table;
  p.cols = cols;
  p.row_offset = (spec.rows + k - 1) / k * block;
  p.rows = sizes[block];
  p.group = group;
  p.id = costs.shard_id(Shard{table, 0, cols, p.row_offset, p.rows, 0, false});
  p.mem_bytes = task.piece_bytes(table, p.rows, cols);
  p.single_ms = costs.single_ms(p.id);
  p.index_bytes = index_exchange_bytes(spec.pooling_factor, task.batch_size,
                                       task.lookup_share(table, p.row_offset, p.rows));
  if (k == task.num_devices() && cols == spec.dim) p.block_device = block;
  return p;
}

Piece make_replica(const PlanTask& task, ShardCosts& costs, int table) {
  const TableSpec& spec = task.tables[table];
  Piece p;
  p.table = table;
  p.cols = spec.dim;
  p.rows = spec.rows;
  p.replica = true;
  p.id = costs.shard_id(Shard{table, 0, spec.dim, 0, spec.rows, 0, true});
  p.mem_bytes = task.table_bytes(table);
  p.single_ms = costs.single_ms(p.id);
  return p;
}

std::vector<Piece> split_rows(const PlanTask& task, ShardCosts& costs, const Piece& p, int k,
                              const std::vector<Piece>& pieces) {
  ES_CHECK(p.full_rows(), "table '{}': only a piece with all its rows can be split by rows",
           task.tables[p.table].name);
  int group = 0;
  for (const Piece& q : pieces) group = std::max(group, q.group + 1);
  std::vector<Piece> out;
  for (int b = 0; b < k; ++b) out.push_back(make_row_piece(task, costs, p.table, p.cols, k, b, group));
  return out;
}

namespace {

// What the pieces of one table have in common, gathered piece by piece.
struct TableShape {
  int count = 0, group = -1, group_size = 0;
  bool replica = false, full_rows = true, full_cols = true;

  void add(const PlanTask& task, const Piece& p) {
    replica = replica || p.replica;
    ++count;
    full_rows = full_rows && p.full_rows();
    full_cols = full_cols && p.cols == task.tables[p.table].dim;
    if (p.group >= 0 && (group < 0 || p.group == group)) group = p.group, ++group_size;
  }
  ShardingType type(const PlanTask& task) const {
    if (replica) return ShardingType::kDataParallel;
    if (count <= 1) return ShardingType::kTableWise;
    if (full_rows) return ShardingType::kColumnWise;
    if (full_cols) {
      return group_size == task.num_devices() ? ShardingType::kRowWise
                                              : ShardingType::kTableRowWise;
    }
    return ShardingType::kGridShard;
  }
};

}  // namespace

ShardingType pieces_type(const PlanTask& task, const std::vector<Piece>& pieces, int t) {
  TableShape shape;
  for (const Piece& p : pieces) {
    if (p.table == t) shape.add(task, p);
  }
  return shape.type(task);
}

bool types_allowed(const PlanTask& task, const std::vector<Piece>& pieces) {
  if (task.types.mask == ShardingTypes::all().mask) return true;
  std::vector<TableShape> shapes(task.tables.size());
  for (const Piece& p : pieces) shapes[p.table].add(task, p);
  for (const TableShape& shape : shapes) {
    if (shape.count > 0 && !task.types.allows(shape.type(task))) return false;
  }
  return true;
}

namespace {

// The fewest row blocks (2..devices) of `cols` columns of table t that the
// allowed types permit and whose blocks each fit a device of their own (the
// k-th largest holds one); 0 if none.
int fewest_row_blocks(const PlanTask& task, int t, int cols) {
  const TableSpec& s = task.tables[t];
  if (cols != s.dim && !task.types.allows(ShardingType::kGridShard)) return 0;
  std::vector<int64_t> caps = task.device_mem_bytes;
  std::sort(caps.begin(), caps.end(), std::greater<>());
  for (int k = 2; k <= task.num_devices(); ++k) {
    if (!task.row_splittable(t, k)) continue;
    if (task.piece_bytes(t, (s.rows + k - 1) / k, cols) <= caps[k - 1]) return k;
  }
  return 0;
}

}  // namespace

std::vector<Piece> initial_pieces(const PlanTask& task, ShardCosts& costs, Fit fit) {
  const int64_t largest = *std::max_element(task.device_mem_bytes.begin(),
                                            task.device_mem_bytes.end());
  const bool halve = task.types.allows(ShardingType::kColumnWise);
  std::vector<Piece> pieces;
  for (int t = 0; t < task.num_tables(); ++t) {
    int cols = task.tables[t].dim;
    int count = 1;
    if (fit == Fit::kRowsFirst && task.splittable(t) &&
        task.piece_bytes(t, task.tables[t].rows, cols) > largest) {
      if (const int k = fewest_row_blocks(task, t, cols); k > 0) {
        for (const Piece& r : split_rows(task, costs, make_piece(task, costs, t, cols), k, pieces)) {
          pieces.push_back(r);
        }
        continue;
      }
    }
    while (halve && task.splittable(t) &&
           task.piece_bytes(t, task.tables[t].rows, cols) > largest && task.split.can_halve(cols)) {
      cols /= 2;
      count *= 2;
    }
    if (task.splittable(t) && task.piece_bytes(t, task.tables[t].rows, cols) > largest) {
      // Still too big: split by rows, at this width if a grid is allowed, else whole.
      int k = fewest_row_blocks(task, t, cols);
      if (k == 0 && cols != task.tables[t].dim) {
        k = fewest_row_blocks(task, t, task.tables[t].dim);
        if (k > 0) cols = task.tables[t].dim, count = 1;
      }
      if (k > 0) {
        const Piece whole = make_piece(task, costs, t, cols);
        for (int i = 0; i < count; ++i) {
          for (const Piece& r : split_rows(task, costs, whole, k, pieces)) pieces.push_back(r);
        }
        continue;
      }
    }
    const Piece p = make_piece(task, costs, t, cols);
    for (int i = 0; i < count; ++i) pieces.push_back(p);
  }
  return pieces;
}

std::vector<Piece> split_to_share(const PlanTask& task, ShardCosts& costs,
                                  const std::vector<Piece>& pieces, int max_halvings) {
  if (!task.types.allows(ShardingType::kColumnWise)) return pieces;
  double share = 0;
  for (const Piece& p : pieces) share += p.replica ? 0.0 : p.single_ms;
  share /= task.num_devices();
  // Some device holds each such piece's narrowest half or more: no plan of
  // halvings costs less, and halving below the costliest of them only adds work.
  double line = share;
  for (const Piece& p : pieces) {
    if (p.full_rows() && p.single_ms > share && task.splittable(p.table)) {
      int cols = p.cols;
      while (task.split.can_halve(cols)) cols /= 2;
      line = std::max(line, make_piece(task, costs, p.table, cols).single_ms);
    }
  }
  const auto over = [&](const Piece& p) {
    return p.full_rows() && p.single_ms > line && task.splittable(p.table);
  };
  // The costliest first (a heap by cost alone), while any halvings are left.
  const auto cheaper = [](const Piece& a, const Piece& b) { return a.single_ms < b.single_ms; };
  std::vector<Piece> out, todo;
  for (const Piece& p : pieces) (over(p) ? todo : out).push_back(p);
  std::make_heap(todo.begin(), todo.end(), cheaper);
  for (int left = max_halvings; !todo.empty();) {
    std::pop_heap(todo.begin(), todo.end(), cheaper);
    const Piece p = todo.back();
    todo.pop_back();
    if (left != 0 && p.single_ms > line && task.split.can_halve(p.cols)) {
      const Piece half = make_piece(task, costs, p.table, p.cols / 2);
      for (int i = 0; i < 2; ++i) {
        todo.push_back(half);
        std::push_heap(todo.begin(), todo.end(), cheaper);
      }
      if (left > 0) --left;
    } else {
      out.push_back(p);
    }
  }
  return out;
}

Plan plan_from_pieces(const PlanTask& task, const std::vector<Piece>& pieces,
                      const std::vector<int>& device_of) {
  Plan plan;
  std::vector<int> next_col(task.tables.size(), 0);
  std::vector<int> group_col;  // a row group's column offset, -1 until seen
  plan.shards.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    Shard s;
    s.table = p.table;
    s.cols = p.cols;
    s.row_offset = p.row_offset;
    s.rows = p.rows;
    if (p.replica) {
      s.replica = true;
      for (int d = 0; d < task.num_devices(); ++d) {
        s.device = d;
        plan.shards.push_back(s);
      }
      continue;
    }
    s.device = device_of[i];
    if (p.group >= 0) {
      if (static_cast<int>(group_col.size()) <= p.group) group_col.resize(p.group + 1, -1);
      if (group_col[p.group] < 0) {
        group_col[p.group] = next_col[p.table];
        next_col[p.table] += p.cols;
      }
      s.col_offset = group_col[p.group];
    } else {
      s.col_offset = next_col[p.table];
      next_col[p.table] += p.cols;
    }
    plan.shards.push_back(s);
  }
  // TorchRec lists shards table by table, in column then row order.
  std::stable_sort(plan.shards.begin(), plan.shards.end(), [](const Shard& a, const Shard& b) {
    if (a.table != b.table) return a.table < b.table;
    if (a.col_offset != b.col_offset) return a.col_offset < b.col_offset;
    return a.row_offset < b.row_offset;
  });
  return plan;
}

GroupDevices::GroupDevices(const std::vector<Piece>& pieces, int devices) : devices_(devices) {
  int groups = 0;
  for (const Piece& p : pieces) groups = std::max(groups, p.group + 1);
  on_.assign(static_cast<size_t>(groups) * devices, 0);
}

void throw_no_room(const PlanTask& task, const std::string& planner, const Piece& piece,
                   const std::vector<int64_t>& used) {
  int64_t most_free = 0;
  int best = -1;
  for (int d = 0; d < task.num_devices(); ++d) {
    const int pin = required_device(task, piece);
    if (pin >= 0 && pin != d) continue;
    const int64_t free = task.device_mem_bytes[d] - used[d];
    if (best < 0 || free > most_free) most_free = free, best = d;
  }
  const TableSpec& s = task.tables[piece.table];
  const std::string rows = piece.row_piece()
                               ? fmt::format("rows [{}, {}) of its {}", piece.row_offset,
                                             piece.row_offset + piece.rows, s.rows)
                               : fmt::format("{} rows", s.rows);
  // A row block that fits by memory is out of devices its group has not taken.
  const std::string why = piece.row_piece() && most_free >= piece.mem_bytes
                              ? "; the devices with room hold another block of its row split "
                                "(a split's blocks go to distinct devices)"
                              : "";
  ES_THROW("{}: no device has room for table '{}' ({} x {} of its {} columns, {} bytes): "
           "the most free memory left is {} bytes on device {}{}",
           planner, s.name, rows, piece.cols, s.dim, piece.mem_bytes, most_free, best, why);
}

std::vector<int> greedy_by_score(const PlanTask& task, const std::string& planner,
                                 ShardCosts& costs, std::vector<Piece>& pieces,
                                 std::vector<double>& score) {
  // Pieces with one device (pins, row-wise blocks) first: the others can go around them.
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return required_device(task, pieces[i]) >= 0; });
  std::vector<Piece> sorted;
  std::vector<double> sorted_score;
  for (size_t i : order) sorted.push_back(pieces[i]), sorted_score.push_back(score[i]);
  pieces.swap(sorted);
  score.swap(sorted_score);

  std::vector<int64_t> used(task.num_devices(), 0);
  std::vector<double> load(task.num_devices(), 0.0);
  std::vector<int> device_of(pieces.size(), -1);
  // Replicas first, on every device.
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].replica) continue;
    for (int d = 0; d < task.num_devices(); ++d) {
      if (!fits(task, pieces[i], used, d)) throw_no_room(task, planner, pieces[i], used);
      used[d] += pieces[i].mem_bytes;
      load[d] += score[i];
    }
    device_of[i] = 0;
  }
  GroupDevices groups(pieces, task.num_devices());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].replica) continue;
    int best = -1;
    for (int d = 0; d < task.num_devices(); ++d) {
      if (fits(task, pieces[i], used, d) && !groups.taken(pieces[i], d) &&
          (best < 0 || load[d] < load[best])) {
        best = d;
      }
    }
    if (best < 0) {
      // Out of room: halve the piece where allowed (scores are per column).
      const Piece p = pieces[i];
      if (!p.full_rows() || !task.splittable(p.table) || !task.split.can_halve(p.cols) ||
          !task.types.allows(ShardingType::kColumnWise)) {
        throw_no_room(task, planner, p, used);
      }
      const Piece half = make_piece(task, costs, p.table, p.cols / 2);
      pieces[i] = half;
      pieces.insert(pieces.begin() + i + 1, half);
      score[i] /= 2;
      score.insert(score.begin() + i + 1, score[i]);
      device_of.insert(device_of.begin() + i + 1, -1);
      --i;
      continue;
    }
    device_of[i] = best;
    groups.take(pieces[i], best);
    used[best] += pieces[i].mem_bytes;
    load[best] += score[i];
  }
  return device_of;
}

}  // namespace embshard::search
