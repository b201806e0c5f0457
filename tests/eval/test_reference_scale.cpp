// eval's scale: measured costs normalized to the cost model's reference probe
// and exchange (model_reference_scale), so that they compare with its
// predictions whatever the machine's load when the run started.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "embshard/measure/shard_timer.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"
#include "eval_test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;

const char* const kCpu = "cpu (1 thread)";
const char* const kNormalized = "normalized against the reference probe (version 2)";

json compute_entry(double reference_ms) {
  json probe = reference_probe_json();
  probe["reference"] = {{"reference_ms", reference_ms}, {"median_ms", reference_ms * 1.1}};
  return {{"path", "c.jsonl"}, {"executor", kCpu}, {"machine", {{"cpu", cpu_model()}}},
          {"probe", probe}};
}

json comm_entry(int devices, int64_t batch, std::vector<double> reference_ms) {
  return {{"path", "n.jsonl"}, {"num_devices", devices}, {"batch", batch},
          {"machine", {{"cpu", cpu_model()}}},
          {"probe", {{"exchange_dim", 64}, {"reference_ms", reference_ms}}}};
}

// A model directory whose manifest holds only `data` (normalized ground
// truth unless it says otherwise).
std::string model_with(const ScratchDir& dir, json data) {
  std::filesystem::create_directories(dir.file("model"));
  if (!data.contains("ground_truth")) data["ground_truth"] = kNormalized;
  testing::spit(dir.file("model/manifest.json"), json{{"data", data}}.dump());
  return dir.file("model");
}

