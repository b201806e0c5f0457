// Column pieces of tables: what the table-wise and column-wise planners place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"

namespace embshard::search {

struct Piece {
  int table = 0;
  int cols = 0;
  int id = 0;              // the cost model's id of this piece
  int64_t mem_bytes = 0;
  double single_ms = 0;    // fused cost of the piece alone
};

Piece make_piece(const PlanTask& task, ShardCosts& costs, int table, int cols);

// One piece per table, except that a table too big for every device it may
// go to is halved (as often as needed and allowed) so that each half fits.
std::vector<Piece> initial_pieces(const PlanTask& task, ShardCosts& costs);

// Pieces of a table become column ranges in the order they appear.
Plan plan_from_pieces(const PlanTask& task, const std::vector<Piece>& pieces,
                      const std::vector<int>& device_of);

// Error for a piece that fits no device: names the table, the piece's bytes
// and the most free memory left on any device it may go to.
[[noreturn]] void throw_no_room(const PlanTask& task, const std::string& planner,
                                const Piece& piece, const std::vector<int64_t>& used);

// Whether a piece fits device d given the memory already used.
inline bool fits(const PlanTask& task, const Piece& p, const std::vector<int64_t>& used, int d) {
  const int pin = task.pinned_device[p.table];
  return (pin < 0 || pin == d) && used[d] + p.mem_bytes <= task.device_mem_bytes[d];
}

// Places pieces in the given order (pinned ones first), each on the device
// that fits it with the lowest accumulated score (ties: the lowest index). A
// piece that fits nowhere is halved where the task allows it (both halves
// take half its score), else throw_no_room. `pieces` and `score` come back
// in placement order, with any halves, matching the returned devices.
std::vector<int> greedy_by_score(const PlanTask& task, const std::string& planner,
                                 ShardCosts& costs, std::vector<Piece>& pieces,
                                 std::vector<double>& score);

}  // namespace embshard::search
