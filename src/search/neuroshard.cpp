// NeuroShard's search: beam search over column-wise halvings, each candidate
// rated by the greedy grid search (grid_greedy.h) against the cost model
// (screened first on a coarse grid: PlannerOptions::screen_keep);
// beyond NeuroShard, where the task allows them, moves that split a piece's
// rows over k devices (k = 2 and every device), that replicate a table on
// every device and that join such splits and replicas back, and a beam from
// the cheaper of two of TorchRec's proposals.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "beam.h"
#include "grid_greedy.h"
#include "pieces.h"
#include "search/planners.h"

namespace embshard {
namespace {

using search::BeamState;
using search::Piece;
using search::PieceOrder;
using search::Ratings;
using search::by_cost;
using search::rate_children;
using search::remember;
using search::signature;

class NeuroShardPlanner : public Planner {
 public:
  explicit NeuroShardPlanner(const PlannerOptions& o) : options_(o) {
    const SearchBudget& b = o.budget;
    ES_CHECK(b.beam_width >= 1, "beam width is {}, must be at least 1", b.beam_width);
    ES_CHECK(b.max_steps >= 0, "max steps is {}, must be at least 0", b.max_steps);
    ES_CHECK(b.candidates >= 0, "candidates is {}, must be at least 0", b.candidates);
    ES_CHECK(b.scan_patience >= 0, "scan patience is {}, must be at least 0 (0: no limit)",
             b.scan_patience);
    ES_CHECK(b.screen_keep >= 0, "screen keep is {}, must be at least 0 (0: no screening)",
             b.screen_keep);
    ES_CHECK(b.step_patience >= 0, "step patience is {}, must be at least 0 (0: all max steps)",
             b.step_patience);
    ES_CHECK(o.uncertainty >= 0 && o.uncertainty <= 1,
             "uncertainty is {}, must be 0..1 (a fraction of a piece's cost)", o.uncertainty);
    ES_CHECK(o.threads >= 0, "threads is {}, must be at least 0 (0: one per hardware thread)", o.threads);
  }
  std::string name() const override { return "neuroshard"; }
  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    return plan_candidates(task, costs, 1).front();
  }
  std::vector<Plan> plan_candidates(const PlanTask& task, ShardCosts& costs, int count) override;
  std::string search_summary() const override { return summary_; }

