// The neural model judged (validate) and opened by name (the registry):
// figures by sharding type, records of another ground truth, model sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cost_test_util.h"
#include "embshard/cost/accuracy_report.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/floor.h"
#include "embshard/cost/neural/model.h"
#include "embshard/cost/neural/train.h"
#include "embshard/cost/neural/validate.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

TEST(NeuralValidate, FiguresByShardingTypeAndModelSets) {
  ScratchDir dir("validate_pieces");
  // A model set (plan --model's kind) reads as the model in its neural/.
  save_neural_model(testing::random_neural_model(6), dir.file("set/neural"));
  const NeuralModel model = load_neural_model(dir.file("set"));
  const std::string plain = dir.file("plain.jsonl"), pieces = dir.file("pieces.jsonl");
  testing::write_synth_compute(plain, 30, 9);
  testing::write_synth_compute(pieces, 30, 9);
  // Records 0-4 hold a row block, 5-9 a replica slice, 10 both; the rest whole tables.
  testing::edit_records(pieces, [](int k, nlohmann::json& r) {
    if (k <= 4 || k == 10) r["tables"][0]["row_offset"] = 0;
    if ((k >= 5 && k <= 9) || k == 10) r["tables"].back()["batch_slice"] = {0, 2};
  });
  const FileValidation none = validate_on_file(model, "set", plain, silent_reporter());
  EXPECT_TRUE(none.breakdown.empty());
  EXPECT_FALSE(none.figures.contains("breakdown"));
  const FileValidation v = validate_on_file(model, "set", pieces, silent_reporter());
  ASSERT_EQ(v.breakdown.size(), 3u);
  std::vector<int> whole(19);
  std::iota(whole.begin(), whole.end(), 11);
  const std::vector<std::pair<std::string, std::vector<int>>> expected = {
      {"whole_tables", whole},
      {"row_blocks", {0, 1, 2, 3, 4, 10}},
      {"replica_slices", {5, 6, 7, 8, 9, 10}}};
  const Comparison& all = v.comparisons.front();
  for (size_t g = 0; g < expected.size(); ++g) {
    const auto& [name, records] = expected[g];
    const Comparison& c = v.breakdown[g];
    EXPECT_EQ(c.name, "compute_" + name);
    EXPECT_FALSE(c.plot);
    ASSERT_EQ(c.measured.size(), records.size()) << name;
    for (size_t k = 0; k < records.size(); ++k) {
      EXPECT_EQ(c.measured[k], all.measured[records[k]]) << name;
      EXPECT_EQ(c.predicted[k], all.predicted[records[k]]) << name;
    }
    EXPECT_EQ(v.figures["breakdown"][name]["count"], records.size());
    EXPECT_DOUBLE_EQ(v.figures["breakdown"][name]["mape_pct"].get<double>(),
                     accuracy(c.predicted, c.measured).mape_pct);
  }
  // The pieces' figures are a breakdown, not more records.
  EXPECT_EQ(v.figures["count"], 30);
}

// Records 0-2 hold an fp16 table, 3-4 a bf16 one, 5 both: the breakdown by
// data type, beside none by sharding type (whole tables only).
TEST(NeuralValidate, FiguresByDataType) {
  ScratchDir dir("validate_types");
  const NeuralModel model = testing::random_neural_model(6);
  const std::string path = dir.file("types.jsonl");
  testing::write_synth_compute(path, 30, 9);
  testing::edit_records(path, [](int k, nlohmann::json& r) {
    if (k <= 2 || k == 5) r["tables"][0]["data_type"] = "fp16";
    if (k == 3 || k == 4 || k == 5) r["tables"].back()["data_type"] = "bf16";
  });
  const FileValidation v = validate_on_file(model, "m", path, silent_reporter());
  std::vector<int> plain(24);
  std::iota(plain.begin(), plain.end(), 6);
  const std::vector<std::pair<std::string, std::vector<int>>> expected = {
      {"fp32_only", plain}, {"with_fp16", {0, 1, 2, 5}}, {"with_bf16", {3, 4, 5}}};
  ASSERT_EQ(v.breakdown.size(), expected.size());
  const Comparison& all = v.comparisons.front();
  for (size_t g = 0; g < expected.size(); ++g) {
    const auto& [name, records] = expected[g];
    const Comparison& c = v.breakdown[g];
    EXPECT_EQ(c.name, "compute_" + name);
    ASSERT_EQ(c.measured.size(), records.size()) << name;
    for (size_t k = 0; k < records.size(); ++k) {
      EXPECT_EQ(c.predicted[k], all.predicted[records[k]]) << name;
    }
    EXPECT_EQ(v.figures["breakdown"][name]["count"], records.size());
  }
}

