// How `bench compute` sets a file's scale: anchors priced by the model (the
// default), a window of probe runs, an earlier file's, a resumed file's own.
#include <gtest/gtest.h>

#include <cmath>

#include "embshard/bench/compute.h"
#include "embshard/cost/cost_model.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;

ComputeBenchOptions tiny(const std::string& workload, const std::string& out) {
  ComputeBenchOptions o;
  o.workload_dir = workload;
  o.out_path = out;
  o.samples = 3;
  o.max_tables = 3;
  o.mem_cap_bytes = 1 << 20;
  o.warmup = 1;
  o.min_rounds = 2;
  o.max_rounds = 2;
  o.reference_window_s = 0.2;
  o.seed = 5;
  return o;
}

json header_of(const std::string& path, std::vector<json>* records = nullptr) {
  json header;
  auto r = RecordFile::read_all(path, &header, nullptr);
  if (records) *records = std::move(r);
  return header;
}

TEST(ComputeScale, AnchorsSetTheScaleAndEveryRecordIsOnIt) {
  ScratchDir dir("compute_scale");
  const std::string workload = testing::write_test_workload(dir, {5, 64, 50, 400, 1, 1, 4, 5}).dir;
  ComputeBenchOptions o = tiny(workload, dir.file("a.jsonl"));
  ASSERT_EQ(o.scale, ComputeBenchOptions::Scale::kAnchors);  // the default
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 3);
  std::vector<json> records;
  const json header = header_of(o.out_path, &records);
  const json& scale = header["scale"];
  ASSERT_EQ(scale["method"], "anchors") << header.dump();
  EXPECT_EQ(scale["model"], neural_model_dir(""));
  EXPECT_EQ(scale["count"], 24);
  EXPECT_EQ(scale["batch_size"], 64);          // the workload's
  EXPECT_EQ(scale["mem_cap_bytes"], 1 << 20);  // the run's
  const double reference = scale["reference_ms"].get<double>();
  EXPECT_EQ(header["probe"]["reference"]["reference_ms"].get<double>(), reference);
  for (const json& a : scale["anchors"]) EXPECT_LE(a["weight_bytes"].get<double>(), 1 << 20);
  for (const json& r : records) {
    EXPECT_NEAR(r["ms"].get<double>(), r["ratio_median"].get<double>() * reference,
                1e-9 * r["ms"].get<double>());
  }

  // Resumed: the file's own scale, no anchors measured again.
  o.samples = 4;
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 4);
  EXPECT_EQ(header_of(o.out_path)["scale"], scale);

  // --reference-from: that file's scale, and where it came from.
  ComputeBenchOptions from = tiny(workload, dir.file("b.jsonl"));
  from.reference_from = o.out_path;
  run_compute_bench(from, silent_reporter());
  const json b = header_of(from.out_path);
  EXPECT_EQ(b["scale"]["from"], o.out_path);
  EXPECT_EQ(b["scale"]["reference_ms"], scale["reference_ms"]);
  EXPECT_EQ(b["probe"]["reference"]["reference_ms"].get<double>(), reference);

  // A scale of another type in the file it is taken from is named.
  std::vector<json> lines;
  json edited = header_of(o.out_path, &lines);
  edited["scale"] = 5;
  std::string text = edited.dump() + "\n";
  for (const json& r : lines) text += r.dump() + "\n";
  testing::spit(dir.file("edited.jsonl"), text);
  ComputeBenchOptions bad = tiny(workload, dir.file("c.jsonl"));
  bad.reference_from = dir.file("edited.jsonl");
  const std::string e = testing::error_of([&] { run_compute_bench(bad, silent_reporter()); });
  EXPECT_NE(e.find("edited.jsonl: field 'scale' is 5, expected an object"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(bad.out_path));
}

TEST(ComputeScale, AWindowNeedsNoModelAndAMissingModelIsNamed) {
  ScratchDir dir("compute_window");
  const std::string workload = testing::write_test_workload(dir, {3, 64, 50, 400, 1, 1, 4, 5}).dir;
  ComputeBenchOptions o = tiny(workload, dir.file("w.jsonl"));
  o.scale = ComputeBenchOptions::Scale::kWindow;
  o.model_dir = dir.file("no_model");  // not read
  run_compute_bench(o, silent_reporter());
  EXPECT_EQ(header_of(o.out_path)["scale"], json({{"method", "window"}}));

  ComputeBenchOptions anchored = tiny(workload, dir.file("x.jsonl"));
  anchored.model_dir = dir.file("no_model");
  const std::string e = testing::error_of([&] { run_compute_bench(anchored, silent_reporter()); });
  EXPECT_NE(e.find("no_model"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(anchored.out_path));
}

}  // namespace
}  // namespace embshard