 private:
  std::vector<size_t> candidates(const PlanTask& task, const BeamState& s) const;
  BeamState child(const PlanTask& task, const BeamState& s, std::span<const size_t> removed,
                  std::span<const Piece> added) const;
  BeamState child(const PlanTask& task, const BeamState& s, size_t i,
                  std::span<const Piece> added) const {
    return child(task, s, std::span<const size_t>(&i, 1), added);
  }
  BeamState split(const PlanTask& task, ShardCosts& costs, const BeamState& s, size_t i) const;
  void more_moves(const PlanTask& task, ShardCosts& costs, const BeamState& s,
                  std::vector<BeamState>& out) const;
  void joins(const PlanTask& task, ShardCosts& costs, const BeamState& s,
             std::vector<BeamState>& out) const;
  BeamState torchrec_proposal(const PlanTask& task, ShardCosts& costs,
                              std::vector<std::unique_ptr<search::GridGreedy>>& grids,
                              Ratings& rated, std::unordered_set<uint64_t>& seen,
                              bool with_row_wise, size_t& work, std::string& which) const;
  // The beams of one search (plan_candidates), in order.
  // NeuroShard's beam over halvings alone, then (where the task allows other
  // types) a beam with every move: a wider space must not crowd the
  // halvings' lineage out of a beam of width 3, so the search keeps the best
  // of all and is never rated worse than the table- and column-wise search.
  // Then a beam that halves nothing: in the every-move beam the halvings'
  // children, often cheaper one step ahead, crowd out the lineages that
  // replicate or split rows table after table, which end cheaper
  // (docs/sharding_types.md). It starts from the tables that fit no device
  // split by rows, not halved, where those differ: halves it cannot join
  // again. Last, when the cheaper of TorchRec's greedy
  // and row-wise proposals (torchrec_proposal) beats every plan found so
  // far, a fourth beam with every move starts from it (a beam of its own:
  // beside the start its children crowded out the start's lineage). The
  // beam without halvings gets the work the halvings' beam took (pieces
  // placed by the children they rated), the every-move beam half of it
  // (mostly one step: it finds the plans that mix halvings and row splits
  // from the start), and the last that work times its start's pieces over
  // the start's (its children place that many more pieces each: the
  // row-wise proposal's are one per table and device), counted, not timed,
  // so that plans do not depend on the machine: every type costs at most
  // about 2.5 times the search time where the last beam does not run.
  enum Phase { kHalvings, kEveryMove, kNoHalvings, kFromProposal };
  // One search's state across its beams.
  struct SearchState {
    std::vector<std::unique_ptr<search::GridGreedy>> grids;  // one per thread
    Ratings screened, rated;
    std::vector<BeamState> best;  // the `count` cheapest distinct states, cheapest first
    size_t halvings_work = 0;     // pieces placed by the halvings' beam
  };
  // A beam's start: its pieces placed by cost, as NeuroShard places them;
  // where that leaves a big piece without room, the big pieces first.
  // Remembered among the best.
  static BeamState place_start(const PlanTask& task, std::vector<Piece> pieces, SearchState& st,
                               int count);
  // The last beam's start: the cheaper of TorchRec's greedy and row-wise
  // proposals where it beats every plan found so far (remembered among them;
  // `scale`: its pieces over the start's), none otherwise; the summary says which.
  std::optional<BeamState> proposal_start(const PlanTask& task, ShardCosts& costs, int count,
                                          SearchState& st, const BeamState& start,
                                          std::unordered_set<uint64_t>& seen, size_t& work,
                                          double& scale);
  // A beam's steps from `beam` (`seen`: the piece sets already made), until
  // max_steps, no new candidates, the step patience, or `work_limit` pieces
  // placed; returns the steps taken and sets `stop` to why it ended early.
  int run_beam(const PlanTask& task, ShardCosts& costs, int count, Phase phase, SearchState& st,
               std::vector<BeamState> beam, std::unordered_set<uint64_t>& seen, size_t& work,
               double work_share, std::string& stop) const;

