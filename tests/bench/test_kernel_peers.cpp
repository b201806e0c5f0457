// `bench kernel`'s peers: the harness's numerics check and timing with
// stand-in peers (no Python), and FBGEMM's CPU kernels on a tiny case where
// a TorchRec Python is found (skipped, saying so, where not).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "embshard/bench/kernel_bench.h"
#include "embshard/util/error.h"
#include "embshard/util/python_peer.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

// Three small tables with duplicates, an empty bag and a one-row table.
std::vector<BenchTable> tiny_tables(int64_t batch_size, uint64_t seed) {
  const int64_t rows[] = {50, 1000, 1};
  const int dims[] = {8, 16, 64};
  std::mt19937_64 rng(seed);
  std::vector<BenchTable> tables(3);
  for (int t = 0; t < 3; ++t) {
    tables[t].rows = rows[t];
    tables[t].dim = dims[t];
    tables[t].trace.offsets.assign(1, 0);
    std::uniform_int_distribution<int64_t> row(0, rows[t] - 1), length(0, 6);
    for (int64_t b = 0; b < batch_size; ++b) {
      const int64_t len = b == 3 ? 0 : length(rng);
      for (int64_t k = 0; k < len; ++k) tables[t].trace.indices.push_back(row(rng));
      tables[t].trace.offsets.push_back(static_cast<int64_t>(tables[t].trace.indices.size()));
    }
  }
  return tables;
}

KernelBenchOptions tiny_options() {
  KernelBenchOptions o;
  o.warmup_runs = 1;
  o.timed_runs = 3;
  return o;
}

enum class Flaw { kNone, kForward, kSgdUpdate, kAdagradUpdate };

// Ours' reference kernels on a copy of the weights, optionally wrong in one
// place; reports a fixed time of its own for every call.
class StandInPeer : public KernelPeer {
 public:
  explicit StandInPeer(Flaw flaw) : flaw_(flaw) {}
  std::string name() const override { return "stand-in"; }
  bool has(KernelOp) const override { return true; }
  void prepare(const FusedBatch& batch, const float* grad_output,
               const KernelBenchOptimizers& optimizers) override {
    batch_ = batch;
    grad_ = grad_output;
    optimizers_ = optimizers;
    weights_.clear();
    momentum_.clear();
    for (TableBatch& t : batch_.tables) {
      weights_.emplace_back(t.weights, t.weights + t.rows * t.dim);
      momentum_.emplace_back(t.rows, 0.0f);
      t.weights = weights_.back().data();
      t.momentum = momentum_.back().data();
    }
  }
  double run(KernelOp) override { return 2.0; }
  std::vector<float> forward_output() override {
    std::vector<float> out(batch_.batch_size * batch_.total_dim());
    EXPECT_TRUE(tbe_forward_ref(batch_, out.data()).ok());
    if (flaw_ == Flaw::kForward) out[out.size() / 2] += 0.01f;
    return out;
  }
  std::vector<float> train_rows(KernelOp op, const std::vector<TableRow>& rows) override {
    std::vector<float> out = gather(rows);
    const bool sgd = op == KernelOp::kTrainSgd;
    OptimizerConfig optimizer = sgd ? optimizers_.sgd : optimizers_.rowwise_adagrad;
    const bool flawed = (sgd && flaw_ == Flaw::kSgdUpdate) ||
                        (!sgd && flaw_ == Flaw::kAdagradUpdate);
    if (flawed) optimizer.learning_rate *= 2;  // an update twice too large
    EXPECT_TRUE(tbe_backward_update_ref(batch_, grad_, optimizer).ok());
    const std::vector<float> after = gather(rows);
    out.insert(out.end(), after.begin(), after.end());
    return out;
  }

 private:
  std::vector<float> gather(const std::vector<TableRow>& rows) const {
    std::vector<float> out;
    for (const auto& [t, r] : rows) {
      const TableBatch& tb = batch_.tables[t];
      out.insert(out.end(), tb.weights + r * tb.dim, tb.weights + (r + 1) * tb.dim);
    }
    return out;
  }

  Flaw flaw_;
  FusedBatch batch_;
  const float* grad_ = nullptr;
  KernelBenchOptimizers optimizers_;
  std::vector<std::vector<float>> weights_, momentum_;
};

