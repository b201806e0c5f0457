// The plan model: validator faults, sharding types, plan JSON shape, and the
// plan command's handling of bad input.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>

#include <sstream>

#include <cmath>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "embshard/plan/report.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

PlanTask small_task() {
  std::vector<TableSpec> tables = testing::random_tables(3, 1);
  tables[0].dim = 64;
  return make_task(tables, 4096, std::vector<int64_t>(2, 1'000'000'000), {});
}

void expect_invalid(const PlanTask& task, const Plan& plan, const std::string& part) {
  try {
    validate_plan(task, plan);
    FAIL() << "accepted; expected: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

Plan table_wise(const PlanTask& task) {
  Plan p;
  for (int t = 0; t < task.num_tables(); ++t) {
    p.shards.push_back({t, 0, task.tables[t].dim, 0, task.tables[t].rows, t % 2, false});
  }
  return p;
}

TEST(Validator, AcceptsEveryShardingKind) {
  const PlanTask task = small_task();
  Plan p = table_wise(task);
  EXPECT_NO_THROW(validate_plan(task, p));
  const int64_t rows = task.tables[0].rows;
  // Table 0: two column halves, the second split in rows too (grid).
  p.shards[0] = {0, 0, 32, 0, rows, 0, false};
  p.shards.push_back({0, 32, 32, 0, rows / 2, 1, false});
  p.shards.push_back({0, 32, 32, rows / 2, rows - rows / 2, 0, false});
  // Table 1: data parallel.
  p.shards[1] = {1, 0, task.tables[1].dim, 0, task.tables[1].rows, 0, true};
  p.shards.push_back({1, 0, task.tables[1].dim, 0, task.tables[1].rows, 1, true});
  EXPECT_NO_THROW(validate_plan(task, p));
  EXPECT_EQ(sharding_type(task, p, 0), "grid_shard");
  EXPECT_EQ(sharding_type(task, p, 1), "data_parallel");
  EXPECT_EQ(sharding_type(task, p, 2), "table_wise");
}

TEST(Validator, RejectsBrokenPlans) {
  const PlanTask task = small_task();
  const int64_t rows = task.tables[0].rows;
  Plan p = table_wise(task);
  p.shards[0].cols = 32;
  expect_invalid(task, p, "cover");
  p = table_wise(task);
  p.shards.push_back({0, 0, 32, 0, rows, 1, false});
  expect_invalid(task, p, "covered twice");
  p = table_wise(task);
  p.shards[2].device = 5;
  expect_invalid(task, p, "device 5, which does not exist");
  p = table_wise(task);
  p.shards.pop_back();
  expect_invalid(task, p, "has no shard");
  p = table_wise(task);
  p.shards[1].replica = true;
  expect_invalid(task, p, "copies on device");
  p = table_wise(task);
  p.shards[0] = {0, 0, 30, 0, rows, 0, false};
  p.shards.push_back({0, 30, 34, 0, rows, 1, false});
  expect_invalid(task, p, "width 30 is not an allowed split width");
  PlanTask tight = task;
  tight.device_mem_bytes = {1000, 1000};
  expect_invalid(tight, table_wise(task), "over its capacity");
  PlanTask pinned = task;
  pinned.pinned_device[1] = 0;
  expect_invalid(pinned, table_wise(task), "pinned to device 0");
}

// Without a memory flag: 1.25 x an even split, or 1.25 x the largest table's
// 4-column piece on so many devices that an even split is smaller.
// Capacities whose sum passes INT64_MAX (9e18 bytes each is a valid --mem)
// hold everything; the sum once wrapped negative and refused every task.
TEST(DefaultCapacity, HugeCapacitiesDoNotOverflow) {
  const std::vector<TableSpec> tables = testing::random_tables(5, 4);
  const int64_t huge = 9'000'000'000'000'000'000;
  testing::ToyCostModel model;
  EXPECT_NO_THROW(make_plan(*create_planner("size_greedy", {}),
                            make_task(tables, 4096, {huge, huge}, {}), model));
}

TEST(DefaultCapacity, EvenSplitOrTheLargestPiece) {
  std::vector<TableSpec> tables = testing::random_tables(10, 3);
  tables[0].rows = 20'000'000;
  tables[0].dim = 64;
  MemoryModel m;
  int64_t total = 0;
  for (const TableSpec& t : tables) total += m.shard_bytes(DataType::kFp32, t.rows, t.dim);
  EXPECT_NEAR(static_cast<double>(default_device_capacity(tables, 2)), 1.25 * total / 2, 2);
  const int64_t piece = m.shard_bytes(DataType::kFp32, tables[0].rows, 4);
  ASSERT_LT(total / 64, piece);
  const int64_t cap = default_device_capacity(tables, 64);
  EXPECT_NEAR(static_cast<double>(cap), 1.25 * piece, 2);
  // ... and a plan exists at that capacity.
  testing::ToyCostModel model;
  auto planner = create_planner("neuroshard", {});
  EXPECT_NO_THROW(make_plan(*planner, make_task(tables, 4096, std::vector<int64_t>(64, cap), {}),
                            model));
}

// A searched plan of 12 random tables on 4 devices, and its JSON.
struct ToyPlan {
  PlanTask task;
  PlanResult result;
  nlohmann::json json;
};

ToyPlan toy_plan() {
  ToyPlan t;
  t.task = testing::random_task(12, 4, 1.3, 2);
  testing::ToyCostModel model;
  auto planner = create_planner("neuroshard", {});
  t.result = make_plan(*planner, t.task, model);
  t.json = plan_to_json(t.task, t.result);
  return t;
}

TEST(PlanJson, HasTorchRecShapeAndPredictions) {
  const ToyPlan toy = toy_plan();
  const nlohmann::json& j = toy.json;
  for (const char* key : {"format", "version", "algorithm", "cost_model", "batch_size",
                          "num_devices", "device_memory_bytes", "tables", "table_order",
                          "predicted"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["tables"].size(), 12u);
  for (const auto& [name, t] : j["tables"].items()) {
    for (const char* key : {"sharding_type", "compute_kernel", "ranks", "shards", "rows", "dim"}) {
      EXPECT_TRUE(t.contains(key)) << name << " " << key;
    }
    if (t["sharding_type"] == "data_parallel") {
      EXPECT_TRUE(t["shards"].is_null()) << name;
      continue;
    }
    int64_t area = 0;
    for (const auto& s : t["shards"]) {
      EXPECT_EQ(s["shard_offsets"].size(), 2u);
      const int64_t rows = s["shard_sizes"][0], cols = s["shard_sizes"][1];
      if (rows != t["rows"].get<int64_t>()) {  // a row piece
        const std::string type = t["sharding_type"];
        EXPECT_TRUE(type == "row_wise" || type == "table_row_wise" || type == "grid_shard") << type;
      }
      area += rows * cols;
      const std::string place = s["placement"];
      EXPECT_EQ(place.rfind("rank:", 0), 0u) << place;
      EXPECT_NE(place.find("/cuda:"), std::string::npos) << place;
    }
    EXPECT_EQ(area, t["rows"].get<int64_t>() * t["dim"].get<int>()) << name;
  }
  const auto& p = j["predicted"];
  for (const char* key : {"cost_ms", "critical_device", "imbalance", "lower_bound_ms", "gap",
                          "search_s", "devices"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  ASSERT_EQ(p["devices"].size(), 4u);
  double worst = 0;
  for (const auto& d : p["devices"]) {
    EXPECT_NEAR(d["total_ms"].get<double>(), d["compute_ms"].get<double>() +
                d["fwd_comm_ms"].get<double>() + d["bwd_comm_ms"].get<double>(), 1e-9);
    worst = std::max(worst, d["total_ms"].get<double>());
  }
  EXPECT_DOUBLE_EQ(worst, p["cost_ms"].get<double>());
  EXPECT_NEAR(p["imbalance_ms"]["max_over_mean"].get<double>(), p["imbalance"].get<double>(), 1e-9);
}

// Past 32 devices the report shows the 16 costliest (the critical one among
// them) and sums up the rest; --verbose shows every device.
TEST(PlanJson, ManyDevicesShowTheCostliest) {
  const PlanTask task = testing::random_task(60, 40, 1.3, 4);
  testing::ToyCostModel model;
  auto planner = create_planner("size_greedy", {});
  const PlanResult r = make_plan(*planner, task, model);
  const auto rows = [](const std::string& report) {
    int n = 0;
    for (size_t at = report.find("\n"); at != std::string::npos; at = report.find("\n", at + 1)) {
      n += std::isdigit(static_cast<unsigned char>(report[at + 1])) != 0 &&
           report.find("  ", at + 1) < report.find("\n", at + 1);
    }
    return n;
  };
  const std::string brief = plan_report(task, r, false);
  EXPECT_EQ(rows(brief), 16) << brief;
  EXPECT_NE(brief.find(fmt::format("\n{} *", r.predicted.critical_device)), std::string::npos);
  EXPECT_NE(brief.find("the 16 costliest of 40 devices"), std::string::npos) << brief;
  double lowest = 1e300;
  for (const DeviceCosts& c : r.predicted.devices) lowest = std::min(lowest, c.total_ms());
  EXPECT_NE(brief.find(fmt::format("total ms {:.3f} / ", lowest)), std::string::npos) << brief;
  EXPECT_GE(rows(plan_report(task, r, true)), 40);
}

// The picture of 1,024 devices fits a screen: bars side by side, a label
// every 64 devices.
TEST(PlanJson, PictureOfManyDevicesFitsAScreen) {
  const PlanTask task = testing::random_task(1100, 1024, 1.5, 6);
  testing::ToyCostModel model;
  auto planner = create_planner("size_greedy", {});
  const std::string svg = plan_svg(task, make_plan(*planner, task, model));
  int width = 0;
  ASSERT_EQ(
      std::sscanf(svg.c_str(), "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\"", &width),
      1);
  EXPECT_LE(width, 1300);
  EXPECT_NE(svg.find("device 1023 compute"), std::string::npos);
  EXPECT_NE(svg.find(">960</text>"), std::string::npos);
}

// The report and picture of the same plan: the verbose table's shards and
// memory are the JSON's, and each device's bytes in and out follow from its
// pieces.
TEST(PlanJson, ReportAndBytesAgreeWithTheJson) {
  const ToyPlan toy = toy_plan();
  const PlanTask& task = toy.task;
  const PlanResult& r = toy.result;
  const nlohmann::json& j = toy.json;
  const auto& p = j["predicted"];
  const std::string svg = plan_svg(task, r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  const std::string report = plan_report(task, r, true);
  EXPECT_NE(report.find("gap"), std::string::npos);
  EXPECT_NE(report.find("critical device"), std::string::npos);
  EXPECT_NE(report.find("input MB"), std::string::npos);
  EXPECT_NE(report.find("time imbalance: max/mean"), std::string::npos);
  for (const Shard& s : r.plan.shards) {  // the verbose table, spelt as `diff` spells shards
    const std::string text = shard_text(s.device, s.cols, s.row_offset, s.rows,
                                        task.tables[s.table].rows, s.replica);
    EXPECT_NE(report.find(text), std::string::npos) << text;
  }
  int split = 0;  // the verbose table's memory is the JSON's: every piece with its row state
  for (const auto& [name, t] : j["tables"].items()) {
    split += t["ranks"].size() > 1;
    const size_t row = report.find("\n" + name + " ");
    ASSERT_NE(row, std::string::npos) << name;
    const std::string line = report.substr(row + 1, report.find('\n', row + 1) - row - 1);
    const std::string mb = fmt::format(" {:.1f} ", t["memory_bytes"].get<double>() / 1e6);
    EXPECT_NE(line.find(mb), std::string::npos) << line << " lacks" << mb;
  }
  EXPECT_GT(split, 0) << "no table split: the memory check above would not tell";
  EXPECT_EQ(shard_text(1, 64, 626707, 626706, 1253413, false), "1:64[626707:1253413]");
  EXPECT_EQ(shard_text(2, 16, 0, 500, 500, false), "2:16");
  EXPECT_EQ(shard_text(3, 8, 0, 500, 500, true), "3:all");
  double input = 0, output = 0;
  for (const auto& d : p["devices"]) {
    input += d["input_bytes"].get<double>();
    output += d["output_bytes"].get<double>();
  }
  // Every piece receives its rows' lookup indices (8 bytes each; a replica
  // its device's share of the batch); every piece but replicas sends its
  // pooled columns (4 bytes per sample and column; a row piece its partial sums).
  double lookups = 0, cols = 0;
  for (const Shard& s : r.plan.shards) {
    const TableSpec& t = task.tables[s.table];
    lookups += t.pooling_factor * (s.replica ? 1.0 / task.num_devices()
                                             : static_cast<double>(s.rows) / t.rows);
    if (!s.replica) cols += s.cols;
  }
  EXPECT_NEAR(input, lookups * task.batch_size * 8.0, 1e-6 * input);
  EXPECT_NEAR(output, cols * task.batch_size * 4.0, 1e-6 * output);
}

// Every label inside the picture (at about 0.55 em a character, DejaVu Sans'
// average), and text escaped (a model directory's name is the user's).
TEST(PlanSvg, TextStaysInsideThePictureAndIsEscaped) {
  const PlanTask task = testing::random_task(12, 4, 1.3, 2);
  testing::ToyCostModel model;
  auto planner = create_planner("neuroshard", {});
  PlanResult r = make_plan(*planner, task, model);
  r.cost_model = "neural a<b&c (compute trained at batches 1024-8192 on 2 cores, AMD EPYC; "
                 "communication at 2-8 devices, analytic outside) " + std::string(80, 'x');
  r.algorithm = "neuroshard+verify with a long name " + std::string(40, 'y');
  const std::string svg = plan_svg(task, r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("<svg [^>]*width=\"([0-9]+)\"")));
  const double width = std::stod(m[1]);
  const std::regex label(
      "<text x=\"([0-9.]+)\" y=\"[0-9.]+\" font-size=\"([0-9]+)\" text-anchor=\"(\\w+)\">([^<]*)</text>");
  int labels = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator();
       ++it, ++labels) {
    const double x = std::stod((*it)[1]), w = 0.55 * std::stod((*it)[2]) * (*it)[4].length();
    const std::string anchor = (*it)[3];
    const double right = anchor == "start" ? x + w : anchor == "middle" ? x + w / 2 : x;
    EXPECT_LE(right, width) << (*it)[0];
  }
  EXPECT_GT(labels, 10);
  EXPECT_NE(svg.find("neural a&lt;b&amp;c ("), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<'), std::count(svg.begin(), svg.end(), '>'));
}

TEST(Imbalance, CliMeasuresOfAnUnevenSpread) {
  const Imbalance even = imbalance_of({2, 2, 2, 2});
  EXPECT_DOUBLE_EQ(even.max_over_mean, 1.0);
  EXPECT_DOUBLE_EQ(even.max_over_min, 1.0);
  EXPECT_NEAR(even.total_variation, 0.0, 1e-12);
  EXPECT_NEAR(even.kl_divergence, 0.0, 1e-12);
  const Imbalance one = imbalance_of({4, 0, 0, 0});  // all on one device
  EXPECT_DOUBLE_EQ(one.max_over_mean, 4.0);
  EXPECT_TRUE(std::isinf(one.max_over_min));
  EXPECT_NEAR(one.total_variation, 0.75, 1e-12);
  EXPECT_NEAR(one.kl_divergence, std::log(4.0), 1e-12);
  const Imbalance two = imbalance_of({3, 1});
  EXPECT_DOUBLE_EQ(two.max_over_mean, 1.5);
  EXPECT_DOUBLE_EQ(two.max_over_min, 3.0);
  EXPECT_NEAR(two.total_variation, 0.25, 1e-12);
  EXPECT_NEAR(two.kl_divergence, 0.75 * std::log(1.5) + 0.25 * std::log(0.5), 1e-12);
  EXPECT_DOUBLE_EQ(imbalance_of({}).max_over_mean, 1.0);  // nothing to spread
}

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(EMBSHARD_CLI_PATH)) GTEST_SKIP() << "no CLI";
  }
  testing::ScratchDir dir_{"plan_cli"};
  void write_tables() {
    write_file_atomic(dir_.file("tables.json"), R"({"batch_size": 4096, "tables": [
      {"name": "big", "rows": 1000000, "dim": 128},
      {"name": "a", "rows": 1000, "dim": 16, "pooling_factor": 3.0},
      {"name": "b", "rows": 5000, "dim": 32}]})");
  }
};

TEST_F(PlanCli, PlansATableSpecFile) {
  write_tables();
  const auto r = testing::run_cli("plan --tables " + dir_.file("tables.json") +
                                  " --devices 2 --mem-per-device 1000000000 --cost-model analytic "
                                  "--out " + dir_.file("plan.json") + " --svg " +
                                  dir_.file("plan.svg") + " --verbose --explain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("lower bound"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cost model measured on: compute: cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("why: each table's decision"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir_.file("plan.json")));
  EXPECT_EQ(j["tables"].size(), 3u);
  EXPECT_EQ(j["explanation"].size(), 3u);
  EXPECT_TRUE(j["cost_model_source"]["extrapolated"].is_array());
  EXPECT_TRUE(file_exists(dir_.file("plan.svg")));
  EXPECT_NE(r.output.find("3 tables on 2 devices"), std::string::npos) << r.output;
  // One device: counted in the singular.
  const auto one = testing::run_cli("plan --tables " + dir_.file("tables.json") +
                                    " --devices 1 --mem-per-device 4GB --cost-model analytic");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("3 tables on 1 device,"), std::string::npos) << one.output;
  EXPECT_EQ(one.output.find("1 devices"), std::string::npos) << one.output;
  // A gzip'd spec file reads as the plain one; the spec file given as a workload says what to do.
  ASSERT_EQ(testing::run_shell("gzip -c " + dir_.file("tables.json") + " > " +
                               dir_.file("tables.json.gz")).exit_code, 0);
  const auto packed = testing::run_cli("plan --tables " + dir_.file("tables.json.gz") +
                                       " --devices 2 --mem-per-device 4GB --cost-model analytic");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_NE(packed.output.find("3 tables on 2 devices"), std::string::npos) << packed.output;
  // At the calibration's batch the analytic all-to-all records no device counts: the
  // report does not claim they were measured (on another CPU it lists that instead).
  auto spec = nlohmann::json::parse(read_file(dir_.file("tables.json")));
  spec["batch_size"] = 2048;
  write_file_atomic(dir_.file("t2048.json"), spec.dump());
  const auto at2048 = testing::run_cli("plan --tables " + dir_.file("t2048.json") +
                                       " --devices 2 --mem-per-device 4GB --cost-model analytic");
  ASSERT_EQ(at2048.exit_code, 0) << at2048.output;
  EXPECT_EQ(at2048.output.find("device count were measured"), std::string::npos) << at2048.output;
  EXPECT_NE(at2048.output.find("extrapolated: "), std::string::npos) << at2048.output;
  const auto as_workload = testing::run_cli("plan " + dir_.file("tables.json") + " --devices 2");
  EXPECT_NE(as_workload.exit_code, 0);
  EXPECT_NE(as_workload.output.find("a table spec file is read with --tables FILE"),
            std::string::npos)
      << as_workload.output;
}

// Tables far from those the shipped compute network was trained on are
// named in the report's "extrapolated" line, the first three of them.
TEST_F(PlanCli, TablesFarFromTheTrainingOnesAreNamed) {
  write_file_atomic(dir_.file("far.json"), R"({"batch_size": 4096, "tables": [
      {"name": "h0", "rows": 100000, "dim": 64, "pooling_factor": 3000},
      {"name": "a", "rows": 1000, "dim": 16, "pooling_factor": 3.0},
      {"name": "h1", "rows": 100000, "dim": 64, "pooling_factor": 5000},
      {"name": "h2", "rows": 100000, "dim": 64, "pooling_factor": 4000},
      {"name": "big", "rows": 1000000000, "dim": 16, "pooling_factor": 2}]})");
  const auto r = testing::run_cli("plan --tables " + dir_.file("far.json") +
                                  " --devices 2 --mem-per-device 100GB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 tables far from those the compute model was fitted on: 'h0' "
                          "(pooling factor 3000: "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("'h2' (pooling factor 4000: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" on a log scale) and 1 more"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("'a' ("), std::string::npos) << r.output;
  write_tables();  // none of them far
  const auto near = testing::run_cli("plan --tables " + dir_.file("tables.json") +
                                     " --devices 2 --mem-per-device 100GB");
  ASSERT_EQ(near.exit_code, 0) << near.output;
  EXPECT_EQ(near.output.find("far from those"), std::string::npos) << near.output;
}

// Verification's default budget: the N best plans a round, three rounds, no
// leaders; one round with the measured cost model, which has nothing to correct.
TEST_F(PlanCli, VerifiesInThreeRoundsByDefault) {
  const std::string w = dir_.file("w");
  const auto synth =
      testing::run_cli("synth --profile 2021 --tables 4 --batch 256 --seed 3 -o " + w);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string base = "plan " + w +
                           " --devices 2 --mem-per-device 1GB --sharding-types table_wise "
                           "--verify 1 --verify-rivals none --reference-window-s 0.2 --out ";
  const auto neural = testing::run_cli(base + dir_.file("n.json"));
  ASSERT_EQ(neural.exit_code, 0) << neural.output;
  EXPECT_NE(neural.output.find("verifying the search's 1 best plan a round (up to 3 rounds) on"),
            std::string::npos)
      << neural.output;
  const auto n = nlohmann::json::parse(read_file(dir_.file("n.json")))["verification"];
  EXPECT_EQ(n["leaders"], 0) << n;
  EXPECT_GE(n["rounds"].get<int>(), 1) << n;  // fewer where a round found no new plan
  EXPECT_LE(n["rounds"].get<int>(), 3) << n;
  const auto measured = testing::run_cli(base + dir_.file("m.json") + " --cost-model measured");
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  EXPECT_NE(measured.output.find("verifying the search's 1 best plan on"), std::string::npos)
      << measured.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir_.file("m.json")))["verification"]["rounds"], 1);
  // Asked for, rounds with the measured model are refused.
  const auto refused =
      testing::run_cli(base + dir_.file("r.json") + " --cost-model measured --verify-rounds 2");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("the measured cost model has nothing to correct"),
            std::string::npos)
      << refused.output;
}

