// `bench kernel`: a peer's numerics against ours before it is timed. A peer
// that computed something else (other rows, another pooling, an update
// skipped or doubled) would make its timings meaningless.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "bench/kernel_bench_internal.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// Forward outputs are sums of up to a few hundred products; the order of
// summation differs between implementations, nothing else may.
constexpr double kForwardAbsTolerance = 1e-5;
constexpr double kForwardRelTolerance = 1e-5;
// A step's updates (after - before) are compared relative to the largest
// update of the sampled rows: a few float roundings of the weights are
// ~1e-4 of it; a wrong update is of the order of the update itself.
constexpr double kUpdateRelTolerance = 2e-3;
constexpr int kRowsPerTable = 8;

const char* op_label(KernelOp op) {
  switch (op) {
    case KernelOp::kForward: return "forward";
    case KernelOp::kTrainSgd: return "SGD step";
    case KernelOp::kTrainRowWiseAdagrad: return "row-wise Adagrad step";
  }
  return "?";
}

void check_forward(const std::string& case_name, const CaseData& c, OursKernel& ours,
                   KernelPeer& peer, ImplResult& result) {
  const std::vector<float> theirs = peer.forward_output();
  if (theirs.empty()) return;
  const int64_t cols = c.batch.total_dim();
  const size_t expected = static_cast<size_t>(c.batch.batch_size * cols);
  ES_CHECK(theirs.size() == expected,
           "bench kernel: {}'s forward output on case {} has {} values, expected {} ({} x {})",
           peer.name(), case_name, theirs.size(), expected, c.batch.batch_size, cols);
  ours.run(KernelOp::kForward);
  const float* mine = ours.output();
  double worst = 0.0;
  for (size_t i = 0; i < expected; ++i) {
    const double diff = std::fabs(static_cast<double>(theirs[i]) - mine[i]);
    worst = std::max(worst, diff);
    ES_CHECK(diff <= kForwardAbsTolerance + kForwardRelTolerance * std::fabs(mine[i]),
             "bench kernel: {} computes another forward than embshard on case {}: output[{}][{}] "
             "is {} there, {} here (the timings would compare different work)",
             peer.name(), case_name, i / cols, i % cols, theirs[i], mine[i]);
  }
  result.forward_max_abs_diff = worst;
}

// Up to kRowsPerTable distinct rows of each table, in the order its first
// lookups name them (hot rows of skewed tables among them).
std::vector<TableRow> sample_rows(const FusedBatch& batch) {
  std::vector<TableRow> rows;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const TableBatch& tb = batch.tables[t];
    std::unordered_set<int64_t> seen;
    const int64_t nnz = tb.offsets[batch.batch_size];
    for (int64_t i = 0; i < nnz && static_cast<int>(seen.size()) < kRowsPerTable; ++i) {
      if (seen.insert(tb.indices[i]).second) rows.emplace_back(static_cast<int>(t), tb.indices[i]);
    }
  }
  return rows;
}

std::vector<float> gather_rows(const FusedBatch& batch, const std::vector<TableRow>& rows) {
  std::vector<float> out;
  for (const auto& [t, r] : rows) {
    const TableBatch& tb = batch.tables[t];
    out.insert(out.end(), tb.weights + r * tb.dim, tb.weights + (r + 1) * tb.dim);
  }
  return out;
}

void check_step(const std::string& case_name, CaseData& c, OursKernel& ours, KernelPeer& peer,
                KernelOp op, ImplResult& result) {
  const std::vector<TableRow> rows = sample_rows(c.batch);
  // The peer's step first: ours steps only for a peer that offers the check.
  // A step's update depends on the gradient (weights play no part in it)
  // and the row-wise Adagrad state, zero on both sides for the check.
  const std::vector<float> theirs = peer.train_rows(op, rows);
  if (theirs.empty()) return;
  for (std::vector<float>& m : c.momentum) std::fill(m.begin(), m.end(), 0.0f);
  const std::vector<float> before = gather_rows(c.batch, rows);
  ours.run(op);
  const std::vector<float> after = gather_rows(c.batch, rows);
  const size_t n = before.size();
  ES_CHECK(theirs.size() == 2 * n,
           "bench kernel: {}'s rows around a {} on case {}: {} values, expected {}", peer.name(),
           op_label(op), case_name, theirs.size(), 2 * n);
  double scale = 0.0;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double{after[i]} - before[i]));
  ES_CHECK(scale > 0.0, "bench kernel: embshard's {} on case {} moved none of the sampled rows",
           op_label(op), case_name);
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < n; ++i) {
    const double mine = double{after[i]} - before[i];
    const double their = double{theirs[n + i]} - theirs[i];
    const double rel = std::fabs(mine - their) / scale;
    if (rel > worst) worst = rel, worst_at = i;
  }
  if (worst > kUpdateRelTolerance) {
    size_t at = worst_at;
    size_t k = 0;
    while (at >= static_cast<size_t>(c.batch.tables[rows[k].first].dim)) {
      at -= c.batch.tables[rows[k].first].dim;
      ++k;
    }
    ES_THROW("bench kernel: {}'s {} on case {} updates table {} row {} element {} by {}, "
             "embshard's by {} (largest update {}): the timings would compare different work",
             peer.name(), op_label(op), case_name, rows[k].first, rows[k].second, at,
             double{theirs[n + worst_at]} - theirs[worst_at],
             double{after[worst_at]} - before[worst_at], scale);
  }
  result.update_max_rel_diff[static_cast<int>(op)] = worst;
}

}  // namespace

void check_peer_numerics(const std::string& case_name, CaseData& data, OursKernel& ours,
                         KernelPeer& peer, ImplResult& result) {
  check_forward(case_name, data, ours, peer, result);
  for (KernelOp op : {KernelOp::kTrainSgd, KernelOp::kTrainRowWiseAdagrad}) {
    if (peer.has(op)) check_step(case_name, data, ours, peer, op, result);
  }
}

}  // namespace embshard
