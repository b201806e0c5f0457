// embshard fit: a known distortion of the shipped model is recovered.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "cost/cost_test_util.h"
#include "embshard/bench/fit_data.h"
#include "embshard/cost/neural/fit.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/workload.h"
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
  // It describes the machine it was fitted to (the files' machine, not the
  // one fit ran on), not the pre-training's.
  EXPECT_EQ(back.info["fitted"]["machine"]["cpu"], "synthetic");
  const auto fitted_model = std::make_shared<const NeuralModel>(back);
  EXPECT_EQ(make_neural_cost_model(fitted_model, 2048, std::nullopt).source.hardware,
            "cpu on synthetic");
  EXPECT_NE(make_neural_cost_model(std::make_shared<const NeuralModel>(shipped), 2048,
                                   std::nullopt)
                .source.hardware,
            "cpu on synthetic");
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
  // The fitted model's scale is its files' (eval measures on it), in order.
  const nlohmann::json& scale = r.model.info["fitted"]["scale"]["compute"];
  ASSERT_EQ(scale.size(), 3u) << scale.dump();
  EXPECT_EQ(std::filesystem::path(scale[2]["path"].get<std::string>()).filename(), "c.jsonl");
  EXPECT_EQ(scale[2]["records"], 20);
  EXPECT_EQ(scale[2]["probe"],
            load_compute_data(dir.file("c.jsonl")).header.value("probe", nlohmann::json()));
  EXPECT_EQ(r.pieces_before.count, 0);  // whole tables only: nothing judged apart
  EXPECT_EQ(r.model.info["fitted"]["test_pieces"]["records"], 0);
}

// The judging records with a row block or a replica's batch slice are
// judged apart as well, and the fit corrects them too.
TEST(Fit, JudgesTheRecordsWithPiecesApart) {
  testing::ScratchDir dir("fit_pieces");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(o.model_dir);
  write_file(dir.file("a.jsonl"), shipped, shipped.max_batch_size, 40, 3);
  write_file(dir.file("whole.jsonl"), shipped, shipped.max_batch_size, 30, 5);
  testing::mark_pieces(dir.file("whole.jsonl"), dir.file("c.jsonl"));
  o.data_paths = {dir.file("a.jsonl")};
  o.test_paths = {dir.file("c.jsonl")};
  const FitResult r = fit_neural_model(o, silent_reporter());
  EXPECT_EQ(r.test_records, 30);
  ASSERT_EQ(r.piece_test_idx.size(), 20u);
  for (size_t i : r.piece_test_idx) {
    const ComputeRecord& rec = r.data.records[i];
    EXPECT_TRUE(has_row_blocks(rec) != has_replica_slices(rec)) << rec.line;
  }
  EXPECT_EQ(r.pieces_before.count, 20);
  EXPECT_GT(r.pieces_before.mape_pct, 50);  // the other machine is 3x slower
  EXPECT_LT(r.pieces_after.mape_pct, r.pieces_before.mape_pct / 2);
  EXPECT_EQ(r.model.info["fitted"]["test_pieces"]["records"], 20);
  EXPECT_DOUBLE_EQ(r.model.info["fitted"]["test_pieces"]["mape_after_pct"].get<double>(),
                   r.pieces_after.mape_pct);
}

// Two tiny pools of one profile, measured in about a second.
FitMeasureOptions tiny_measure_options(const std::string& dir, int64_t samples) {
  FitMeasureOptions m;
  m.dir = dir;
  m.profiles = {"2021"};
  m.batches = {256, 512};
  m.tables = 8;
  ComputeBenchOptions& b = m.bench;
  b.samples = samples;
  b.max_tables = 3;
  b.mem_cap_bytes = 1 << 20;
  b.warmup = 1;
  b.min_rounds = 2;
  b.max_rounds = 2;
  b.scale = ComputeBenchOptions::Scale::kWindow;
  b.reference_window_s = 0.2;
  return m;
}

