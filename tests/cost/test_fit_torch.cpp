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

TEST(FitFineTune, FollowsAMachineThatRanksShardsDifferently) {
  testing::ScratchDir dir("fit_tune");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  const auto ms_of = [&](const std::vector<TableFeatures>& t, int64_t b) {
    return other_ranking_ms(shipped, t, b);
  };
  testing::write_machine_compute(dir.file("a.jsonl"), 2048, 60, 3, ms_of);
  testing::write_machine_compute(dir.file("b.jsonl"), 4096, 60, 4, ms_of);
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
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  const auto ms_of = [&](const std::vector<TableFeatures>& t, int64_t b) {
    return other_ranking_ms(shipped, t, b);
  };
  testing::write_machine_compute(dir.file("a.jsonl"), 2048, 60, 3, ms_of);
  testing::write_machine_compute(dir.file("whole.jsonl"), 2048, 30, 4, ms_of);
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
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  testing::write_machine_compute(dir.file("a.jsonl"), 2048, 30, 5,
                                 [&](const std::vector<TableFeatures>& t, int64_t b) {
                                   return other_ranking_ms(shipped, t, b);
                                 });
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