KernelCaseResult run_tiny(KernelPeer& peer) {
  const int64_t batch_size = 16;
  return run_kernel_case("tiny", "three small tables", tiny_tables(batch_size, 7), batch_size,
                         tiny_options(), {&peer}, silent_reporter());
}

TEST(KernelPeers, AgreeingPeerIsCheckedAndTimedBesideOurs) {
  StandInPeer peer(Flaw::kNone);
  const KernelCaseResult r = run_tiny(peer);
  ASSERT_EQ(r.peers.size(), 1u);
  const ImplResult& p = r.peers[0];
  EXPECT_GE(p.forward_max_abs_diff, 0.0);
  EXPECT_LE(p.forward_max_abs_diff, 1e-6);
  for (KernelOp op : kKernelOps) {
    EXPECT_GT(r.ours.ms_of(op), 0.0);
    EXPECT_DOUBLE_EQ(p.ms_of(op), 2.0);  // the peer's own timing is the figure
    EXPECT_GT(p.speedup_of(op), 0.0);
    if (op != KernelOp::kForward) {
      EXPECT_GE(p.update_max_rel_diff[static_cast<int>(op)], 0.0);
      EXPECT_LE(p.update_max_rel_diff[static_cast<int>(op)], 1e-3);
    }
  }
}

TEST(KernelPeers, PeerComputingAnotherForwardIsRefused) {
  StandInPeer peer(Flaw::kForward);
  const std::string error = testing::error_of([&] { run_tiny(peer); });
  EXPECT_NE(error.find("stand-in computes another forward than embshard on case tiny"),
            std::string::npos)
      << error;
}

TEST(KernelPeers, PeerUpdatingOtherwiseIsRefused) {
  for (Flaw flaw : {Flaw::kSgdUpdate, Flaw::kAdagradUpdate}) {
    StandInPeer peer(flaw);
    const std::string error = testing::error_of([&] { run_tiny(peer); });
    const std::string step = flaw == Flaw::kSgdUpdate ? "SGD step" : "row-wise Adagrad step";
    EXPECT_NE(error.find("stand-in's " + step + " on case tiny updates table"), std::string::npos)
        << error;
  }
}

TEST(KernelPeers, NoTorchrecPythonMeansNoFbgemmPeerAndAReason) {
  const char* old = std::getenv(kTorchrecPythonEnv);
  const std::string saved = old != nullptr ? old : "";
  setenv(kTorchrecPythonEnv, "/nonexistent/bin/python", 1);
  std::string why;
  const std::unique_ptr<KernelPeer> peer = make_fbgemm_kernel_peer({}, &why);
  if (old != nullptr) {
    setenv(kTorchrecPythonEnv, saved.c_str(), 1);
  } else {
    unsetenv(kTorchrecPythonEnv);
  }
  EXPECT_EQ(peer, nullptr);
  EXPECT_NE(why.find("/nonexistent/bin/python"), std::string::npos) << why;
}

TEST(KernelPeers, FbgemmAgreesWithOursAndIsTimed) {
  std::string why;
  std::unique_ptr<KernelPeer> peer = make_fbgemm_kernel_peer({}, &why);
  if (peer == nullptr) GTEST_SKIP() << "no TorchRec Python: " << why;
  const KernelCaseResult r = run_tiny(*peer);
  ASSERT_EQ(r.peers.size(), 1u);
  const ImplResult& p = r.peers[0];
  EXPECT_EQ(p.name, "FBGEMM");
  EXPECT_GE(p.forward_max_abs_diff, 0.0);
  EXPECT_LE(p.forward_max_abs_diff, 1e-5);
  for (KernelOp op : kKernelOps) {
    EXPECT_GT(p.ms_of(op), 0.0);
    EXPECT_GT(p.speedup_of(op), 0.0);
    if (op != KernelOp::kForward) {
      EXPECT_GE(p.update_max_rel_diff[static_cast<int>(op)], 0.0);
      EXPECT_LE(p.update_max_rel_diff[static_cast<int>(op)], 2e-3);
    }
  }
  EXPECT_NE(peer->about().find("fbgemm_gpu"), std::string::npos) << peer->about();
  // The same process serves a second case.
  const KernelCaseResult again = run_tiny(*peer);
  EXPECT_GT(again.peers[0].ms_of(KernelOp::kForward), 0.0);
}

}  // namespace
}  // namespace embshard
