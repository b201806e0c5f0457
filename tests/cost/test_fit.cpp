// embshard fit: a known distortion of the shipped model is recovered.
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

// "Another machine": 3x slower, 1.1 power of the shipped model's cost, and
// (batch / 1024)^0.2 slower again at bigger batches.
double other_machine_ms(const NeuralModel& m, const std::vector<TableFeatures>& t, int64_t batch) {
  return 3.0 * std::pow(predict_compute_ms(m, t, batch), 1.1) *
         std::pow(static_cast<double>(batch) / m.batch_size, 0.2);
}

void write_file(const std::string& path, const NeuralModel& m, int64_t batch, int samples,
                uint64_t seed) {
  testing::write_machine_compute(path, batch, samples, seed,
                                 [&](const std::vector<TableFeatures>& t, int64_t b) {
                                   return other_machine_ms(m, t, b);
                                 });
}

TEST(Fit, RecoversAKnownDistortionAndSavesIt) {
  testing::ScratchDir dir("fit");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  write_file(dir.file("a.jsonl"), shipped, shipped.batch_size * 2, 40, 3);
  write_file(dir.file("b.jsonl"), shipped, shipped.max_batch_size, 40, 4);
  o.data_paths = {dir.file("a.jsonl"), dir.file("b.jsonl")};
  const FitResult r = fit_neural_model(o, silent_reporter());
  EXPECT_NEAR(r.power, 1.1, 1e-3);
  EXPECT_NEAR(r.batch_power, 0.2, 1e-3);
  EXPECT_GT(r.before.mape_pct, 50);
  EXPECT_LT(r.after.mape_pct, 0.1);
  EXPECT_EQ(r.fit_records + r.test_records, 80);
  // The fitted model is an ordinary model directory that predicts the same.
  save_neural_model(r.model, dir.file("fitted"));
  const NeuralModel back = load_neural_model(dir.file("fitted"));
  EXPECT_DOUBLE_EQ(back.batch_correction, r.model.batch_correction);
  EXPECT_EQ(back.info["fitted"]["from"], o.model_dir);
  const auto pool = testing::synth_pool(3, 9);
  const std::vector<TableFeatures> t = {
      {pool[0].rows, 32, pool[0].pooling, pool[0].row_reuse, pool[0].lookup_reuse}};
  const int64_t batch = shipped.max_batch_size;
  EXPECT_NEAR(predict_compute_ms(back, t, batch), other_machine_ms(shipped, t, batch),
              1e-3 * other_machine_ms(shipped, t, batch));
  NeuralComputeModel fast(prepared_neural_model(back), batch);
  const int id = fast.add_table(t[0]);
  EXPECT_NEAR(fast.compute_ms(std::vector<int>{id}), predict_compute_ms(back, t, batch),
              1e-4 * predict_compute_ms(back, t, batch));
}

// With test files, every record of the data files is fitted on and the test
// files' records (pools of other tables) alone judge.
TEST(Fit, TestFilesOnlyJudge) {
  testing::ScratchDir dir("fit_test_files");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  write_file(dir.file("a.jsonl"), shipped, shipped.batch_size * 2, 30, 3);
  write_file(dir.file("b.jsonl"), shipped, shipped.max_batch_size, 30, 4);
  write_file(dir.file("c.jsonl"), shipped, shipped.max_batch_size, 20, 5);
  o.data_paths = {dir.file("a.jsonl"), dir.file("b.jsonl")};
  o.test_paths = {dir.file("c.jsonl")};
  const FitResult r = fit_neural_model(o, silent_reporter());
  EXPECT_EQ(r.fit_records, 60);
  EXPECT_EQ(r.test_records, 20);
  for (size_t i : r.fit_idx) EXPECT_LT(r.data.records[i].file, 2);
  for (size_t i : r.test_idx) EXPECT_EQ(r.data.records[i].file, 2);
  EXPECT_NEAR(r.power, 1.1, 1e-3);
  EXPECT_LT(r.after.mape_pct, 0.1);
  EXPECT_EQ(r.model.info["fitted"]["test_data"], "pools the fit never saw");
}

// What fit measures: per (profile, batch) a pool to fit on and another, of
// other tables, to judge, on one probe scale.
TEST(Fit, MeasuresAPoolToFitAndAnotherToJudge) {
  testing::ScratchDir dir("fit_measure");
  FitMeasureOptions m;
  m.dir = dir.path().string();
  m.profiles = {"2021"};
  m.batches = {256, 512};
  m.tables = 8;
  ComputeBenchOptions& b = m.bench;
  b.samples = 10;
  b.max_tables = 3;
  b.mem_cap_bytes = 1 << 20;
  b.warmup = 1;
  b.min_rounds = 2;
  b.max_rounds = 2;
  b.reference_window_s = 0.2;
  const FitFiles f = measure_fit_data(m, 0.6, silent_reporter());
  ASSERT_EQ(f.fit.size(), 2u);
  ASSERT_EQ(f.test.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const ComputeData fit = load_compute_data(f.fit[k]), test = load_compute_data(f.test[k]);
    EXPECT_EQ(fit.records.size(), 3u);
    EXPECT_EQ(test.records.size(), 2u);
    EXPECT_EQ(fit.batch_size, test.batch_size);
    EXPECT_NE(fit.header["workload"], test.header["workload"]);
    EXPECT_EQ(test.header["probe"]["reference"]["reference_ms"],
              load_compute_data(f.fit[0]).header["probe"]["reference"]["reference_ms"]);
  }
  try {
    b.samples = 2;  // one shard per (profile, batch): none left to judge
    measure_fit_data(m, 0.6, silent_reporter());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("to judge"), std::string::npos) << e.what();
  }
}

TEST(Fit, TooFewRecordsIsAnError) {
  testing::ScratchDir dir("fit_few");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  write_file(dir.file("a.jsonl"), load_neural_model(o.model_dir), 2048, 12, 5);
  o.data_paths = {dir.file("a.jsonl")};
  try {
    fit_neural_model(o, silent_reporter());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 10"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace embshard