TEST_F(PlanCli, BadInputFailsWithAMessageAndNoPlanFile) {
  write_tables();
  const std::string base = "plan --tables " + dir_.file("tables.json") + " --cost-model analytic --out " +
                           dir_.file("plan.json") + " ";
  const struct {
    std::string args, message;
  } cases[] = {
      {"--devices 2 --algo best", "valid planners: random, size_greedy"},
      {"--devices 0", "--devices is 0"},
      {"--devices 3 --mem 1000000000,1000000000", "--mem lists 2 capacities but --devices is 3"},
      {"--devices 2 --mem 100000000,2000000000 --pin big=0",
       "table 'big' (1000000 rows x dim 128) needs 0.516 GB (516000000 bytes) but is pinned to "
       "device 0"},
      {"--devices 2 --mem 516300000,2000000000 --pin big=0 --pin b=0 --reserve 0",
       "the tables pinned to device 0 ('big', 'b') need 0.517 GB (516660000 bytes) together but "
       "it holds 0.516 GB (516300000 bytes)"},
      {"--devices 2 --mem-per-device 1000000000 --pin nope=0", "table 'nope'"},
      {"--devices 2 --policy " + dir_.file("p"), "--algo neuroshard plans without a policy"},
      {"--devices 2 --mem-per-device 1GB --pin big=0 --pin big=1",
       "--pin big=1: table 'big' is already pinned to device 0"},
      {"--devices 2 --mem-per-device 100000000 --no-split big", "table 'big'"},
      {"--devices 2 --mem-per-device 0", "--mem-per-device is 0"},
      {"--devices 2 --reserve 100%", "--reserve is '100%'"},
      {"--devices 2 --reserve lots", "--reserve"},
      {"--devices 2 --mem-per-device 1GB --reserve 1GB", "--reserve 1.00 GB leaves nothing"},
      {"--devices 2 --optimizer lamb", "--optimizer is 'lamb' (valid: sgd, rowwise_adagrad, adam)"},
      {"--devices 2 --verify -1", "--verify is -1"},
      {"--devices 2 --verify-rounds 0", "--verify-rounds is 0"},
      {"--devices 2 --verify-rounds 2", "--verify-rounds 2 needs --verify N"},
      {"--devices 2 --expert verify-tables", "--expert verify-tables needs --verify N"},
      {"--devices 2 --expert verify-tables=yes", "--expert verify-tables=yes: true or false"},
      {"--devices 2 --expert beam-width=3,,max-steps=1", "--expert: an empty item"},
      {"--devices 2 --expert beam=3", "--expert: unknown setting 'beam' (settings: beam-width=3"},
      {"--devices 2 --expert uncertainty=1.5", "--expert uncertainty=1.5: must be 0..1"},
      {"--devices 2 --expert max-steps=two", "--expert max-steps=two: not an integer"},
      {"--devices 2 --verify 2 --verify-rivals torchrec,tourchrec",
       "--verify-rivals: 'tourchrec' is no planner"},
      {"--devices 2 --reference-window-s -5", "--reference-window-s is -5"},
      {"--devices 2 --mem-per-device 1GB --mem 1GB,1GB", "excludes"},
      {"--devices 3 --mem 1GB,,1GB", "--mem: '' is not a size"},
      {"--devices 2 --mem-per-device 1GB --expert grid-steps=0",
       "grid-steps=0: must be at least 1"},
      {"--devices 2 --mem-per-device 1GB --expert beam-width=0",
       "beam-width=0: must be at least 1"},
      {"--devices 2 --mem-per-device 1GB --expert max-steps=-1",
       "max-steps=-1: must be at least 0"},
      {"--devices 2 --mem-per-device 1GB --split-dims 8,,16", "--split-dims: an empty item"},
      {"--devices 2 --mem-per-device 1GB --split-dims 8,x", "--split-dims: 'x' in '8,x'"},
      {"--devices 2 --verify 2 --verify-leaders -1", "--verify-leaders is -1"},
      {"--devices 2 --mem-per-device 1GB --svg " + dir_.file("plan.json"), "name the same file"},
  };
  for (const auto& c : cases) {
    const auto r = testing::run_cli(base + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(file_exists(dir_.file("plan.json"))) << c.args;
  }
}

// A missing --model, a pooling factor past any real one, and table specs
// with a misspelt field, no batch size, an unknown profile or a name twice:
// each named with the file, never planned at the profile's averages.
TEST_F(PlanCli, BadModelsAndTableSpecsAreNamed) {
  write_tables();
  // A --model that does not exist is an error, not a quiet switch to another model.
  const auto no_model = testing::run_cli("plan --tables " + dir_.file("tables.json") +
                                         " --devices 2 --model " + dir_.file("nowhere"));
  EXPECT_NE(no_model.exit_code, 0);
  EXPECT_NE(no_model.output.find("no such directory"), std::string::npos) << no_model.output;
  // A pooling factor past any real one names the field (not a derived one).
  write_file_atomic(dir_.file("huge.json"),
                    R"({"batch_size": 4096, "tables": [{"name": "t", "rows": 1000, "dim": 16, "pooling_factor": 1e17}]})");
  const auto huge = testing::run_cli("plan --tables " + dir_.file("huge.json") + " --devices 2");
  EXPECT_NE(huge.exit_code, 0);
  EXPECT_NE(huge.output.find("field 'pooling_factor' is 1e+17"), std::string::npos) << huge.output;
  const std::string t = R"({"name": "t", "rows": 1000, "dim": 16})";
  const struct {
    std::string spec, message;
  } specs[] = {
      {R"({"batch_size": 64, "tables": [{"name": "t", "rows": 1000, "dim": 16, "pooling": 3}]})",
       "tables[0]: unknown field 'pooling'"},
      {R"({"tables": [)" + t + "]}", "no field 'batch_size'"},
      {R"({"batch_size": 64.5, "tables": [)" + t + "]}", "field 'batch_size' is 64.5"},
      {R"({"batch_size": 64, "profile": "2020", "tables": [)" + t + "]}",
       "field 'profile' is \"2020\" (valid profiles: 2021, 2022)"},
      {R"({"batch_size": 64, "tables": [)" + t + "," + t + "]}",
       "tables[1]: field 'name' is 't', as tables[0]'s"},
      {R"({"batch_size": 64, "tables": [{"name": "t", "rows": 18446744073709551615, "dim": 16}]})",
       "field 'rows' is 18446744073709551615, must be in 1..2^63-1"},
      {R"({"batch_size": 64, "tables": [{"name": "t", "rows": 1000, "dim": 16, "rows": 9}]})",
       "key 'tables[].rows' appears twice in one object"},
  };
  for (const auto& c : specs) {
    write_file_atomic(dir_.file("spec.json"), c.spec);
    const auto r = testing::run_cli("plan --tables " + dir_.file("spec.json") + " --devices 2");
    EXPECT_NE(r.exit_code, 0) << c.spec;
    EXPECT_NE(r.output.find(dir_.file("spec.json") + ": "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.spec << "\n" << r.output;
  }
}

}  // namespace
}  // namespace embshard