// What fit measures: per (profile, batch) a pool to fit on and another, of
// other tables, to judge, on one probe scale.
TEST(Fit, MeasuresAPoolToFitAndAnotherToJudge) {
  testing::ScratchDir dir("fit_measure");
  FitMeasureOptions m = tiny_measure_options(dir.path().string(), 10);
  ComputeBenchOptions& b = m.bench;
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

// With hot samples, a second pair of pools per (profile, batch): a quarter
// of the tables hot, some drawn as pieces, on the plain pools' scale.
TEST(Fit, MeasuresHotPoolsBesides) {
  testing::ScratchDir dir("fit_measure_hot");
  FitMeasureOptions m = tiny_measure_options(dir.path().string(), 4);
  m.hot_samples = 4;
  const FitFiles f = measure_fit_data(m, 0.6, silent_reporter());
  ASSERT_EQ(f.fit.size(), 4u);  // per batch: plain, then hot
  ASSERT_EQ(f.test.size(), 4u);
  const double plain_ref =
      load_compute_data(f.fit[0]).header["probe"]["reference"]["reference_ms"].get<double>();
  for (size_t k = 0; k < 4; ++k) {
    const bool hot = k % 2 == 1;
    for (const std::string& path : {f.fit[k], f.test[k]}) {
      const ComputeData d = load_compute_data(path);
      EXPECT_EQ(d.records.size(), 1u) << path;
      EXPECT_EQ(d.header.contains("piece_share"), hot) << path;
      EXPECT_DOUBLE_EQ(d.header["probe"]["reference"]["reference_ms"].get<double>(), plain_ref);
      if (!hot) continue;
      // 8 tables / 4 hot, at a pooling factor of about 500 (batches 256, 512).
      const Workload w = load_workload(d.header["workload"].get<std::string>());
      for (int t = 0; t < 2; ++t) {
        EXPECT_GT(w.tables[t].pooling_factor, 400) << path << " table " << t;
      }
    }
  }
  try {
    m.hot_samples = 2;  // one hot shard per (profile, batch): none left to judge
    measure_fit_data(m, 0.6, silent_reporter());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--hot-samples"), std::string::npos) << e.what();
  }
}

// "Another machine's" exchanges: the network's part of the backward 2x the
// shipped model's to the power 1.1, of the forward 0.5x to the power 0.9,
// past the same wait.
void write_machine_comm(const std::string& path, const NeuralModel& m, int devices, int samples,
                        uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  RecordFile out(path,
                 {{"format", "embshard-comm-costs"},
                  {"version", kCostDataVersion},
                  {"num_devices", devices},
                  {"batch_size", m.comm_batch_size},
                  {"machine", {{"cpu", "synthetic"}}}},
                 {});
  for (int s = 0; s < samples; ++s) {
    std::vector<double> dims(devices), delays(devices), pf(devices), pb(devices);
    for (int d = 0; d < devices; ++d) {
      dims[d] = std::floor(16 + 600 * u(rng));
      delays[d] = s % 2 ? 2 * u(rng) : 0;
    }
    predict_comm_ms(m, dims, delays, pf, pb, m.comm_batch_size);
    std::vector<double> fwd(devices), bwd(devices);
    for (int d = 0; d < devices; ++d) {
      const double wait = comm_wait_ms(delays, d);
      fwd[d] = wait + 0.5 * std::pow(pf[d] - wait, 0.9);
      bwd[d] = 2 * std::pow(pb[d], 1.1);
    }
    testing::append_comm_record(out, s, dims, delays, fwd, bwd);
  }
}

TEST(Fit, CommRecoversAKnownDistortion) {
  testing::ScratchDir dir("fit_comm");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  NeuralModel m = load_neural_model(o.model_dir);
  const NeuralModel shipped = m;
  write_machine_comm(dir.file("c4.jsonl"), shipped, 4, 30, 7);
  write_machine_comm(dir.file("c2.jsonl"), shipped, 2, 30, 8);
  const CommFitResult r = fit_comm_model(
      m, {load_comm_data(dir.file("c4.jsonl")), load_comm_data(dir.file("c2.jsonl"))}, o,
      silent_reporter());
  EXPECT_EQ(r.fit_records + r.test_records, 60);
  EXPECT_NEAR(r.bwd_power, 1.1, 1e-3);
  EXPECT_NEAR(r.bwd_log_scale, std::log(2.0), 1e-3);
  EXPECT_NEAR(r.fwd_power, 0.9, 1e-3);
  EXPECT_NEAR(r.fwd_log_scale, std::log(0.5), 1e-3);
  EXPECT_GT(r.before.mape_pct, 20);
  EXPECT_LT(r.after.mape_pct, 0.1);
  EXPECT_EQ(m.info["fitted"]["comm"]["fit_placements"], r.fit_records);
  const nlohmann::json& scale = m.info["fitted"]["scale"]["comm"];
  ASSERT_EQ(scale.size(), 2u) << scale.dump();
  EXPECT_EQ(scale[0]["num_devices"], 4);
  EXPECT_EQ(scale[1]["num_devices"], 2);
  // The source names the pre-training's exchanges and those it was fitted on.
  const std::string comm =
      make_neural_cost_model(std::make_shared<const NeuralModel>(m), 2048, std::nullopt).source.comm;
  EXPECT_NE(comm.find("all-to-alls measured on 2-8 ranks"), std::string::npos) << comm;
  EXPECT_NE(comm.find(", fitted to " + scale[0]["machine"]["cpu"].get<std::string>() +
                      " on 2-4 ranks"),
            std::string::npos)
      << comm;
  // Compute untouched; saved and loaded, the fitted comm networks predict.
  EXPECT_EQ(m.compute.target_mean, shipped.compute.target_mean);
  save_neural_model(m, dir.file("fitted"));
  const NeuralModel back = load_neural_model(dir.file("fitted"));
  const std::vector<double> dims = {100, 300, 50, 500}, delays = {0, 0, 0, 0};
  std::vector<double> f(4), b(4), sf(4), sb(4);
  predict_comm_ms(back, dims, delays, f, b, shipped.comm_batch_size);
  predict_comm_ms(shipped, dims, delays, sf, sb, shipped.comm_batch_size);
  for (int d = 0; d < 4; ++d) {
    EXPECT_NEAR(b[d], 2 * std::pow(sb[d], 1.1), 1e-4 * b[d]);
    EXPECT_NEAR(f[d], 0.5 * std::pow(sf[d], 0.9), 1e-4 * f[d]);
  }
  // A model without comm networks, and too few placements: errors.
  NeuralModel no_comm = shipped;
  no_comm.has_comm = false;
  EXPECT_THROW(fit_comm_model(no_comm, {load_comm_data(dir.file("c4.jsonl"))}, o,
                              silent_reporter()),
               Error);
  write_machine_comm(dir.file("few.jsonl"), shipped, 4, 8, 9);
  try {
    fit_comm_model(m, {load_comm_data(dir.file("few.jsonl"))}, o, silent_reporter());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 10"), std::string::npos) << e.what();
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

// Version 1 records hold raw medians: fitting a normalized model to them is
// refused by name, unless the fit is of raw medians (--raw).
TEST(Fit, RawRecordsNeedRaw) {
  testing::ScratchDir dir("fit_v1");
  FitOptions o;
  o.model_dir = shipped_models_dir() + "/neural";
  write_file(dir.file("a.jsonl"), load_neural_model(o.model_dir), 2048, 40, 5);
  const std::string text = read_file(dir.file("a.jsonl"));
  auto header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  header["version"] = 1;
  write_file_atomic(dir.file("a.jsonl"), header.dump() + text.substr(text.find('\n')));
  o.data_paths = {dir.file("a.jsonl")};
  EXPECT_EQ(testing::error_of([&] { fit_neural_model(o, silent_reporter()); })
                .rfind("fit: " + dir.file("a.jsonl") + ": version 1 records (raw medians", 0),
            0u);
  o.raw = true;
  EXPECT_GT(fit_neural_model(o, silent_reporter()).fit_records, 0);
}

// Options refused before anything is measured leave no output directory.
TEST(Fit, CliRefusedOptionsLeaveNoDirectory) {
  testing::ScratchDir dir("fit_refused");
  const auto r = testing::run_cli("fit --model " + shipped_models_dir() +
                                  "/neural --samples 3 --fine-tune off -o " + dir.file("out"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot cover"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
  // Measuring options too, though the pools are made before any shard runs.
  for (const char* bad : {"--mem-cap 0", "--dims 0", "--dims 4096"}) {
    const auto b = testing::run_cli("fit --model " + shipped_models_dir() +
                                    "/neural --fine-tune off " + bad + " -o " + dir.file("out"));
    EXPECT_NE(b.exit_code, 0) << bad;
    EXPECT_NE(b.output.find("bench compute: --"), std::string::npos) << b.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out"))) << bad;
  }
  // A pool batch is the command's own option, named as such.
  const auto b = testing::run_cli("fit --model " + shipped_models_dir() +
                                  "/neural --fine-tune off --batches 2048,0 -o " + dir.file("out"));
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.output.find("--batches"), std::string::npos) << b.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
}

// -o naming the model fitted from (however spelled) is refused, and the
// model is left as it was; so is an executor this build does not have.
TEST(Fit, CliRefusesToOverwriteItsOwnModel) {
  testing::ScratchDir dir("fit_onto_itself");
  const std::string model = dir.file("model");
  std::filesystem::copy(shipped_models_dir() + "/neural", model);
  const std::string manifest = testing::slurp(model + "/manifest.json");
  for (const std::string& out : {model, model + "/", dir.file("x/../model")}) {
    const auto r = testing::run_cli("fit --model " + model + " --fine-tune off -o " + out);
    EXPECT_EQ(r.exit_code, 1) << out << ": " << r.output;
    EXPECT_NE(r.output.find("would overwrite the model it starts from"), std::string::npos)
        << r.output;
  }
  EXPECT_EQ(testing::slurp(model + "/manifest.json"), manifest);
  EXPECT_FALSE(std::filesystem::exists(model + "/fit_data"));
  const auto r = testing::run_cli("fit --model " + model + " --executor gpu -o " + dir.file("o"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--executor: gpu not in"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o")));
}

// The command says so when the fitted model judges worse than the one given:
// here the judging pool runs at the shipped model's own costs.
TEST(Fit, CliSaysWhenTheFitReadsWorse) {
  testing::ScratchDir dir("fit_worse");
  const std::string model = shipped_models_dir() + "/neural";
  const NeuralModel shipped = load_neural_model(model);
  write_file(dir.file("a.jsonl"), shipped, shipped.batch_size * 2, 30, 3);
  write_file(dir.file("b.jsonl"), shipped, shipped.max_batch_size, 30, 4);
  testing::write_machine_compute(dir.file("same.jsonl"), shipped.max_batch_size, 20, 5,
                                 [&](const std::vector<TableFeatures>& t, int64_t b) {
                                   return predict_compute_ms(shipped, t, b);
                                 });
  write_file(dir.file("other.jsonl"), shipped, shipped.max_batch_size, 20, 5);
  const std::string fit = "fit --model " + model + " --fine-tune off --data " +
                          dir.file("a.jsonl") + " " + dir.file("b.jsonl") + " --test-data ";
  const auto worse = testing::run_cli(fit + dir.file("same.jsonl") + " -o " + dir.file("w"));
  ASSERT_EQ(worse.exit_code, 0) << worse.output;
  EXPECT_NE(worse.output.find("reads worse than the model as given"), std::string::npos)
      << worse.output;
  const auto better = testing::run_cli(fit + dir.file("other.jsonl") + " -o " + dir.file("b"));
  ASSERT_EQ(better.exit_code, 0) << better.output;
  EXPECT_EQ(better.output.find("reads worse"), std::string::npos) << better.output;
}

}  // namespace
}  // namespace embshard
