// Pieces of tables: what the planners place. A piece is a column range of a
// table (table-wise: all of it) with all its rows; a row piece: one block of
// a row split of such a column range (its group's pieces go to distinct
// devices); or a replica: the whole table on every device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"
#include "embshard/util/error.h"

namespace embshard::search {

struct Piece {
  int table = 0;
  int cols = 0;
  int id = 0;              // the cost model's id of this piece
  int64_t mem_bytes = 0;
  double single_ms = 0;    // fused cost of the piece alone
  int64_t row_offset = 0;  // row pieces: the block's first row
  int64_t rows = 0;        // the table's rows unless a row piece
  int group = -1;          // row pieces of one split share it; -1: not a row piece
  bool replica = false;
  double index_bytes = 0;  // row pieces: the global batch's indices in its rows (8 bytes each)
  // Block b of a row-wise split (every device, every column) goes to device
  // b: TorchRec's row-wise input distribution sends block b's lookups to
  // rank b. -1 for every other piece.
  int block_device = -1;

  bool row_piece() const { return group >= 0; }
  bool full_rows() const { return group < 0 && !replica; }
};

Piece make_piece(const PlanTask& task, ShardCosts& costs, int table, int cols);
// Block `block` of `cols` columns of a table split into `k` row blocks
// (row_block_sizes), in group `group`.
Piece make_row_piece(const PlanTask& task, ShardCosts& costs, int table, int cols, int k,
                     int block, int group);
// The table whole on every device.
Piece make_replica(const PlanTask& task, ShardCosts& costs, int table);
// The k row pieces of a full-row piece, in a new group (one past the largest in `pieces`).
std::vector<Piece> split_rows(const PlanTask& task, ShardCosts& costs, const Piece& p, int k,
                              const std::vector<Piece>& pieces);
// The sharding type the pieces of table t make (ShardingType), and whether
// every table's type is allowed by the task.
ShardingType pieces_type(const PlanTask& task, const std::vector<Piece>& pieces, int t);
bool types_allowed(const PlanTask& task, const std::vector<Piece>& pieces);

// One piece per table, except that a table too big for every device it may
// go to is halved (as often as needed and allowed) so that each half fits,
// and where halving is not allowed or not enough, split by rows over the
// fewest devices whose blocks fit. kRowsFirst splits such a table by rows
// first where that is allowed: no half adds its own optimizer state, so
// tasks too tight for the halves may fit (a planner's second try).
enum class Fit { kColumnsFirst, kRowsFirst };
std::vector<Piece> initial_pieces(const PlanTask& task, ShardCosts& costs,
                                  Fit fit = Fit::kColumnsFirst);

// A placement from initial_pieces: `place(fit)` with the columns-first start,
// and where that finds no room (an Error) and the rows-first start has other
// pieces, once more with that one; if both fail, the first error.
template <class Place>
auto place_with_fallback(const PlanTask& task, ShardCosts& costs, Place place) {
  try {
    return place(Fit::kColumnsFirst);
  } catch (const Error&) {
    const auto ids = [&](Fit fit) {
      std::vector<int> out;
      for (const Piece& p : initial_pieces(task, costs, fit)) out.push_back(p.id);
      std::sort(out.begin(), out.end());
      return out;
    };
    if (ids(Fit::kColumnsFirst) == ids(Fit::kRowsFirst)) throw;
    const std::exception_ptr first = std::current_exception();
    try {
      return place(Fit::kRowsFirst);
    } catch (const Error&) {
      std::rethrow_exception(first);
    }
  }
}

// The pieces with every full-row piece whose cost alone is over the even
// share (the pieces' costs alone over the devices) halved, and its halves in
// turn, while over the costliest narrowest half any of them can reach (no
// plan of halvings costs less) and the task allows column-wise splits. A
// beam halves one piece a step (ten steps: ten pieces), where thousands of
// tables on a thousand devices need tens of halvings. (Row splits are the
// beam's moves: at that scale a reduce-scatter spans every device, and its
// latency alone can cost more than the piece.)
// With `max_halvings` >= 0, at most that many, the costliest piece first.
std::vector<Piece> split_to_share(const PlanTask& task, ShardCosts& costs,
                                  const std::vector<Piece>& pieces, int max_halvings = -1);

// TorchRec's GreedyProposer's first proposal (torchrec.cpp): each table in
// the form of the lowest TorchRec perf the task allows (table-wise, column
// halves, row-wise over every device, or a replica).
std::vector<Piece> torchrec_greedy_proposal(const PlanTask& task, ShardCosts& costs);
// Its UniformProposer's row-wise proposal: every table that may be split by
// rows over every device, at full width.
std::vector<Piece> torchrec_row_wise_proposal(const PlanTask& task, ShardCosts& costs);

// Pieces of a table become column ranges in the order they appear (a row
// group takes one column range); a replica becomes a copy on every device.
Plan plan_from_pieces(const PlanTask& task, const std::vector<Piece>& pieces,
                      const std::vector<int>& device_of);

// Error for a piece that fits no device: names the table, the piece's bytes
// and the most free memory left on any device it may go to.
[[noreturn]] void throw_no_room(const PlanTask& task, const std::string& planner,
                                const Piece& piece, const std::vector<int64_t>& used);

// The one device a piece may go to (its table's pin, or a row-wise block's
// own device); -1 if any.
inline int required_device(const PlanTask& task, const Piece& p) {
  return p.block_device >= 0 ? p.block_device : task.pinned_device[p.table];
}

// Whether a piece fits device d given the memory already used.
inline bool fits(const PlanTask& task, const Piece& p, const std::vector<int64_t>& used, int d) {
  const int pin = required_device(task, p);
  return (pin < 0 || pin == d) && used[d] + p.mem_bytes <= task.device_mem_bytes[d];
}

// Which devices hold a piece of each row group: row pieces of a group go to
// distinct devices.
class GroupDevices {
 public:
  GroupDevices(const std::vector<Piece>& pieces, int devices);
  bool taken(const Piece& p, int d) const {
    return p.group >= 0 && on_[static_cast<size_t>(p.group) * devices_ + d] != 0;
  }
  void take(const Piece& p, int d) {
    if (p.group >= 0) on_[static_cast<size_t>(p.group) * devices_ + d] = 1;
  }

 private:
  int devices_;
  std::vector<uint8_t> on_;
};

// Places pieces in the given order (those with a required device first; replicas on every
// device before the rest), each on the device that fits it with the lowest
// accumulated score (ties: the lowest index; row pieces of a group on
// distinct devices). A full-row piece that fits nowhere is halved where the
// task allows it (both halves take half its score), else throw_no_room. `pieces` and `score` come back
// in placement order, with any halves, matching the returned devices.
std::vector<int> greedy_by_score(const PlanTask& task, const std::string& planner,
                                 ShardCosts& costs, std::vector<Piece>& pieces,
                                 std::vector<double>& score);

}  // namespace embshard::search