  PlannerOptions options_;
  std::string summary_;  // the last search's steps
};

// Top `k` of `ok` by a key (descending), appended to `picked` once per piece id.
template <class Key>
void top_k(std::vector<size_t> ok, size_t k, const Key& key, const std::vector<Piece>& pieces,
           std::unordered_set<int>& seen, std::vector<size_t>& picked) {
  std::stable_sort(ok.begin(), ok.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  for (size_t j = 0; j < ok.size() && j < k; ++j) {
    if (seen.insert(pieces[ok[j]].id).second) picked.push_back(ok[j]);
  }
}

// The top-k splittable pieces by memory and the top-k by single cost;
// identical pieces (same table and width) give the same child, so once each.
std::vector<size_t> NeuroShardPlanner::candidates(const PlanTask& task,
                                                  const BeamState& s) const {
  std::vector<size_t> ok;
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    const Piece& p = s.pieces[i];
    if (p.full_rows() && task.splittable(p.table) && task.split.can_halve(p.cols) &&
        task.types.allows(ShardingType::kColumnWise)) {
      ok.push_back(i);
    }
  }
  const size_t k = static_cast<size_t>(options_.budget.candidates);
  std::unordered_set<int> seen;
  std::vector<size_t> picked;
  top_k(ok, k, [&](size_t i) { return s.pieces[i].single_ms; }, s.pieces, seen, picked);
  top_k(ok, k, [&](size_t i) { return static_cast<double>(s.pieces[i].mem_bytes); }, s.pieces, seen, picked);
  return picked;
}

// The child whose pieces are the parent's without its pieces `removed`
// (ascending indices) and with `added`: merged in at their places in
// PieceOrder (each after the pieces it ties with, in the order given), so
// the child's pieces are in order as the parent's are, in one pass (a row
// split adds a piece per device).
BeamState NeuroShardPlanner::child(const PlanTask& task, const BeamState& s,
                                   std::span<const size_t> removed,
                                   std::span<const Piece> added) const {
  const PieceOrder order(task, s.big_first);
  BeamState child;
  child.big_first = s.big_first;
  child.signature = s.signature;
  std::vector<Piece> kept;
  kept.reserve(s.pieces.size());
  auto next = removed.begin();
  for (size_t j = 0; j < s.pieces.size(); ++j) {
    if (next != removed.end() && *next == j) {
      child.signature -= search::piece_key(s.pieces[j].id);
      ++next;
    } else {
      kept.push_back(s.pieces[j]);
    }
  }
  std::vector<Piece> in(added.begin(), added.end());
  std::stable_sort(in.begin(), in.end(), order);
  for (const Piece& p : in) child.signature += search::piece_key(p.id);
  child.pieces.resize(kept.size() + in.size());
  std::merge(kept.begin(), kept.end(), in.begin(), in.end(), child.pieces.begin(), order);
  return child;
}

BeamState NeuroShardPlanner::split(const PlanTask& task, ShardCosts& costs, const BeamState& s,
                                   size_t i) const {
  const Piece half = search::make_piece(task, costs, s.pieces[i].table, s.pieces[i].cols / 2);
  const Piece halves[] = {half, half};
  return child(task, s, i, halves);
}

// The moves beyond halving: split a full-row piece's rows over 2 or every
// device (candidates: the largest, the costliest and the hottest such
// pieces), and replicate a table-wise table on every device (candidates: the
// costliest and the smallest that fit every device). Children whose sharding
// types the task does not allow are left out.
void NeuroShardPlanner::more_moves(const PlanTask& task, ShardCosts& costs, const BeamState& s,
                                   std::vector<BeamState>& out) const {
  const size_t k = std::max(1, options_.budget.candidates / 2);
  const int n = task.num_devices();
  std::vector<int> count(task.tables.size(), 0);
  for (const Piece& p : s.pieces) ++count[p.table];
  std::vector<size_t> rows_ok, replica_ok;
  const int64_t smallest = *std::min_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    const Piece& p = s.pieces[i];
    if (!p.full_rows() || !task.splittable(p.table)) continue;
    if (task.row_splittable(p.table, 2) || task.row_splittable(p.table, n)) rows_ok.push_back(i);
    if (count[p.table] == 1 && task.types.allows(ShardingType::kDataParallel) &&
        p.mem_bytes <= smallest) {
      replica_ok.push_back(i);
    }
  }
  const std::vector<Piece>& pieces = s.pieces;
  std::unordered_set<int> seen;
  std::vector<size_t> picked;
  top_k(rows_ok, k, [&](size_t i) { return static_cast<double>(pieces[i].mem_bytes); }, pieces, seen, picked);
  top_k(rows_ok, k, [&](size_t i) { return pieces[i].single_ms; }, pieces, seen, picked);
  top_k(rows_ok, k, [&](size_t i) { return task.tables[pieces[i].table].pooling_factor; }, pieces, seen, picked);
  for (size_t i : picked) {
    const int splits[] = {2, n};
    for (int j = 0; j < (n == 2 ? 1 : 2); ++j) {  // on 2 devices, 2 and n are one split
      const int blocks = splits[j];
      if (!task.row_splittable(pieces[i].table, blocks)) continue;
      BeamState next = child(task, s, i, search::split_rows(task, costs, pieces[i], blocks, pieces));
      if (search::types_allowed(task, next.pieces)) out.push_back(std::move(next));
    }
  }
  seen.clear();
  picked.clear();
  top_k(replica_ok, k, [&](size_t i) { return pieces[i].single_ms; }, pieces, seen, picked);
  top_k(replica_ok, k, [&](size_t i) { return -static_cast<double>(pieces[i].mem_bytes); }, pieces, seen, picked);
  for (size_t i : picked) {
    const Piece replica[] = {search::make_replica(task, costs, pieces[i].table)};
    out.push_back(child(task, s, i, replica));
  }
}

