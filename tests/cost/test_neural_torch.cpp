// Training the neural cost models on synthetic data with a known cost
// function: accuracy, determinism, the fast path against libtorch's forward,
// and the train / validate commands end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "cost_test_util.h"
#include "embshard/cost/neural/model.h"
#include "embshard/cost/neural/reference.h"
#include "embshard/cost/neural/train.h"
#include "embshard/cost/neural/validate.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

class NeuralTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("neural_train");
    testing::write_synth_compute(dir_->file("compute.jsonl"), 500, 1);
    testing::write_synth_compute(dir_->file("unseen.jsonl"), 60, 2, 20, 8, 0.01, /*pool_seed=*/99);
    testing::write_synth_comm(dir_->file("comm2.jsonl"), 2, 150, 3);
    testing::write_synth_comm(dir_->file("comm4.jsonl"), 4, 150, 4);
    result_ = new TrainResult(train_neural_model(options()));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static TrainOptions options() {
    TrainOptions o;
    o.compute_paths = {dir_->file("compute.jsonl")};
    o.comm_paths = {dir_->file("comm2.jsonl"), dir_->file("comm4.jsonl")};
    o.seed = 5;
    o.max_epochs = 300;
    o.patience = 30;
    o.hidden = 32;
    o.embed = 16;
    return o;
  }
  static const AccuracyFigures figures(const std::string& name) {
    for (const Comparison& c : result_->comparisons) {
      if (c.name == name) return accuracy(c.predicted, c.measured);
    }
    ADD_FAILURE() << "no comparison " << name;
    return {};
  }
  static ScratchDir* dir_;
  static TrainResult* result_;
};
ScratchDir* NeuralTrain::dir_ = nullptr;
TrainResult* NeuralTrain::result_ = nullptr;

TEST_F(NeuralTrain, LearnsTheKnownCostFunction) {
  std::string notes;
  for (const auto& n : result_->notes) notes += n + "\n";
  SCOPED_TRACE(notes);
  const AccuracyFigures test = figures("compute_test");
  EXPECT_GT(test.count, 40);
  EXPECT_LT(test.mape_pct, 5.0);
  EXPECT_GT(test.kendall_tau, 0.85);
  const AccuracyFigures fwd = figures("comm_fwd_test"), bwd = figures("comm_bwd_test");
  std::printf("synthetic data: compute test MAPE %.2f%% (tau %.3f), comm fwd %.2f%%, bwd %.2f%%\n",
              test.mape_pct, test.kendall_tau, fwd.mape_pct, bwd.mape_pct);
  EXPECT_LT(fwd.mape_pct, 10.0);
  EXPECT_LT(bwd.mape_pct, 10.0);
  EXPECT_GT(figures("comm_fwd_test_n2_b1024").count, 0);
  EXPECT_GT(figures("comm_bwd_test_n4_b1024").count, 0);
  // Held-out tables: few records are made only of them, but the split exists.
  EXPECT_FALSE(result_->model.info["holdout_pool_tables"].empty());
}

TEST_F(NeuralTrain, FastPathEqualsLibtorchForward) {
  const CostModel fast_pair = make_neural_cost_model(prepared_neural_model(result_->model), 0);
  ComputeModel& fast = *fast_pair.compute;
  TorchComputeReference torch_model(result_->model);
  const auto pool = testing::synth_pool(30, 9);
  std::mt19937_64 rng(1);
  for (const auto& t : pool) {
    TableFeatures f;
    f.rows = t.rows;
    f.dim = 4 << (rng() % 5);
    f.pooling_factor = t.pooling;
    f.row_reuse = t.row_reuse;
    f.lookup_reuse = t.lookup_reuse;
    if (rng() % 2) {  // a few very hot rows: past the model's reuse tail bin
      f.lookup_reuse[kReuseBins - 2] += 0.1;
      f.row_reuse[kReuseBins - 2] += 1e-3;
    }
    EXPECT_EQ(fast.add_table(f), torch_model.add_table(f));
  }
  for (int s = 0; s < 200; ++s) {
    std::vector<int> ids;
    for (int i = 0; i < 1 + s % 15; ++i) ids.push_back(static_cast<int>(rng() % pool.size()));
    const double a = fast.compute_ms(ids), b = torch_model.compute_ms(ids);
    ASSERT_NEAR(a, b, 1e-5 * std::abs(b)) << "shard " << s;
  }
  const std::vector<double> dims = {100, 900, 30, 250}, delays = {0, 2, 0.5, 1};
  std::vector<double> f1(4), b1(4), f2(4), b2(4);
  fast_pair.comm->comm_ms(dims, delays, f1, b1);
  torch_comm_ms(result_->model, dims, delays, f2, b2);
  for (int d = 0; d < 4; ++d) {
    EXPECT_NEAR(f1[d], f2[d], 1e-5 * f2[d]);
    EXPECT_NEAR(b1[d], b2[d], 1e-5 * b2[d]);
  }
}

