// The baselines NeuroShard compares with: random placement and greedy
// placement by a per-table score (tables by descending score, each to the
// device with the lowest accumulated score that has room).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "pieces.h"
#include "search/planners.h"

namespace embshard {
namespace {

using search::Piece;

class RandomPlanner : public Planner {
 public:
  explicit RandomPlanner(uint64_t seed) : seed_(seed) {}
  std::string name() const override { return "random"; }

  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    return search::place_with_fallback(task, costs, [&](search::Fit fit) { return place(task, costs, fit); });
  }

 private:
  Plan place(const PlanTask& task, ShardCosts& costs, search::Fit fit) const {
    std::vector<Piece> pieces = search::initial_pieces(task, costs, fit);
    std::mt19937_64 rng(seed_);
    std::shuffle(pieces.begin(), pieces.end(), rng);
    // Pieces with one device (pins, row-wise blocks) first, so a random choice
    // never takes their room.
    std::stable_partition(pieces.begin(), pieces.end(),
                          [&](const Piece& p) { return search::required_device(task, p) >= 0; });
    std::vector<int64_t> used(task.num_devices(), 0);
    std::vector<int> device_of, feasible;
    search::GroupDevices groups(pieces, task.num_devices());
    for (size_t i = 0; i < pieces.size(); ++i) {
      feasible.clear();
      for (int d = 0; d < task.num_devices(); ++d) {
        if (search::fits(task, pieces[i], used, d) && !groups.taken(pieces[i], d)) {
          feasible.push_back(d);
        }
      }
      if (feasible.empty()) {
        // Out of room: halve the piece where allowed, as the greedy ones do.
        const Piece p = pieces[i];
        if (!p.full_rows() || !task.splittable(p.table) || !task.split.can_halve(p.cols) ||
            !task.types.allows(ShardingType::kColumnWise)) {
          search::throw_no_room(task, name(), p, used);
        }
        pieces[i] = search::make_piece(task, costs, p.table, p.cols / 2);
        pieces.insert(pieces.begin() + i + 1, pieces[i]);
        --i;
        continue;
      }
      const int d = feasible[std::uniform_int_distribution<size_t>(0, feasible.size() - 1)(rng)];
      device_of.push_back(d);
      groups.take(pieces[i], d);
      used[d] += pieces[i].mem_bytes;
    }
    return search::plan_from_pieces(task, pieces, device_of);
  }

  uint64_t seed_;
};

enum class Score { kSize, kDim, kLookup, kSizeLookup };

class ScoreGreedyPlanner : public Planner {
 public:
  ScoreGreedyPlanner(std::string name, Score score) : name_(std::move(name)), score_(score) {}
  std::string name() const override { return name_; }

  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    return search::place_with_fallback(task, costs, [&](search::Fit fit) { return place(task, costs, fit); });
  }

 private:
  Plan place(const PlanTask& task, ShardCosts& costs, search::Fit fit) const {
    std::vector<Piece> pieces = search::initial_pieces(task, costs, fit);
    std::vector<double> score(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) score[i] = score_of(task, pieces[i]);
    std::vector<size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<Piece> sorted;
    std::vector<double> sorted_score;
    for (size_t i : order) sorted.push_back(pieces[i]), sorted_score.push_back(score[i]);
    const std::vector<int> device_of =
        search::greedy_by_score(task, name_, costs, sorted, sorted_score);
    return search::plan_from_pieces(task, sorted, device_of);
  }

  double score_of(const PlanTask& task, const Piece& p) const {
    const TableSpec& t = task.tables[p.table];
    switch (score_) {
      case Score::kSize: return static_cast<double>(p.mem_bytes);
      case Score::kDim: return p.cols;
      case Score::kLookup: return p.cols * t.pooling_factor;
      case Score::kSizeLookup:
        // log10 of rows, at least 1 so that tiny tables keep a positive score.
        return p.cols * t.pooling_factor * std::max(1.0, std::log10(static_cast<double>(t.rows)));
    }
    return 0;
  }

  std::string name_;
  Score score_;
};

}  // namespace

std::unique_ptr<Planner> make_random_planner(const PlannerOptions& options) {
  return std::make_unique<RandomPlanner>(options.seed);
}

std::unique_ptr<Planner> make_score_greedy_planner(const std::string& score) {
  if (score == "size_greedy") return std::make_unique<ScoreGreedyPlanner>(score, Score::kSize);
  if (score == "dim_greedy") return std::make_unique<ScoreGreedyPlanner>(score, Score::kDim);
  if (score == "lookup_greedy") return std::make_unique<ScoreGreedyPlanner>(score, Score::kLookup);
  if (score == "size_lookup_greedy") {
    return std::make_unique<ScoreGreedyPlanner>(score, Score::kSizeLookup);
  }
  ES_THROW("no score greedy planner '{}'", score);
}

}  // namespace embshard