// The splits' way back: a row split's blocks joined into one full-row piece
// (where it fits the largest device) or into half as many blocks, and a
// replica into one table-wise piece (candidates: the k row splits with the
// lowest summed cost of their blocks alone, and the k costliest replicas).
// A start that splits the rows of many tables (TorchRec's row-wise
// proposal) can so undo the splits that cost more than they save.
void NeuroShardPlanner::joins(const PlanTask& task, ShardCosts& costs, const BeamState& s,
                              std::vector<BeamState>& out) const {
  const size_t k = std::max(1, options_.budget.candidates / 2);
  const std::vector<Piece>& pieces = s.pieces;
  struct Split {
    std::vector<size_t> at;  // its blocks' indices, ascending
    double ms = 0;
  };
  std::vector<Split> splits;
  std::vector<size_t> replicas;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (p.replica) replicas.push_back(i);
    if (!p.row_piece()) continue;
    if (static_cast<size_t>(p.group) >= splits.size()) splits.resize(p.group + 1);
    splits[p.group].at.push_back(i);
    splits[p.group].ms += p.single_ms;
  }
  std::erase_if(splits, [](const Split& g) { return g.at.empty(); });
  std::stable_sort(splits.begin(), splits.end(),
                   [](const Split& a, const Split& b) { return a.ms < b.ms; });
  if (splits.size() > k) splits.resize(k);
  const int64_t largest =
      *std::max_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
  for (const Split& g : splits) {
    const Piece& block = pieces[g.at.front()];
    const Piece whole = search::make_piece(task, costs, block.table, block.cols);
    if (whole.mem_bytes <= largest) {
      BeamState next = child(task, s, g.at, std::span<const Piece>(&whole, 1));
      if (search::types_allowed(task, next.pieces)) out.push_back(std::move(next));
    }
    const int half = static_cast<int>(g.at.size()) / 2;
    if (half >= 2 && task.row_splittable(block.table, half)) {
      BeamState next = child(task, s, g.at, search::split_rows(task, costs, whole, half, pieces));
      if (search::types_allowed(task, next.pieces)) out.push_back(std::move(next));
    }
  }
  std::unordered_set<int> seen;
  std::vector<size_t> picked;
  top_k(replicas, k, [&](size_t i) { return pieces[i].single_ms; }, pieces, seen, picked);
  for (size_t i : picked) {
    const int t = pieces[i].table;
    const Piece whole[] = {search::make_piece(task, costs, t, task.tables[t].dim)};
    BeamState next = child(task, s, i, whole);
    if (search::types_allowed(task, next.pieces)) out.push_back(std::move(next));
  }
}

// The last beam's start: the cheaper on the model of two of TorchRec's
// proposals where they split rows or replicate (column halves alone are the
// halvings' space), each rated on the whole grid (infinite cost: it places
// nowhere): its greedy proposal (each table in its form of the lowest
// TorchRec perf; search::torchrec_greedy_proposal) and, `with_row_wise`,
// its row-wise one (every table split by rows over every device). A plan
// that splits the rows of many tables is many moves from the table-wise
// start, and one such move alone can cost more than it saves (a
// reduce-scatter before any balance), so the beams seldom get there step by
// step; where tables too big for any device fill the memory, the row-wise
// proposal can be the only cheap plan there is (docs/sharding_types.md).
// Elsewhere it seldom wins and costs the most to rate (a piece per table and
// device), so it is rated only there. Their pieces count as the beam's work; `which`
// names the one returned. (The replicas never won as starts.) An empty state
// where neither has a new type.
BeamState NeuroShardPlanner::torchrec_proposal(
    const PlanTask& task, ShardCosts& costs,
    std::vector<std::unique_ptr<search::GridGreedy>>& grids, Ratings& rated,
    std::unordered_set<uint64_t>& seen, bool with_row_wise, size_t& work,
    std::string& which) const {
  std::vector<std::pair<const char*, std::vector<Piece>>> starts;
  starts.emplace_back("greedy", search::torchrec_greedy_proposal(task, costs));
  if (with_row_wise)
    starts.emplace_back("row-wise", search::torchrec_row_wise_proposal(task, costs));
  std::vector<BeamState> proposals;
  std::vector<std::pair<uint64_t, const char*>> names;  // by signature
  for (const auto& [name, pieces] : starts) {
    const bool new_types =
        std::any_of(pieces.begin(), pieces.end(), [](const Piece& p) { return !p.full_rows(); });
    if (!new_types || !search::types_allowed(task, pieces)) continue;
    BeamState s;
    s.pieces = pieces;
    std::sort(s.pieces.begin(), s.pieces.end(), PieceOrder(task, false));
    s.signature = signature(s.pieces);
    if (!seen.insert(s.signature).second) continue;
    names.emplace_back(s.signature, name);
    work += s.pieces.size();
    proposals.push_back(std::move(s));
  }
  if (proposals.empty()) return {};
  // The cheaper exactly; the other may be cut off. Ties: the greedy one.
  rate_children(task, proposals, 1, grids, rated, options_, nullptr);
  by_cost(proposals);
  for (const auto& [signature, name] : names) {
    if (signature == proposals.front().signature) which = name;
  }
  return std::move(proposals.front());
}