TEST_F(NeuralTrain, SavedModelPredictsTheSame) {
  ScratchDir out("neural_train_save");
  save_neural_model(result_->model, out.path().string());
  CostModelOptions options;
  options.model_dir = out.path().string();
  const CostModel loaded = create_cost_model("neural", options);
  ComputeModel* model = loaded.compute.get();
  NeuralComputeModel direct(prepared_neural_model(result_->model));
  const auto pool = testing::synth_pool(5, 11);
  for (const auto& t : pool) {
    TableFeatures f{t.rows, 32, t.pooling, t.row_reuse, t.lookup_reuse};
    model->add_table(f);
    direct.add_table(f);
  }
  const std::vector<int> ids = {0, 1, 2, 3, 4, 2};
  EXPECT_EQ(model->compute_ms(ids), direct.compute_ms(ids));
  EXPECT_EQ(model->batch_size(), 512);
  options.batch_size = 64;  // the model was trained at 512: costs scale with the batch
  const CostModel scaled_pair = create_cost_model("neural", options);
  ComputeModel* scaled = scaled_pair.compute.get();
  EXPECT_EQ(scaled->batch_size(), 64);
  EXPECT_NE(scaled_pair.name.find("scaled"), std::string::npos) << scaled_pair.name;
  for (const auto& t : pool) scaled->add_table({t.rows, 32, t.pooling, t.row_reuse, t.lookup_reuse});
  EXPECT_NEAR(scaled->compute_ms(ids), direct.compute_ms(ids) / 8, 1e-9 * direct.compute_ms(ids));
  options.model_dir = "/nonexistent";
  EXPECT_THROW(create_cost_model("neural", options), Error);
}

// Settings libtorch would reject with a stack trace, or never finish on (a
// batch of 0), are errors naming the option before any training.
TEST_F(NeuralTrain, NonsenseSettingsAreErrors) {
  const struct {
    std::function<void(TrainOptions&)> edit;
    const char* option;
  } cases[] = {
      {[](TrainOptions& o) { o.batch = 0; }, "--batch 0"},
      {[](TrainOptions& o) { o.max_epochs = 0; }, "--epochs 0"},
      {[](TrainOptions& o) { o.patience = -1; }, "--patience -1"},
      {[](TrainOptions& o) { o.lr = -1; }, "--lr -1"},
      {[](TrainOptions& o) { o.lr = 0; }, "--lr 0"},
      {[](TrainOptions& o) { o.weight_average = 1; }, "--weight-average 1"},
      {[](TrainOptions& o) { o.weight_decay = -1; }, "the weight decay -1"},
      {[](TrainOptions& o) { o.hidden = 0; }, "--hidden 0"},
      {[](TrainOptions& o) { o.embed = -1; }, "--embed -1"},
      {[](TrainOptions& o) { o.threads = 0; }, "--threads 0"},
      {[](TrainOptions& o) { o.reuse_tail_bin = -1; }, "--reuse-tail-bin -1"},
      {[](TrainOptions& o) { o.reuse_tail_bin = kReuseBins; }, "--reuse-tail-bin 17"},
  };
  for (const auto& c : cases) {
    TrainOptions o = options();
    c.edit(o);
    const std::string message = testing::error_of([&] { train_neural_model(o); });
    EXPECT_NE(message.find(c.option), std::string::npos) << c.option << ": " << message;
    // No option the command does not have (train has no --weight-decay).
    EXPECT_EQ(message.find("--weight-decay"), std::string::npos) << message;
  }
}

