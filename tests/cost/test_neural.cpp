// Neural cost model without torch: data checks, accuracy figures, files,
// the cached fast path, and that NaN never reaches the planner.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "cost_test_util.h"
#include "embshard/cost/accuracy_report.h"
#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/analytic/terms.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/model.h"
#include "embshard/cost/neural/validate.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

std::vector<TableFeatures> pool_features(int count) {
  std::vector<TableFeatures> out;
  for (const auto& t : testing::synth_pool(count, 3)) {
    TableFeatures f;
    f.rows = t.rows;
    f.dim = 16;
    f.pooling_factor = t.pooling;
    f.row_reuse = t.row_reuse;
    f.lookup_reuse = t.lookup_reuse;
    out.push_back(f);
  }
  return out;
}

TEST(NeuralModel, FastPathEqualsReference) {
  NeuralComputeModel model(prepared_neural_model(testing::random_neural_model(1)));
  const auto tables = pool_features(20);
  for (const auto& t : tables) model.add_table(t);
  std::mt19937_64 rng(5);
  for (int s = 0; s < 50; ++s) {
    std::vector<int> ids;
    std::vector<TableFeatures> shard;
    for (int i = 0; i < 1 + s % 12; ++i) {
      ids.push_back(static_cast<int>(rng() % tables.size()));
      shard.push_back(tables[ids.back()]);
    }
    const double fast = model.compute_ms(ids), ref = predict_compute_ms(model.model(), shard);
    EXPECT_GT(fast, 0);
    // Both in float: a few ulps over the layers' sums, which builds with
    // other flags (the sanitizers') order otherwise.
    EXPECT_NEAR(fast, ref, 1e-5 * ref);
  }
  EXPECT_EQ(model.compute_ms({}), 0.0);
  EXPECT_THROW(model.compute_ms(std::vector<int>{99}), Error);
}

TEST(NeuralModel, SaveLoadRoundTrip) {
  ScratchDir dir("neural_roundtrip");
  const NeuralModel m = testing::random_neural_model(2);
  save_neural_model(m, dir.path().string());
  const NeuralModel back = load_neural_model(dir.path().string());
  const auto tables = pool_features(6);
  EXPECT_EQ(predict_compute_ms(m, tables), predict_compute_ms(back, tables));
  const std::vector<double> dims = {100, 40, 300}, delays = {0, 1.5, 0.2};
  std::vector<double> f1(3), b1(3), f2(3), b2(3);
  predict_comm_ms(m, dims, delays, f1, b1);
  predict_comm_ms(back, dims, delays, f2, b2);
  EXPECT_EQ(f1, f2);
  EXPECT_EQ(b1, b2);
  EXPECT_EQ(back.comm_max_delay_ms, m.comm_max_delay_ms);
}

// A table whose histograms reach past bin `tail`: a few rows accessed tens of
// thousands of times, as a hot table's hottest rows are.
TableFeatures table_with_hot_rows(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  TableFeatures t;
  t.rows = 40000;
  t.dim = 16;
  t.pooling_factor = 35;
  double row_sum = 0, lookup_sum = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    t.row_reuse[k] = k < 10 ? u(rng) : 1e-4 * u(rng);
    t.lookup_reuse[k] = u(rng);
    row_sum += t.row_reuse[k];
    lookup_sum += t.lookup_reuse[k];
  }
  for (int k = 0; k < kReuseBins; ++k) t.row_reuse[k] /= row_sum, t.lookup_reuse[k] /= lookup_sum;
  return t;
}