int NeuroShardPlanner::run_beam(const PlanTask& task, ShardCosts& costs, int count, Phase phase,
                                SearchState& st, std::vector<BeamState> beam,
                                std::unordered_set<uint64_t>& seen, size_t& work,
                                double work_share, std::string& stop) const {
  const bool extended = phase != kHalvings;
  std::vector<BeamState> children, more;
  double phase_best = beam.front().cost_ms;
  int stale_steps = 0;  // steps in a row that found nothing cheaper than phase_best
  int steps = 0;
  for (; steps < options_.budget.max_steps; ++steps) {
    // (Where the halvings' beam had nothing to halve, as with column-wise
    // not allowed, the wider beams are bounded by the steps alone.)
    if (extended && st.halvings_work > 0 && work >= work_share * st.halvings_work) {
      stop = phase == kEveryMove      ? "half the halvings' work spent"
             : phase == kFromProposal ? fmt::format("{:.3g} x the halvings' work spent", work_share)
                                      : "the halvings' work spent";
      break;
    }
    children.clear();
    for (size_t b = 0; b < beam.size(); ++b) {
      const BeamState& s = beam[b];
      for (size_t i : phase != kNoHalvings ? candidates(task, s) : std::vector<size_t>{}) {
        BeamState child = split(task, costs, s, i);
        if (!search::types_allowed(task, child.pieces)) continue;
        child.parent = b;
        if (seen.insert(child.signature).second) children.push_back(std::move(child));
      }
      if (!extended) continue;
      more.clear();
      more_moves(task, costs, s, more);
      if (phase == kFromProposal) joins(task, costs, s, more);
      for (BeamState& child : more) {
        child.parent = b;
        if (seen.insert(child.signature).second) children.push_back(std::move(child));
      }
    }
    if (children.empty()) {
      stop = "no new candidates";
      break;
    }
    for (const BeamState& c : children) work += c.pieces.size();
    if (!extended) st.halvings_work = work;
    const size_t keep =
        static_cast<size_t>(options_.budget.screen_keep) * options_.budget.beam_width;
    if (keep > 0 && children.size() > keep) {
      // The screen: each child rated on its parent's best cap alone; the
      // keep best go on to the whole grid.
      rate_children(task, children, keep, st.grids, st.screened, options_, &beam);
      by_cost(children);
      children.resize(keep);
    }
    // The beam's children and the `count` cheapest rated exactly, so that
    // the candidates, like the beam, do not depend on the threads.
    rate_children(task, children, std::max<size_t>(options_.budget.beam_width, count), st.grids,
                  st.rated, options_, nullptr);
    by_cost(children);
    for (const BeamState& c : children) remember(st.best, c, count);
    if (children.size() > static_cast<size_t>(options_.budget.beam_width)) {
      children.resize(options_.budget.beam_width);
    }
    beam.swap(children);
    if (beam.front().cost_ms < phase_best) {
      phase_best = beam.front().cost_ms;
      stale_steps = 0;
    } else if (options_.budget.step_patience > 0 &&
               ++stale_steps >= options_.budget.step_patience) {
      ++steps;
      stop = fmt::format("the last {} without a cheaper plan", options_.budget.step_patience);
      break;
    }
  }
  return steps;
}