TEST(NeuralValidate, EveryRecordAgainstItsFloorAtTheModelsBandwidth) {
  ScratchDir dir("validate_floors");
  NeuralModel m = testing::random_neural_model(6);
  save_neural_model(m, dir.file("bare"));
  set_memory_bandwidth(m, nlohmann::json::array({{{"copy_gbps", 10.0}}}));
  save_neural_model(m, dir.file("model"));
  const NeuralModel model = load_neural_model(dir.file("model"));
  EXPECT_EQ(model.copy_gbps, 10.0);
  const std::string path = dir.file("data.jsonl");
  testing::write_synth_compute(path, 30, 9);
  EXPECT_FALSE(
      validate_on_file(load_neural_model(dir.file("bare")), "bare", path, silent_reporter())
          .floors);
  const FileValidation v = validate_on_file(model, "model", path, silent_reporter());
  ASSERT_TRUE(v.floors);
  ASSERT_EQ(v.floors->measured_over.size(), 30u);
  // Record 0 by hand: its tables' bytes (row-wise Adagrad, fp32) at 10 GB/s.
  const ComputeData data = load_compute_data(path, {});
  double bytes = 0;
  for (const TableFeatures& t : data.records[0].tables) {
    bytes += fused_work_bytes(t, data.records[0].batch, DataType::kFp32, 4).total();
  }
  const Comparison& c = v.comparisons.front();
  EXPECT_NEAR(v.floors->measured_over[0], c.measured[0] / (bytes / 10e6), 1e-9);
  EXPECT_NEAR(v.floors->predicted_over[0], c.predicted[0] / (bytes / 10e6), 1e-9);
  EXPECT_EQ(v.floors->under_count + v.floors->far_over_count > 0,
            !v.floors->under.empty() || !v.floors->far_over.empty());
  EXPECT_EQ(v.figures["floors"]["memory_gbps"], 10.0);
  EXPECT_EQ(v.figures["floors"]["measured_over_floor"]["max"].get<double>(),
            *std::max_element(v.floors->measured_over.begin(), v.floors->measured_over.end()));
}

TEST(NeuralValidate, TheMemoryBandwidthIsTheDataFilesMedianAndABadOneIsNamed) {
  NeuralModel m = testing::random_neural_model(6);
  set_memory_bandwidth(m, nlohmann::json::array({{{"copy_gbps", 10.0}},
                                                 {{"copy_gbps", 30.0}},
                                                 {{"copy_gbps", 20.0}},
                                                 {{"copy_gbps", nullptr}}}));
  EXPECT_EQ(m.copy_gbps, 20.0);
  EXPECT_NE(m.copy_source.find("3 of its 4 data files"), std::string::npos) << m.copy_source;
  EXPECT_EQ(m.info["memory"]["copy_gbps"], 20.0);
  set_memory_bandwidth(m, nlohmann::json::array({nlohmann::json::object()}));  // none recorded
  EXPECT_EQ(m.copy_gbps, 0.0);
  EXPECT_FALSE(m.info.contains("memory"));

  ScratchDir dir("memory_field");
  set_memory_bandwidth(m, nlohmann::json::array({{{"copy_gbps", 10.0}}}));
  save_neural_model(m, dir.file("model"));
  const std::string manifest = dir.file("model/manifest.json");
  nlohmann::json j = nlohmann::json::parse(read_file(manifest));
  j["memory"]["copy_gbps"] = -1;
  write_file_atomic(manifest, j.dump(2));
  try {
    load_neural_model(dir.file("model"));
    ADD_FAILURE() << "a negative bandwidth was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory/copy_gbps is -1"), std::string::npos) << e.what();
  }
}

TEST(Registry, UnknownNameListsValidNames) {
  try {
    create_cost_model("bogus", {});
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& name : cost_model_names()) EXPECT_NE(what.find(name), std::string::npos);
  }
  CostModelOptions missing;
  missing.model_dir = "/nonexistent/model";
  EXPECT_THROW(create_cost_model("neural", missing), Error);
  // No directory given: the shipped models (models/neural), which load.
  EXPECT_EQ(create_cost_model("neural", {}).name.empty(), false);
}

// A model of normalized costs judged on version 1 records (raw medians) would
// compare two scales: refused by name, unless judged on raw medians.
TEST(NeuralValidate, RawRecordsAreRefusedForANormalizedModel) {
  ScratchDir dir("validate_v1");
  const NeuralModel m = testing::random_neural_model(8);
  const std::string data = dir.file("data.jsonl");
  testing::write_synth_compute(data, 20, 4);
  const std::string text = read_file(data);
  auto header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  header["version"] = 1;
  write_file_atomic(data, header.dump() + text.substr(text.find('\n')));
  EXPECT_EQ(testing::error_of([&] { validate_on_file(m, "model", data, silent_reporter(), false); })
                .rfind(data + ": version 1 records (raw medians", 0),
            0u);
  EXPECT_NO_THROW(validate_on_file(m, "model", data, silent_reporter(), true));
}