// Bins above the tail bin read 0 and it holds their sum; the rest is as
// without a tail: the scalars, the bins below, every bin of a table whose
// histograms end before the tail.
TEST(NeuralFeatures, ReuseTailMergedIntoOneBin) {
  std::mt19937_64 rng(7);
  const size_t nf = ComputeFeatureSet{}.size();
  constexpr int kScalars = 9, kRow = kScalars, kLookup = kScalars + kReuseBins;
  ASSERT_EQ(nf, static_cast<size_t>(kScalars + 2 * kReuseBins + 1));
  for (int trial = 0; trial < 20; ++trial) {
    const TableFeatures t = table_with_hot_rows(rng);
    std::vector<float> none(nf), merged(nf);
    compute_raw_features(t, 4096, none.data(), {kNoReuseTail});
    for (int tail : {1, 5, kDefaultReuseTailBin, kNoReuseTail - 1, kNoReuseTail}) {
      compute_raw_features(t, 4096, merged.data(), {tail});
      for (int i = 0; i < kScalars; ++i) EXPECT_EQ(merged[i], none[i]) << "feature " << i;
      for (int base : {kRow, kLookup}) {
        float sum = 0;
        for (int k = tail; k < kReuseBins; ++k) sum += none[base + k];
        for (int k = 0; k < kReuseBins; ++k) {
          const float expected = k < tail ? none[base + k] : k == tail ? sum : 0.0f;
          EXPECT_FLOAT_EQ(merged[base + k], expected) << "tail " << tail << ", bin " << k;
        }
      }
    }
  }
  // Nothing past the tail: the same features.
  TableFeatures cold = table_with_hot_rows(rng);
  for (int k = kDefaultReuseTailBin + 1; k < kReuseBins; ++k) {
    cold.row_reuse[k] = cold.lookup_reuse[k] = 0;
  }
  std::vector<float> a(nf), b(nf);
  compute_raw_features(cold, 2048, a.data(), {kNoReuseTail});
  compute_raw_features(cold, 2048, b.data(), {kDefaultReuseTailBin});
  EXPECT_EQ(a, b);
  for (int bad : {0, -1, kReuseBins}) {
    EXPECT_NE(testing::error_of([&] {
                compute_raw_features(cold, 2048, a.data(), {bad});
              }).find("reuse tail bin " + std::to_string(bad)),
              std::string::npos);
  }
}

// The data type reaches a typed network as the weight bytes and the bytes a
// weight (fp16 and bf16 alike), nothing else; a network trained before the
// feature (its manifest names one feature fewer) reads every table as fp32
// and says so for a table that is not.
TEST(NeuralModel, DataTypeFeatureTravelsWithTheModel) {
  std::mt19937_64 rng(5);
  TableFeatures fp32 = table_with_hot_rows(rng), fp16 = fp32, bf16 = fp32;
  fp16.data_type = DataType::kFp16;
  bf16.data_type = DataType::kBf16;
  const ComputeFeatureSet typed{kDefaultReuseTailBin, true}, untyped{kDefaultReuseTailBin, false};
  const std::vector<std::string> names = typed.names();
  ASSERT_EQ(names.back(), "log_bytes_per_weight");
  EXPECT_EQ(untyped.names(), std::vector<std::string>(names.begin(), names.end() - 1));
  std::vector<float> a(typed.size()), b(typed.size()), c(typed.size());
  compute_raw_features(fp32, 2048, a.data(), typed);
  compute_raw_features(fp16, 2048, b.data(), typed);
  compute_raw_features(bf16, 2048, c.data(), typed);
  EXPECT_EQ(b, c);
  for (size_t i = 0; i < a.size(); ++i) {
    if (names[i] == "log_weight_bytes" || names[i] == "log_bytes_per_weight") {
      EXPECT_NEAR(a[i] - b[i], std::log(2.0), 1e-5) << names[i];
    } else {
      EXPECT_EQ(a[i], b[i]) << names[i];
    }
  }
  EXPECT_NEAR(a.back(), std::log(4.0), 1e-6);
  a.resize(untyped.size());
  b.resize(untyped.size());
  compute_raw_features(fp32, 2048, a.data(), untyped);
  compute_raw_features(fp16, 2048, b.data(), untyped);
  EXPECT_EQ(a, b);

  ScratchDir dir("neural_types");
  for (bool feature : {true, false}) {
    const NeuralModel m = testing::random_neural_model(4, feature);
    save_neural_model(m, dir.path().string());
    const auto manifest = nlohmann::json::parse(read_file(dir.file("manifest.json")));
    EXPECT_EQ(manifest["networks"]["compute"]["features"].size(), names.size() - (feature ? 0 : 1));
    const NeuralModel back = load_neural_model(dir.path().string());
    EXPECT_EQ(back.compute.data_type_feature, feature);
    const double p32 = predict_compute_ms(back, std::vector<TableFeatures>{fp32});
    const double p16 = predict_compute_ms(back, std::vector<TableFeatures>{fp16});
    EXPECT_EQ(p32 == p16, !feature) << p32 << " " << p16;
    const std::string why = NeuralComputeModel(prepared_neural_model(back)).far_from_training(fp16);
    EXPECT_EQ(why.find("data type fp16: this model reads every table as fp32") == 0, !feature)
        << why;
  }
}