// Error for a search whose every greedy run ran out of memory somewhere:
// names the biggest piece of the start.
[[noreturn]] void throw_no_placement(const PlanTask& task, const std::vector<Piece>& pieces,
                                     const PlannerOptions& o) {
  const auto big = std::max_element(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.mem_bytes < b.mem_bytes;
  });
  int64_t total = 0, have = 0;
  for (const Piece& p : pieces) total += p.mem_bytes;
  for (int64_t c : task.device_mem_bytes) have += c;
  // Without beam steps or candidates the search splits nothing beyond its start.
  const std::string why = o.budget.max_steps == 0 ? "; max-steps 0 splits nothing beyond the start"
                          : o.budget.candidates == 0
                              ? "; candidates 0 splits nothing beyond the start"
                              : "";
  ES_THROW("neuroshard found no placement within the memory caps: the tables need {} bytes "
           "of {} bytes on {} devices; the biggest piece is table '{}' ({} bytes){}",
           total, have, task.num_devices(), task.tables[big->table].name, big->mem_bytes, why);
}

std::optional<BeamState> NeuroShardPlanner::proposal_start(const PlanTask& task, ShardCosts& costs,
                                                           int count, SearchState& st,
                                                           const BeamState& start,
                                                           std::unordered_set<uint64_t>& seen,
                                                           size_t& work, double& scale) {
  std::string which;
  // The row-wise proposal where a table fits no device whole.
  const int64_t room =
      *std::max_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
  bool huge = false;
  for (int t = 0; t < task.num_tables(); ++t) huge = huge || task.table_bytes(t) > room;
  BeamState p = torchrec_proposal(task, costs, st.grids, st.rated, seen, huge, work, which);
  const bool cheaper = !st.best.empty() ? p.cost_ms < st.best.front().cost_ms : std::isfinite(p.cost_ms);
  summary_ +=
      p.pieces.empty() ? "; TorchRec's proposals split no rows"
      : !std::isfinite(p.cost_ms)
          ? "; TorchRec's proposals: their pieces, placed by this search's grid, do not fit "
            "the devices' memory (the torchrec planner places them its own way)"
          : fmt::format("; TorchRec's {} proposal {:.3f} ms{}", which, p.cost_ms,
                        cheaper ? "" : " (not cheaper: no beam from it)");
  if (!cheaper) return std::nullopt;
  remember(st.best, p, count);
  scale = std::max(1.0, static_cast<double>(p.pieces.size()) / start.pieces.size());
  return p;
}

BeamState NeuroShardPlanner::place_start(const PlanTask& task, std::vector<Piece> pieces,
                                         SearchState& st, int count) {
  BeamState s;
  s.pieces = std::move(pieces);
  for (const bool big_first : {false, true}) {
    s.big_first = big_first;
    std::sort(s.pieces.begin(), s.pieces.end(), PieceOrder(task, big_first));
    s.cost_ms = st.grids[0]->run(s.pieces, s.device_of);
    s.cap = st.grids[0]->best_cap();
    if (std::isfinite(s.cost_ms)) break;
  }
  s.signature = signature(s.pieces);
  remember(st.best, s, count);
  return s;
}