TEST(ReferenceScale, ComesFromTheModelsTrainingData) {
  ScratchDir dir("reference_scale");
  const std::string model =
      model_with(dir, {{"compute", {compute_entry(3.5), compute_entry(3.5)}},
                       {"comm", {comm_entry(2, 2048, {0.03, 0.04}), comm_entry(4, 2048, {1, 2, 3, 4})}}});
  ReferenceScale s = model_reference_scale("neural", model, kCpu, 4, 2048);
  ASSERT_TRUE(s.compute.has_value());
  EXPECT_DOUBLE_EQ(s.compute->reference_ms, 3.5);
  EXPECT_EQ(s.exchange_ms, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(s.note, "");

  // No comm data at this rank count or batch: the compute scale alone.
  for (auto [devices, batch] : {std::pair{8, int64_t{2048}}, std::pair{4, int64_t{4096}}}) {
    s = model_reference_scale("neural", model, kCpu, devices, batch);
    EXPECT_TRUE(s.compute.has_value());
    EXPECT_TRUE(s.exchange_ms.empty());
    EXPECT_NE(s.note.find("no comm data at"), std::string::npos) << s.note;
  }

  // Comm data normalized by another reference exchange (bench comm
  // --probe-dim) are another scale: none, and the note says why.
  json wide = comm_entry(4, 2048, {1, 2, 3, 4});
  wide["probe"]["exchange_dim"] = 512;
  s = model_reference_scale("neural", model_with(dir, {{"comm", {wide}}}), kCpu, 4, 2048);
  EXPECT_TRUE(s.exchange_ms.empty());
  EXPECT_NE(s.note.find("n.jsonl was normalized by a reference exchange of 512 columns, not 64"),
            std::string::npos)
      << s.note;
  model_with(dir, {{"compute", {compute_entry(3.5), compute_entry(3.5)}},
                   {"comm", {comm_entry(2, 2048, {0.03, 0.04}), comm_entry(4, 2048, {1, 2, 3, 4})}}});

  // Compute files on two scales, another probe, no probe, or measured on
  // another executor or cpu: no compute scale.
  json other_probe = compute_entry(3.5), other_executor = compute_entry(3.5),
       other_machine = compute_entry(3.5);
  other_probe["probe"]["seed"] = 12345;
  other_executor["executor"] = "cuda (NVIDIA H100)";
  other_machine["machine"]["cpu"] = "another cpu";
  for (const json& entries : {json{compute_entry(3.5), compute_entry(3.6)}, json{other_probe},
                              json{json{{"path", "old.jsonl"}}}, json{other_executor},
                              json{other_machine}}) {
    s = model_reference_scale("neural", model_with(dir, {{"compute", entries}}), kCpu, 2, 2048);
    EXPECT_FALSE(s.compute.has_value()) << entries.dump();
    EXPECT_NE(s.note.find("do not share one reference probe"), std::string::npos) << s.note;
  }
  // A file anchors put on a model's scale takes the others' reference; files
  // that are all such set none.
  json anchored = compute_entry(3.2);
  anchored["scale"] = {{"method", "anchors"}, {"reference_ms", 3.2}};
  s = model_reference_scale(
      "neural", model_with(dir, {{"compute", {compute_entry(3.5), anchored, compute_entry(3.5)}}}),
      kCpu, 2, 2048);
  ASSERT_TRUE(s.compute.has_value()) << s.note;
  EXPECT_DOUBLE_EQ(s.compute->reference_ms, 3.5);
  s = model_reference_scale("neural", model_with(dir, {{"compute", {anchored}}}), kCpu, 2, 2048);
  EXPECT_FALSE(s.compute.has_value());
  EXPECT_NE(s.note.find("do not share one reference probe"), std::string::npos) << s.note;
  // Raw medians have no scale to share.
  s = model_reference_scale(
      "neural", model_with(dir, {{"ground_truth", "raw medians"}, {"compute", {compute_entry(3.5)}}}),
      kCpu, 2, 2048);
  EXPECT_FALSE(s.compute.has_value());

  // An analytic model, or no manifest: nothing, and the note says why.
  EXPECT_NE(model_reference_scale("analytic", model, kCpu, 4, 2048).note.find("no measured scale"),
            std::string::npos);
  EXPECT_NE(model_reference_scale("neural", dir.file("none"), kCpu, 4, 2048).note.find("no such file"),
            std::string::npos);

  // A malformed entry: an error naming the manifest.
  model_with(dir, {{"comm", {comm_entry(4, 2048, {1, 2})}}});
  EXPECT_NE(testing::error_of([&] { model_reference_scale("neural", model, kCpu, 4, 2048); })
                .find("manifest.json: data.comm entry n.jsonl holds 2 ranks' reference times for 4"),
            std::string::npos);
  model_with(dir, {{"comm", {json{{"num_devices", "four"}}}}});
  EXPECT_NE(testing::error_of([&] { model_reference_scale("neural", model, kCpu, 4, 2048); })
                .find("manifest.json: field '/data/comm/0/num_devices' is \"four\""),
            std::string::npos);
  testing::spit(dir.file("model/manifest.json"), "{");
  EXPECT_NE(testing::error_of([&] { model_reference_scale("neural", model, kCpu, 4, 2048); })
                .find("manifest.json: not valid JSON"),
            std::string::npos);
}

// A fitted model predicts on the scale of the data it was fitted to: its
// compute files', and its exchanges' where it fitted them (else the
// pre-trained data's).
TEST(ReferenceScale, AFittedModelHasItsFitDatasScale) {
  ScratchDir dir("reference_scale_fitted");
  json data = {{"compute", {compute_entry(3.5)}}, {"comm", {comm_entry(4, 2048, {1, 2, 3, 4})}}};
  data["ground_truth"] = kNormalized;
  json manifest = {{"data", data},
                   {"fitted",
                    {{"scale", {{"ground_truth", kNormalized},
                                {"compute", {compute_entry(3.9), compute_entry(3.9)}}}}}}};
  std::filesystem::create_directories(dir.file("model"));
  testing::spit(dir.file("model/manifest.json"), manifest.dump());
  ReferenceScale s = model_reference_scale("neural", dir.file("model"), kCpu, 4, 2048);
  ASSERT_TRUE(s.compute.has_value()) << s.note;
  EXPECT_DOUBLE_EQ(s.compute->reference_ms, 3.9);
  EXPECT_EQ(s.exchange_ms, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_NE(s.source.find("the data it was fitted to"), std::string::npos) << s.source;

  manifest["fitted"]["scale"]["comm"] = {comm_entry(4, 2048, {5, 6, 7, 8})};
  testing::spit(dir.file("model/manifest.json"), manifest.dump());
  s = model_reference_scale("neural", dir.file("model"), kCpu, 4, 2048);
  EXPECT_EQ(s.exchange_ms, (std::vector<double>{5, 6, 7, 8}));

  manifest["fitted"]["scale"].erase("compute");
  testing::spit(dir.file("model/manifest.json"), manifest.dump());
  const auto open = [&] { model_reference_scale("neural", dir.file("model"), kCpu, 4, 2048); };
  EXPECT_NE(testing::error_of(open).find("manifest.json: field '/fitted/scale/compute' is missing"),
            std::string::npos);
  // A field of another type is named, not the JSON library's nameless type error.
  manifest["fitted"]["scale"]["compute"] = {compute_entry(3.9)};
  manifest["fitted"]["scale"]["comm"][0]["num_devices"] = "four";
  testing::spit(dir.file("model/manifest.json"), manifest.dump());
  EXPECT_NE(testing::error_of(open).find(
                "manifest.json: field '/fitted/scale/comm/0/num_devices' is \"four\", expected a "
                "whole number >= 0"),
            std::string::npos)
      << testing::error_of(open);
}

// A copy of the shipped neural model whose data entries say they were
// measured on this machine's cpu (the shipped ones name the development
// machine's, and a scale is only taken from data of a machine like this one).
std::string shipped_model_here(const ScratchDir& dir) {
  const std::string model = dir.file("shipped");
  std::filesystem::copy(neural_model_dir(""), model, std::filesystem::copy_options::recursive);
  json manifest = json::parse(testing::slurp(model + "/manifest.json"));
  for (const char* kind : {"compute", "unseen_compute", "comm"}) {
    for (json& entry : manifest["data"][kind]) entry["machine"]["cpu"] = cpu_model();
  }
  testing::spit(model + "/manifest.json", manifest.dump());
  return model;
}

// The shipped model records the scale of its data: one probe reference, and
// exchanges at every rank count and batch it was trained on.
TEST(ReferenceScale, TheShippedModelHasOne) {
  ScratchDir dir("reference_scale_shipped");
  const std::string model = shipped_model_here(dir);
  for (int devices : {2, 4, 8}) {
    for (int64_t batch : {2048, 4096}) {
      const ReferenceScale s = model_reference_scale("neural", model, kCpu, devices, batch);
      EXPECT_TRUE(s.compute.has_value()) << s.note;
      EXPECT_EQ(s.exchange_ms.size(), static_cast<size_t>(devices)) << s.note;
    }
  }
}

// eval measures on the model's scale by default (the header says so), on a
// scale of its own with Reference::kNow or an analytic model.
TEST(ReferenceScale, EvalMeasuresOnTheModelsScale) {
  ScratchDir dir("reference_scale_eval");
  EvalOptions o;
  o.tasks_path = testing::make_tasks(dir, 6, 4, 4, 1);
  o.algos = {"size_greedy"};
  o.devices = 2;
  o.measure.reference_window_s = 0.3;
  o.model_dir = shipped_model_here(dir);
  const ReferenceScale shipped = model_reference_scale("neural", o.model_dir, kCpu, 2, 64);
  ASSERT_TRUE(shipped.compute.has_value());
  for (auto [model, reference] : {std::pair{"neural", EvalMeasurement::Reference::kModel},
                                  std::pair{"neural", EvalMeasurement::Reference::kNow},
                                  std::pair{"analytic", EvalMeasurement::Reference::kModel}}) {
    o.cost_model = model;
    o.measure.reference = reference;
    o.out_path = dir.file(std::string(model) + std::to_string(static_cast<int>(reference)));
    run_eval(o, silent_reporter());
    json header;
    RecordFile::read_all(o.out_path, &header, nullptr);
    const bool from_model =
        o.cost_model == "neural" && reference == EvalMeasurement::Reference::kModel;
    EXPECT_EQ(header["reference_source"].get<std::string>().find("the cost model's (") == 0,
              from_model)
        << header["reference_source"];
    EXPECT_EQ(header["probe_reference"]["reference_ms"].get<double>() ==
                  shipped.compute->reference_ms,
              from_model);
  }
}

// --reference anchors: the compute scale from anchor shards the neural model
// prices, recorded in the header; a resumed run keeps it.
TEST(ReferenceScale, EvalScalesOnAnchors) {
  ScratchDir dir("reference_scale_anchors");
  EvalOptions o;
  o.tasks_path = testing::make_tasks(dir, 6, 4, 4, 1);
  o.algos = {"size_greedy"};
  o.devices = 2;
  o.model_dir = shipped_model_here(dir);
  o.measure.reference = EvalMeasurement::Reference::kAnchors;
  o.out_path = dir.file("anchors.jsonl");
  run_eval(o, silent_reporter());
  json header;
  RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["scale"]["method"], "anchors");
  EXPECT_EQ(header["scale"]["count"], 24);
  EXPECT_EQ(header["probe_reference"]["reference_ms"], header["scale"]["reference_ms"]);
  EXPECT_EQ(header["reference_source"].get<std::string>().rfind("anchors priced by ", 0), 0u)
      << header["reference_source"];
  run_eval(o, silent_reporter());  // resumed: nothing measured again
  json resumed;
  RecordFile::read_all(o.out_path, &resumed, nullptr);
  EXPECT_EQ(resumed["scale"], header["scale"]);
}

}  // namespace
}  // namespace embshard