// The tail bin is the model's: saved and loaded with it, read by the fast
// path; a manifest without it (a model trained before it) merges nothing.
// The shipped model reads the histograms as `train` does by default.
TEST(NeuralModel, ReuseTailBinTravelsWithTheModel) {
  EXPECT_EQ(load_neural_model(shipped_models_dir() + "/neural").compute.reuse_tail_bin,
            kDefaultReuseTailBin);
  ScratchDir dir("neural_tail");
  const std::string d = dir.path().string();
  NeuralModel m = testing::random_neural_model(2);
  m.compute.reuse_tail_bin = kDefaultReuseTailBin;
  save_neural_model(m, d);
  auto manifest = nlohmann::json::parse(read_file(dir.file("manifest.json")));
  EXPECT_EQ(manifest["networks"]["compute"]["reuse_tail_bin"], kDefaultReuseTailBin);
  const NeuralModel back = load_neural_model(d);
  EXPECT_EQ(back.compute.reuse_tail_bin, kDefaultReuseTailBin);
  NeuralModel untailed = m;
  untailed.compute.reuse_tail_bin = kNoReuseTail;
  std::mt19937_64 rng(3);
  const std::vector<TableFeatures> hot = {table_with_hot_rows(rng)};
  EXPECT_EQ(predict_compute_ms(back, hot), predict_compute_ms(m, hot));
  EXPECT_NE(predict_compute_ms(back, hot), predict_compute_ms(untailed, hot));
  NeuralComputeModel fast(prepared_neural_model(back));
  const int id = fast.add_table(hot[0]);
  EXPECT_NEAR(fast.compute_ms(std::vector<int>{id}), predict_compute_ms(m, hot),
              1e-5 * predict_compute_ms(m, hot));

  manifest["networks"]["compute"].erase("reuse_tail_bin");
  write_file_atomic(dir.file("manifest.json"), manifest.dump());
  EXPECT_EQ(load_neural_model(d).compute.reuse_tail_bin, kNoReuseTail);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(17), nlohmann::json("x")}) {
    manifest["networks"]["compute"]["reuse_tail_bin"] = bad;
    write_file_atomic(dir.file("manifest.json"), manifest.dump());
    const std::string e = testing::error_of([&] { load_neural_model(d); });
    EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
    EXPECT_NE(e.find("reuse_tail_bin"), std::string::npos) << e;
  }
}

// Forward = the wait for the last device + the network's transfer time, the
// network seeing delays clipped to its training range: a straggler 50 ms late
// adds its 50 ms, it is not extrapolated.
TEST(NeuralModel, ForwardAddsTheWaitBeyondTheTrainedDelays) {
  const NeuralModel m = testing::random_neural_model(5);  // trained delays: 0..2 ms
  const std::vector<double> dims = {100, 40, 300};
  std::vector<double> f_far(3), b_far(3), f_edge(3), b_edge(3);
  predict_comm_ms(m, dims, std::vector<double>{0, 50, 1}, f_far, b_far);
  predict_comm_ms(m, dims, std::vector<double>{0, 2, 1}, f_edge, b_edge);
  EXPECT_NEAR(f_far[0] - 50, f_edge[0] - 2, 1e-9);
  EXPECT_NEAR(f_far[2] - 49, f_edge[2] - 1, 1e-9);
  EXPECT_NEAR(f_far[1], f_edge[1], 1e-9);  // the straggler waits for nobody
  EXPECT_GT(f_far[1], 0);
  EXPECT_EQ(b_far, b_edge);
  EXPECT_EQ(comm_wait_ms(std::vector<double>{3, 1, 2}, 1), 2);
  // One direction alone (an empty output is not computed) is the same.
  std::vector<double> f_only(3), b_only(3);
  predict_comm_ms(m, dims, std::vector<double>{0, 50, 1}, f_only, {});
  predict_comm_ms(m, dims, std::vector<double>{0, 50, 1}, {}, b_only);
  EXPECT_EQ(f_only, f_far);
  EXPECT_EQ(b_only, b_far);
}