std::vector<Plan> NeuroShardPlanner::plan_candidates(const PlanTask& task, ShardCosts& costs,
                                                     int count) {
  ES_CHECK(count >= 1, "neuroshard: asked for {} candidate plans, need at least 1", count);
  // One grid search (and cost cache) per thread; the model is only read.
  const unsigned threads =
      options_.threads > 0 ? options_.threads : std::max(1u, std::thread::hardware_concurrency());
  SearchState st;
  for (unsigned t = 0; t < threads; ++t) {
    st.grids.push_back(std::make_unique<search::GridGreedy>(task, costs.model(), options_));
  }
  BeamState start;
  summary_.clear();
  // Tables that fit no device come with their columns halved first
  // (NeuroShard's way); where no plan comes of that start (each half adds
  // optimizer state), the search runs again from their rows split first.
  for (const search::Fit fit : {search::Fit::kColumnsFirst, search::Fit::kRowsFirst}) {
    if (fit == search::Fit::kRowsFirst && !st.best.empty()) break;
    std::vector<Piece> pieces = search::initial_pieces(task, costs, fit);
    if (fit == search::Fit::kRowsFirst) {
      if (signature(pieces) == start.signature) break;
      summary_ += "; no plan from the start with columns halved first; from rows split first";
    }
    const auto placed = [&](std::vector<Piece> pieces) {
      return place_start(task, std::move(pieces), st, count);
    };
    start = placed(std::move(pieces));
    // Where the even share needs more halvings than the beam has steps (it
    // halves one piece a step), the beams start from them (split_to_share)
    // if that rates cheaper than the start with as many halvings as the beam
    // has steps, the costliest pieces first (what its steps can reach; where
    // they can reach as cheap a plan, the halvings crowd the start's own
    // lineage out of the beam, and it ends dearer).
    if (std::vector<Piece> split = search::split_to_share(task, costs, start.pieces);
        split.size() > start.pieces.size() + options_.budget.max_steps &&
        search::types_allowed(task, split)) {
      const size_t halvings = split.size() - start.pieces.size();
      const std::vector<Piece> reach =
          search::split_to_share(task, costs, start.pieces, options_.budget.max_steps);
      BeamState shared = placed(std::move(split));
      if (shared.cost_ms < std::min(start.cost_ms, placed(reach).cost_ms)) {
        start = std::move(shared);
        summary_ += fmt::format("{}from {} halvings of the pieces over the even share",
                                summary_.empty() ? "" : "; ", halvings);
      }
    }
    // The beams in order (Phase).
    const bool wider = task.types.any_row_split() || task.types.allows(ShardingType::kDataParallel);
    st.halvings_work = 0;
    double proposal_scale = 1;  // the last beam's work: the halvings' x this
    for (const Phase phase : {kHalvings, kEveryMove, kNoHalvings, kFromProposal}) {
      const bool extended = phase != kHalvings;
      if (extended && !wider) break;
      // Where nothing was halved, the every-move beam was this one already.
      if (phase == kNoHalvings && st.halvings_work == 0) continue;
      std::vector<BeamState> beam{start};
      std::unordered_set<uint64_t> seen{start.signature};
      size_t work = 0;
      if (phase == kFromProposal) {
        std::optional<BeamState> p =
            proposal_start(task, costs, count, st, start, seen, work, proposal_scale);
        if (!p) break;
        beam = {std::move(*p)};
      }
      if (phase == kNoHalvings && fit == search::Fit::kColumnsFirst && task.types.any_row_split()) {
        std::vector<Piece> rows = search::initial_pieces(task, costs, search::Fit::kRowsFirst);
        if (signature(rows) != start.signature) {
          beam = {placed(std::move(rows))};
          seen.insert(beam.front().signature);
        }
      }
      const double share = phase == kEveryMove      ? 0.5
                           : phase == kFromProposal ? proposal_scale
                                                    : 1.0;
      std::string stop;  // why the beam ended before max_steps
      const int steps = run_beam(task, costs, count, phase, st, std::move(beam), seen, work,
                                 share, stop);
      static const char* const kNames[] = {"halvings", "every move", "every move but halvings",
                                           "every move from it"};
      summary_ +=
          fmt::format("{}{}: {} of {} beam steps{}", summary_.empty() ? "" : "; ", kNames[phase],
                      steps, options_.budget.max_steps, stop.empty() ? "" : " (" + stop + ")");
    }
  }
  if (st.best.empty()) throw_no_placement(task, start.pieces, options_);
  std::vector<Plan> plans;
  for (const BeamState& s : st.best) plans.push_back(search::plan_from_pieces(task, s.pieces, s.device_of));
  return plans;
}

}  // namespace

std::unique_ptr<Planner> make_neuroshard_planner(const PlannerOptions& options) {
  return std::make_unique<NeuroShardPlanner>(options);
}

}  // namespace embshard