TEST(NeuralValidate, CliJudgesOnTheModelsGroundTruthAndNamesAnotherMachine) {
  ScratchDir dir("validate_raw");
  NeuralModel m = testing::random_neural_model(8);
  m.info["data"] = {{"ground_truth", ground_truth_label(false)},
                    {"compute", {{{"executor", "cuda (GPU X)"}, {"machine", {{"cpu", "host"}}}}}}};
  save_neural_model(m, dir.file("model"));
  const std::string data = dir.file("data.jsonl");
  testing::write_synth_compute(data, 20, 4);
  const std::string text = read_file(data);
  auto header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  header["executor"] = "cpu (1 thread)";
  write_file_atomic(data, header.dump() + text.substr(text.find('\n')));
  // Measured on another executor than the model's data: a note names both.
  CaptureReporter notes;
  validate_on_file(load_neural_model(dir.file("model")), "model", data, notes, true);
  ASSERT_EQ(notes.notes().size(), 1u);
  EXPECT_NE(notes.notes()[0].find("'cuda (GPU X) on host'"), std::string::npos)
      << notes.notes()[0];
  EXPECT_NE(notes.notes()[0].find("'cpu (1 thread) on synthetic': the figures compare two "
                                  "machines"),
            std::string::npos)
      << notes.notes()[0];
  // Fitted to that machine: the same machine, no note.
  NeuralModel fitted = load_neural_model(dir.file("model"));
  fitted.info["fitted"]["scale"]["compute"] = {
      {{"executor", "cpu (1 thread)"}, {"machine", {{"cpu", "synthetic"}}}}};
  CaptureReporter none;
  validate_on_file(fitted, "model", data, none, true);
  EXPECT_TRUE(none.notes().empty());
  // The command: a model of raw medians is judged on raw medians without --raw, and says so.
  if (!std::filesystem::exists(EMBSHARD_CLI_PATH)) GTEST_SKIP() << "no CLI in this build";
  const auto r = testing::run_cli("validate --model " + dir.file("model") + " --data " + data +
                                  " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--raw implied"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"ground_truth\": \"raw medians\""), std::string::npos) << r.output;
  // Without --model: the shipped models, on their own data.
  const auto shipped = testing::run_cli(std::string("validate --data ") + EMBSHARD_SOURCE_DIR +
                                        "/data/cpu/unseen_pieces_2021_b2048.jsonl.gz");
  ASSERT_EQ(shipped.exit_code, 0) << shipped.output;
  EXPECT_NE(shipped.output.find("models/neural on"), std::string::npos) << shipped.output;
}

TEST(Registry, AModelSetsCommConstantsComeWithItsNeuralDirectoryToo) {
  ScratchDir dir("registry_set");
  NeuralModel m = testing::random_neural_model(7);
  m.has_comm = false;  // one GPU: no all-to-all networks
  save_neural_model(m, dir.file("set/neural"));
  write_file_atomic(dir.file("set/comm.json"),
                    R"({"format": "embshard-comm-constants", "version": 1, "latency_us": 15,
                        "gbps": 350, "source": "test constants"})");
  for (const std::string& given : {dir.file("set"), dir.file("set/neural"),
                                   dir.file("set/neural/")}) {
    CostModelOptions o;
    o.model_dir = given;
    const CostModel model = create_cost_model("neural", o);
    EXPECT_NE(model.name.find("350 GB/s"), std::string::npos) << given << ": " << model.name;
  }
  CostModelOptions analytic;
  analytic.model_dir = dir.file("set");
  const std::string message = testing::error_of([&] { create_cost_model("analytic", analytic); });
  EXPECT_NE(message.find("not an analytic calibration"), std::string::npos) << message;

  // A set of another CPU machine: its own calibration (embshard calibrate),
  // named as the shipped models/analytic.json beside models/neural.
  Calibration c = load_calibration(shipped_models_dir() + "/analytic.json");
  c.comm_gbps = 321;
  save_neural_model(m, dir.file("cpu_set/neural"));
  save_calibration(c, dir.file("cpu_set/analytic.json"));
  CostModelOptions o;
  o.model_dir = dir.file("cpu_set");
  const CostModel model = create_cost_model("neural", o);
  EXPECT_NE(model.name.find("321 GB/s"), std::string::npos) << model.name;
  o.model_dir = dir.file("set/neural");  // comm.json first where a set has both
  save_calibration(c, dir.file("set/analytic.json"));
  EXPECT_NE(create_cost_model("neural", o).name.find("350 GB/s"), std::string::npos);
}

}  // namespace
}  // namespace embshard

namespace embshard {
namespace {

// The shipped models past the largest batch they were trained at: costs
// scale linearly with the batch, and the name says so; inside their range
// the batch is an input of the networks, not a scale factor.

}  // namespace
}  // namespace embshard