// Error text must name the file at fault.
void expect_error_naming(const std::string& dir, const std::string& file) {
  try {
    load_neural_model(dir);
    FAIL() << "loading " << dir << " should fail (" << file << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

// Saves a fresh model in `d`, applies `edit` to its manifest and returns
// the error of loading it ("" when it loads).
std::string error_after_manifest_edit(const std::string& d,
                                      const std::function<void(nlohmann::json&)>& edit) {
  save_neural_model(testing::random_neural_model(3), d);
  const std::string path = (std::filesystem::path(d) / "manifest.json").string();
  auto manifest = nlohmann::json::parse(read_file(path));
  edit(manifest);
  write_file_atomic(path, manifest.dump());
  return testing::error_of([&] { load_neural_model(d); });
}

// A missing manifest, a damaged, replaced or missing weight file.
TEST(NeuralModel, BadDirectoriesNameTheFile) {
  ScratchDir dir("neural_bad");
  const std::string d = dir.path().string();
  expect_error_naming(d, "manifest.json");  // missing manifest
  save_neural_model(testing::random_neural_model(3), d);
  const std::string weights = dir.file("compute_head.bin");
  std::string bytes = read_file(weights);
  bytes[bytes.size() / 2] ^= 0x40;  // one flipped bit
  write_file_atomic(weights, bytes);
  expect_error_naming(d, "compute_head.bin");

  // An intact weight file of another model, same sizes: its own checksum
  // holds, the manifest's CRC of the weights does not.
  ScratchDir other("neural_bad_other");
  save_neural_model(testing::random_neural_model(4), other.path().string());
  save_neural_model(testing::random_neural_model(3), d);
  std::filesystem::copy_file(other.file("compute_head.bin"), weights,
                             std::filesystem::copy_options::overwrite_existing);
  expect_error_naming(d, "compute_head.bin");
  // An older manifest holds the whole file's CRC, the residue
  // any intact file has: it still loads (it cannot tell a replaced file).
  save_neural_model(testing::random_neural_model(4), d);
  auto old = nlohmann::json::parse(read_file(dir.file("manifest.json")));
  old["networks"]["compute"]["head_mlp"]["crc32"] = 0x2144df1c;
  write_file_atomic(dir.file("manifest.json"), old.dump());
  EXPECT_NO_THROW(load_neural_model(d));

  save_neural_model(testing::random_neural_model(3), d);
  std::filesystem::remove(dir.file("comm_fwd.bin"));
  expect_error_naming(d, "comm_fwd.bin");
  // Layer sizes other than the weight file's.
  EXPECT_NE(error_after_manifest_edit(d,
                                      [](nlohmann::json& m) {
                                        m["networks"]["compute"]["head_mlp"]["sizes"] = {8, 32, 1};
                                      })
                .find("compute_head.bin"),
            std::string::npos);
}

// A manifest's features, numbers, types and version: errors naming the
// manifest and the field.
TEST(NeuralModel, BadManifestsNameTheField) {
  ScratchDir dir("neural_bad_manifest");
  const std::string d = dir.path().string();
  const auto error_after = [&](const std::function<void(nlohmann::json&)>& edit) {
    return error_after_manifest_edit(d, edit);
  };
  using nlohmann::json;
  EXPECT_NE(error_after([](json& m) {
              m["networks"]["compute"]["features"].erase(0);
            }).find("manifest.json"),
            std::string::npos);  // wrong feature count
  // A renamed feature: the first that differs is named.
  EXPECT_NE(error_after([](json& m) {
              m["networks"]["compute"]["features"][2] = "log1p_pooling_v0";
            }).find("feature 2 is 'log1p_pooling_v0' in the manifest but 'log1p_pooling' here"),
            std::string::npos);
  // Numbers that would predict absurd costs with no error.
  for (const auto& [pointer, value] : std::vector<std::pair<std::string, double>>{
           {"/networks/compute/target/std", 0.0},
           {"/networks/compute/target/mean", 1e308},
           {"/networks/comm_bwd/normaliser/scale/0", 0.0}}) {
    EXPECT_NE(
        error_after([&](json& m) { m[json::json_pointer(pointer)] = value; }).find("manifest.json"),
        std::string::npos)
        << pointer;
  }
  // A field of the wrong type: the error names where it is in the file.
  for (const std::string pointer : {"/batch_size", "/networks/compute/target/mean",
                                    "/networks/comm_fwd/normaliser/scale", "/version"}) {
    const std::string e = error_after([&](json& m) { m[json::json_pointer(pointer)] = "2048"; });
    EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
    EXPECT_NE(e.find(pointer == "/version" ? "manifest version \"2048\""
                                           : "field '" + pointer + "' is \"2048\", expected"),
              std::string::npos)
        << e;
  }
  EXPECT_NE(error_after([](json& m) {
              m["networks"]["compute"]["head_mlp"].erase("crc32");
            }).find("field '/networks/compute/head_mlp/crc32' is missing"),
            std::string::npos);
  EXPECT_NE(error_after([](json& m) {
              m["networks"]["compute"]["target"] = "x";
            }).find("field '/networks/compute/target' is \"x\", expected an object"),
            std::string::npos);
  EXPECT_NE(error_after([](json& m) { m["version"] = 99; }).find("manifest.json"),
            std::string::npos);
}

// A table far outside the training set (here: a pooling factor of millions)
// meets features clamped at +-clamp standard deviations: past the clamp, more
// of it changes nothing, where unclamped the network extrapolates freely.
// The clamp travels with the model file; a bad one is an error naming it.
TEST(NeuralModel, ClampedFeaturesBoundATableFarOutside) {
  NeuralModel m = testing::random_neural_model(6);
  std::vector<TableFeatures> far = pool_features(2), farther = far;
  far[1].pooling_factor = 1e6;
  farther[1].pooling_factor = 1e9;
  EXPECT_NE(predict_compute_ms(m, far), predict_compute_ms(m, farther));
  m.compute.features.clamp = 3;
  EXPECT_EQ(predict_compute_ms(m, far), predict_compute_ms(m, farther));

  ScratchDir dir("neural_clamp");
  save_neural_model(m, dir.path().string());
  const NeuralModel back = load_neural_model(dir.path().string());
  EXPECT_EQ(back.compute.features.clamp, 3.0f);
  EXPECT_EQ(back.comm_fwd.features.clamp, 0.0f);  // none: as before the clamp
  EXPECT_EQ(predict_compute_ms(back, far), predict_compute_ms(m, far));
  auto manifest = nlohmann::json::parse(read_file(dir.file("manifest.json")));
  manifest["networks"]["compute"]["normaliser"]["clamp"] = -1;
  write_file_atomic(dir.file("manifest.json"), manifest.dump());
  try {
    load_neural_model(dir.path().string());
    ADD_FAILURE() << "a negative clamp was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clamp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

// A table far from those the model was fitted on is named with the reason;
// the tables it was fitted on are not.
TEST(NeuralModel, TablesFarFromTheTrainingTablesAreNamed) {
  std::vector<TableFeatures> pool = pool_features(40);
  for (size_t i = 0; i < pool.size(); ++i) pool[i].dim = 8 << (i % 4);
  NeuralModel m = testing::random_neural_model(7);
  const size_t nf = m.compute.inputs().size();
  std::vector<double> sum(nf), sq(nf);
  std::vector<float> x(nf);
  for (const TableFeatures& t : pool) {
    compute_raw_features(t, m.batch_size, x.data(), m.compute.inputs());
    for (size_t i = 0; i < nf; ++i) sum[i] += x[i], sq[i] += double{x[i]} * x[i];
  }
  for (size_t i = 0; i < nf; ++i) {  // as training fits them: a constant feature's scale 1
    const double mean = sum[i] / pool.size(), var = sq[i] / pool.size() - mean * mean;
    m.compute.features.mean[i] = static_cast<float>(mean);
    m.compute.features.scale[i] = var > 1e-12 ? static_cast<float>(1 / std::sqrt(var)) : 1.0f;
  }
  NeuralComputeModel model(prepared_neural_model(m));
  for (const TableFeatures& t : pool) EXPECT_EQ(model.far_from_training(t), "");

  TableFeatures hot = pool[0];
  hot.pooling_factor *= 1e4;
  const std::string why = model.far_from_training(hot);
  EXPECT_EQ(why.rfind(fmt::format("pooling factor {:.4g}: ", hot.pooling_factor), 0), 0u) << why;
  EXPECT_NE(why.find("standard deviations above the training tables' mean, on a log scale"),
            std::string::npos)
      << why;
  TableFeatures huge = pool[0];
  huge.rows *= 1000000;
  EXPECT_EQ(model.far_from_training(huge).rfind(
                fmt::format("rows {:.4g}: ", static_cast<double>(huge.rows)), 0),
            0u)
      << model.far_from_training(huge);
  TableFeatures wide = pool[0];
  wide.dim = 1024;
  EXPECT_EQ(model.far_from_training(wide).rfind("dim 1024: ", 0), 0u)
      << model.far_from_training(wide);
  // Trained on one dim alone: any other is named.
  m.compute.features.mean[1] = std::log(16.0f);
  m.compute.features.scale[1] = 1;
  NeuralComputeModel one_dim(prepared_neural_model(m));
  TableFeatures other = pool[1];  // dim 16
  EXPECT_EQ(one_dim.far_from_training(other), "");
  other.dim = 32;
  EXPECT_EQ(one_dim.far_from_training(other), "dim 32: every training table had 16");
}

TEST(NeuralModel, NanNeverReachesThePlanner) {
  NeuralModel m = testing::random_neural_model(4);
  auto tables = pool_features(3);
  m.compute.head.layers.back().bias[0] = NAN;
  EXPECT_THROW(predict_compute_ms(m, tables), Error);
  m = testing::random_neural_model(4);
  m.compute.head.layers.back().bias[0] = 1e30f;  // absurd: clamped, finite
  EXPECT_TRUE(std::isfinite(predict_compute_ms(m, tables)));
  tables[1].pooling_factor = NAN;
  EXPECT_THROW(predict_compute_ms(m, tables), Error);
  std::vector<double> f(2), b(2);
  EXPECT_THROW(predict_comm_ms(testing::random_neural_model(4), std::vector<double>{1, NAN},
                               std::vector<double>{0, 0}, f, b),
               Error);
}

TEST(NeuralCostModel, ScalesToAnotherBatch) {
  const NeuralModel shipped = load_neural_model(shipped_models_dir() + "/neural");
  ASSERT_GT(shipped.max_batch_size, shipped.batch_size);  // trained on several batches
  CostModelOptions own, twice, inside;
  own.model_dir = twice.model_dir = inside.model_dir = shipped_models_dir() + "/neural";
  own.batch_size = shipped.max_batch_size;
  twice.batch_size = 2 * shipped.max_batch_size;
  inside.batch_size = shipped.max_batch_size / 2;
  const CostModel a = create_cost_model("neural", own);
  const CostModel b = create_cost_model("neural", twice);
  const CostModel half = create_cost_model("neural", inside);
  EXPECT_EQ(half.compute->name().find("scaled"), std::string::npos) << half.name;
  EXPECT_EQ(a.compute->name().find("scaled"), std::string::npos) << a.name;
  EXPECT_NE(b.compute->name().find("scaled"), std::string::npos) << b.name;
  EXPECT_NE(b.name.find("scaled"), std::string::npos) << b.name;
  EXPECT_EQ(b.compute->batch_size(), 2 * a.compute->batch_size());
  TableFeatures t;
  t.rows = 100000;
  t.dim = 64;
  t.pooling_factor = 8;
  t.row_reuse[0] = t.lookup_reuse[0] = 1;
  const int ia = a.compute->add_table(t), ib = b.compute->add_table(t);
  const std::vector<int> ida{ia}, idb{ib};
  EXPECT_NEAR(b.compute->compute_ms(idb), 2 * a.compute->compute_ms(ida),
              1e-9 * a.compute->compute_ms(ida));
  const int ih = half.compute->add_table(t);
  const std::vector<int> idh{ih};
  // Fewer lookups cost less, but not by a fixed factor the model assumed.
  EXPECT_LT(half.compute->compute_ms(idh), a.compute->compute_ms(ida));
  EXPECT_GT(std::abs(half.compute->compute_ms(idh) / a.compute->compute_ms(ida) - 0.5), 1e-3);
  const std::vector<double> dims{64, 128}, delays_a{0, 1}, delays_b{0, 2};
  std::vector<double> fa(2), ba(2), fb(2), bb(2);
  a.comm->comm_ms(dims, delays_a, fa, ba);
  b.comm->comm_ms(dims, delays_b, fb, bb);
  for (int d = 0; d < 2; ++d) {
    EXPECT_NEAR(fb[d], 2 * fa[d], 1e-9 * fa[d]);
    EXPECT_NEAR(bb[d], 2 * ba[d], 1e-9 * ba[d]);
  }
}

// Outside the device counts its comm data covered, the analytic all-to-all
// stands in for the networks (and without a calibration it is an Error).
TEST(NeuralCostModel, AnalyticCommOutsideTheTrainedDeviceCounts) {
  NeuralModel m = testing::random_neural_model(4);
  m.info["data"]["comm"] = {{{"num_devices", 2}}, {{"num_devices", 4}}};
  EXPECT_EQ(comm_device_range(m), std::make_pair(2, 4));
  Calibration c;
  c.comm_latency_us = 20;
  c.comm_gbps = 3;
  const auto prepared = prepared_neural_model(m);
  NeuralCommModel with(prepared, 0, c), without(prepared);
  EXPECT_NE(with.name().find("analytic comm outside 2-4 devices"), std::string::npos);
  EXPECT_NE(make_neural_cost_model(prepared, 0, c).name.find("analytic comm outside 2-4"),
            std::string::npos);
  for (int n : {1, 3, 4, 8}) {
    std::vector<double> dims(n), delays(n), f1(n), b1(n), f2(n), b2(n), fa(n), ba(n);
    for (int d = 0; d < n; ++d) dims[d] = 32.0 * (d + 1), delays[d] = 0.1 * d;
    with.comm_ms(dims, delays, f1, b1);
    analytic_comm_ms(c, m.comm_batch_size, dims, delays, fa, ba);
    const bool inside = n >= 2 && n <= 4;
    // Only the formula proves a floor.
    EXPECT_EQ(with.floor_ms(500, n), inside ? 0.0 : analytic_comm_floor_ms(c, m.comm_batch_size, 500, n));
    EXPECT_EQ(without.floor_ms(500, n), 0.0);
    if (inside) {
      without.comm_ms(dims, delays, f2, b2);
      EXPECT_EQ(f1, f2);
      EXPECT_EQ(b1, b2);
    } else {
      EXPECT_EQ(f1, fa);
      EXPECT_EQ(b1, ba);
      try {
        without.comm_ms(dims, delays, f2, b2);
        ADD_FAILURE() << "no error at " << n << " devices";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("trained on 2-4 devices, not " + std::to_string(n)),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

// The search's incremental state gives the same cost as compute_ms.
TEST(NeuralCostModel, IncrementalStateEqualsComputeMs) {
  NeuralComputeModel model(prepared_neural_model(testing::random_neural_model(2)));
  const auto tables = pool_features(15);
  for (const auto& t : tables) model.add_table(t);
  std::mt19937_64 rng(8);
  std::vector<double> state(model.state_size());
  EXPECT_EQ(model.state_ms(state), 0.0);
  for (int s = 0; s < 30; ++s) {
    std::fill(state.begin(), state.end(), 0.0);
    std::vector<int> ids;
    for (int i = 0; i < 1 + s % 9; ++i) {
      ids.push_back(static_cast<int>(rng() % tables.size()));
      model.add_to_state(ids.back(), state);
    }
    EXPECT_DOUBLE_EQ(model.state_ms(state), model.compute_ms(ids));
  }
  EXPECT_THROW(model.add_to_state(99, state), Error);
}

}  // namespace
}  // namespace embshard
