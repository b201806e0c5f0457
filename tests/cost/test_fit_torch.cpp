// embshard fit --fine-tune: a machine that ranks shards differently from the
// training one, which the plane cannot follow, is followed after fine-tuning.
#include <gtest/gtest.h>

#include <cmath>

#include "cost/cost_test_util.h"
#include "embshard/cost/neural/fit.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

// "Another machine": each table costs what the shipped model says times
// (32 / dim)^0.8, so narrow tables are dearer and wide ones cheaper; a shard
// mixes dims, so no function of the shard's predicted total follows it.
double other_ranking_ms(const NeuralModel& m, const std::vector<TableFeatures>& tables,
                        int64_t batch) {
  double ms = 0;
  for (const TableFeatures& t : tables) {
    ms += predict_compute_ms(m, std::vector<TableFeatures>{t}, batch) * std::pow(32.0 / t.dim, 0.8);
  }
  return ms;
}

// A file of that machine's costs, and the options of a fit of the shipped model.
void write_other_ranking(const std::string& path, int64_t batch, int samples, uint64_t seed) {
  const NeuralModel shipped = load_neural_model(shipped_models_dir() + "/neural");
  testing::write_machine_compute(path, batch, samples, seed,
                                 [&](const std::vector<TableFeatures>& t, int64_t b) {
                                   return other_ranking_ms(shipped, t, b);
                                 });
}
FitOptions shipped_fit() {
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  return o;
}

TEST(FitFineTune, FollowsAMachineThatRanksShardsDifferently) {
  testing::ScratchDir dir("fit_tune");
  FitOptions o = shipped_fit();
  write_other_ranking(dir.file("a.jsonl"), 2048, 60, 3);
  write_other_ranking(dir.file("b.jsonl"), 4096, 60, 4);
  o.data_paths = {dir.file("a.jsonl"), dir.file("b.jsonl")};
  FitResult r = fit_neural_model(o, silent_reporter());
  const double plane = r.after.mape_pct;
  EXPECT_DOUBLE_EQ(r.plane.mape_pct, plane);
  EXPECT_GT(plane, 10);  // the plane alone cannot follow it
  fine_tune_fitted_model(r, FineTuneOptions{}, silent_reporter());
  EXPECT_DOUBLE_EQ(r.plane.mape_pct, plane);
  EXPECT_LT(r.after.mape_pct, 0.6 * plane);  // judged on the records it did not fit on
  EXPECT_GT(r.after.kendall_tau, r.plane.kendall_tau);
  // Saved and loaded, the fine-tuned networks are what predicts.
  save_neural_model(r.model, dir.file("fitted"));
  const NeuralModel back = load_neural_model(dir.file("fitted"));
  EXPECT_EQ(back.info["fitted"]["fine_tune"]["epochs"], FineTuneOptions{}.epochs);
  const ComputeRecord& rec = r.data.records[r.test_idx[0]];
  EXPECT_NEAR(predict_compute_ms(back, rec.tables, rec.batch),
              predict_compute_ms(r.model, rec.tables, rec.batch),
              1e-6 * predict_compute_ms(r.model, rec.tables, rec.batch));
  EXPECT_EQ(r.pieces_before.count, 0);  // whole tables only
}

// The judging records with pieces are judged again after the fine-tune.
TEST(FitFineTune, JudgesThePiecesAgain) {
  testing::ScratchDir dir("fit_tune_pieces");
  FitOptions o = shipped_fit();
  write_other_ranking(dir.file("a.jsonl"), 2048, 60, 3);
  write_other_ranking(dir.file("whole.jsonl"), 2048, 30, 4);
  testing::mark_pieces(dir.file("whole.jsonl"), dir.file("b.jsonl"));
  o.data_paths = {dir.file("a.jsonl")};
  o.test_paths = {dir.file("b.jsonl")};
  FitResult r = fit_neural_model(o, silent_reporter());
  const double plane = r.pieces_after.mape_pct;
  fine_tune_fitted_model(r, FineTuneOptions{}, silent_reporter());
  EXPECT_EQ(r.pieces_after.count, 20);
  EXPECT_NE(r.pieces_after.mape_pct, plane);
  EXPECT_DOUBLE_EQ(r.model.info["fitted"]["test_pieces"]["mape_after_pct"].get<double>(),
                   r.pieces_after.mape_pct);
}

TEST(FitFineTune, BadOptionsNameTheFlag) {
  testing::ScratchDir dir("fit_tune_bad");
  FitOptions o = shipped_fit();
  write_other_ranking(dir.file("a.jsonl"), 2048, 30, 5);
  o.data_paths = {dir.file("a.jsonl")};
  FitResult r = fit_neural_model(o, silent_reporter());
  const NeuralModel before = r.model;
  for (const FineTuneOptions& bad : {FineTuneOptions{0, 1e-2}, FineTuneOptions{300, -1.0},
                                     FineTuneOptions{300, NAN}}) {
    try {
      fine_tune_fitted_model(r, bad, silent_reporter());
      FAIL() << "epochs " << bad.epochs << ", anchor " << bad.anchor;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--fine-tune-"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(r.model.compute.head.layers[0].weight, before.compute.head.layers[0].weight);
}

}  // namespace
}  // namespace embshard