TEST_F(NeuralTrain, SameSeedSameWeights) {
  TrainOptions o = options();
  o.max_epochs = 15;
  const TrainResult a = train_neural_model(o), b = train_neural_model(o);
  const auto same = [](const Mlp& x, const Mlp& y, const char* what) {
    ASSERT_EQ(x.layers.size(), y.layers.size()) << what;
    for (size_t l = 0; l < x.layers.size(); ++l) {
      EXPECT_EQ(x.layers[l].weight, y.layers[l].weight) << what << " layer " << l;
      EXPECT_EQ(x.layers[l].bias, y.layers[l].bias) << what << " layer " << l;
    }
  };
  same(a.model.compute.table, b.model.compute.table, "compute table network");
  same(a.model.compute.head, b.model.compute.head, "compute head");
  ASSERT_TRUE(a.model.has_comm && b.model.has_comm);
  same(a.model.comm_fwd.mlp, b.model.comm_fwd.mlp, "forward comm network");
  same(a.model.comm_bwd.mlp, b.model.comm_bwd.mlp, "backward comm network");
  o.seed += 1;
  const TrainResult c = train_neural_model(o);
  EXPECT_NE(a.model.compute.head.layers[0].weight, c.model.compute.head.layers[0].weight);
  EXPECT_NE(a.model.comm_fwd.mlp.layers[0].weight, c.model.comm_fwd.mlp.layers[0].weight);
}

TEST_F(NeuralTrain, WeightAverageLearnsIsDeterministicAndIsRecorded) {
  TrainOptions o = options();
  o.comm_paths.clear();
  o.max_epochs = 60;
  o.weight_average = 0.99;
  const TrainResult a = train_neural_model(o), b = train_neural_model(o);
  EXPECT_EQ(a.model.compute.head.layers[0].weight, b.model.compute.head.layers[0].weight);
  // The average is what is kept: not the last step's weights of the same run.
  o.weight_average = 0;
  const TrainResult last = train_neural_model(o);
  EXPECT_NE(a.model.compute.head.layers[0].weight, last.model.compute.head.layers[0].weight);
  double mape = -1;
  for (const Comparison& c : a.comparisons) {
    if (c.name == "compute_test") mape = accuracy(c.predicted, c.measured).mape_pct;
  }
  EXPECT_GE(mape, 0);
  EXPECT_LT(mape, 5.0);
  EXPECT_EQ(a.model.info["training"]["weight_average"], 0.99);
  EXPECT_EQ(a.model.info["training"]["reuse_tail_bin"], kDefaultReuseTailBin);
  EXPECT_EQ(a.model.compute.reuse_tail_bin, kDefaultReuseTailBin);
}

// By default the histograms' tail is merged on a CPU's data and kept whole on
// a GPU's (its backward sums a row's lookups in one warp: the hottest rows
// set the time); an explicit bin wins.
TEST_F(NeuralTrain, TheReuseTailFollowsTheDatasExecutor) {
  ScratchDir dir("neural_tail");
  const std::string gpu = dir.file("gpu.jsonl");
  std::string text = read_file(dir_->file("compute.jsonl"));
  nlohmann::json header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  header["executor"] = "cuda (a test GPU)";
  write_file_atomic(gpu, header.dump() + text.substr(text.find('\n')));
  TrainOptions o = options();
  o.comm_paths.clear();
  o.max_epochs = 2;
  EXPECT_EQ(train_neural_model(o).model.compute.reuse_tail_bin, kDefaultReuseTailBin);
  o.compute_paths = {gpu};
  const TrainResult on_gpu = train_neural_model(o);
  EXPECT_EQ(on_gpu.model.compute.reuse_tail_bin, kNoReuseTail);
  EXPECT_EQ(on_gpu.model.info["training"]["reuse_tail_bin"], kNoReuseTail);
  o.reuse_tail_bin = 5;
  EXPECT_EQ(train_neural_model(o).model.compute.reuse_tail_bin, 5);
}

TEST_F(NeuralTrain, CliTrainAndValidate) {
  ScratchDir out("neural_cli");
  const std::string model = out.file("model");
  // A second never-seen file with pieces: its figures broken down by sharding type.
  const std::string pieces = out.file("pieces.jsonl");
  write_file_atomic(pieces, read_file(dir_->file("unseen.jsonl")));
  testing::edit_records(pieces, [](int k, nlohmann::json& r) {
    if (k % 3 == 0) r["tables"][0]["row_offset"] = 0;
    if (k % 3 == 1) r["tables"][0]["batch_slice"] = {1, 2};
  });
  auto r = testing::run_cli(fmt::format(
      "train --compute {} --comm {} --comm {} --unseen-compute {} --unseen-compute {} --out {} "
      "--epochs 20 --seed 2",
      dir_->file("compute.jsonl"), dir_->file("comm2.jsonl"), dir_->file("comm4.jsonl"),
      dir_->file("unseen.jsonl"), pieces, model));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MAPE"), std::string::npos) << r.output;
  for (const char* f : {"manifest.json", "report.md", "report.json", "compute_test.svg",
                        "comm_fwd_test.svg", "compute_unseen_file.svg",
                        "compute_unseen_file_2.svg"}) {
    EXPECT_TRUE(file_exists(model + "/" + f)) << f;
  }
  const std::string report = read_file(model + "/report.md");
  for (const char* row : {"- of which, whole tables only", "- of which, with row blocks",
                          "- of which, with replica slices"}) {
    EXPECT_NE(report.find(row), std::string::npos) << row << "\n" << report;
  }
  // A breakdown row has no plot of its own.
  EXPECT_FALSE(file_exists(model + "/compute_unseen_file_2_row_blocks.svg"));
  const auto manifest = nlohmann::json::parse(read_file(model + "/manifest.json"));
  const auto& accuracy = manifest.at("accuracy");
  EXPECT_FALSE(accuracy.contains("compute_unseen_file_whole_tables"));  // the file without pieces
  const int rows = accuracy.at("compute_unseen_file_2_row_blocks").at("count");
  const int slices = accuracy.at("compute_unseen_file_2_replica_slices").at("count");
  const int whole = accuracy.at("compute_unseen_file_2_whole_tables").at("count");
  EXPECT_EQ(rows + slices + whole, accuracy.at("compute_unseen_file_2").at("count").get<int>());
  // A torn last record in the validation data: reported and skipped.
  const std::string data = out.file("more.jsonl");
  testing::write_synth_compute(data, 30, 8);
  write_file_atomic(data, read_file(data) + "{\"sample\": 30, \"tab");
  r = testing::run_cli(fmt::format("validate --model {} --data {} --json", model, data));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("line 32"), std::string::npos) << r.output;
  const auto json_start = r.output.find("{\n");
  ASSERT_NE(json_start, std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(json_start));
  EXPECT_EQ(j["count"], 30);
  EXPECT_EQ(j["skipped_bad_records"], 1);
  for (const char* key : {"mape_pct", "p90_ape_pct", "kendall_tau"}) EXPECT_TRUE(j.contains(key));
  // The records it misses most: the largest errors first, each where the
  // file has it (the header is line 1, the torn line 32 is not a record).
  const auto& missed = j.at("most_missed");
  ASSERT_EQ(missed.size(), kMissedRecords);
  double previous = INFINITY, top = 0;
  for (const auto& m : missed) {
    const double ape = m.at("ape_pct");
    EXPECT_LE(ape, previous);
    previous = ape;
    top = std::max(top, ape);
    EXPECT_NEAR(ape, 100 * std::abs(m.at("predicted_ms").get<double>() /
                                        m.at("measured_ms").get<double>() - 1), 1e-9);
    EXPECT_GE(m.at("line"), 2);
    EXPECT_LE(m.at("line"), 31);
    EXPECT_GE(m.at("tables"), 1);
  }
  EXPECT_GE(top, j.at("p90_ape_pct").get<double>());  // the worst is past the 90th percentile
  r = testing::run_cli(fmt::format("validate --model {} --data {}", model, data));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("misses most"), std::string::npos) << r.output;
  r = testing::run_cli(
      fmt::format("validate --model {} --data {} --json", model, dir_->file("comm4.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"fwd\""), std::string::npos);
  r = testing::run_cli(fmt::format("validate --model {} --data {}", out.file("nope"), data));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("manifest.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace embshard
