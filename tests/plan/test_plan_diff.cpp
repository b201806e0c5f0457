// The plan file reader (every field checked; truncated and damaged files give
// an Error, never a crash) and `embshard diff` (checked against the two plan
// files the real CLI writes).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "embshard/plan/diff.h"
#include "embshard/plan/plan_file.h"
#include "embshard/util/error.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;

// Two devices; one table of each kind the reader treats apart: table-wise,
// column-wise, data parallel (shards null) and row-wise.
const char* const kSmallPlan = R"({
  "format": "embshard-plan", "version": 1, "algorithm": "test", "cost_model": "toy",
  "batch_size": 64, "num_devices": 2, "device_memory_bytes": [100000, 200000],
  "memory_model": {"bytes_per_weight": 4, "optimizer_bytes_per_row": 4},
  "table_order": ["a", "b", "c", "d"],
  "tables": {
    "a": {"sharding_type": "table_wise", "compute_kernel": "fused", "ranks": [0],
          "shards": [{"shard_offsets": [0, 0], "shard_sizes": [100, 16], "placement": "rank:0/cuda:0"}],
          "rows": 100, "dim": 16, "memory_bytes": 6800},
    "b": {"sharding_type": "column_wise", "compute_kernel": "fused", "ranks": [0, 1],
          "shards": [{"shard_offsets": [0, 0], "shard_sizes": [50, 8], "placement": "rank:0/cuda:0"},
                     {"shard_offsets": [0, 8], "shard_sizes": [50, 8], "placement": "rank:1/cuda:1"}],
          "rows": 50, "dim": 16, "memory_bytes": 3600},
    "c": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1],
          "shards": null, "rows": 10, "dim": 8, "memory_bytes": 720},
    "d": {"sharding_type": "row_wise", "compute_kernel": "fused", "ranks": [0, 1],
          "shards": [{"shard_offsets": [0, 0], "shard_sizes": [20, 4], "placement": "rank:0/cuda:0"},
                     {"shard_offsets": [20, 0], "shard_sizes": [20, 4], "placement": "rank:1/cuda:1"}],
          "rows": 40, "dim": 4, "memory_bytes": 800}},
  "predicted": {"cost_ms": 3.5, "critical_device": 1, "imbalance": 1.1, "lower_bound_ms": 3.0,
    "gap": 0.1667, "search_s": 0.01,
    "devices": [
      {"memory_bytes": 9480, "memory_fraction": 0.0948, "compute_ms": 2.0, "fwd_comm_ms": 0.5,
       "bwd_comm_ms": 0.5, "total_ms": 3.0, "num_shards": 4, "dim_sum": 36},
      {"memory_bytes": 2440, "memory_fraction": 0.0122, "compute_ms": 2.5, "fwd_comm_ms": 0.5,
       "bwd_comm_ms": 0.5, "total_ms": 3.5, "num_shards": 3, "dim_sum": 20}]}
})";

std::string error_of(const std::string& text, const std::string& source = "bad.json") {
  return testing::error_of([&] { parse_plan_file(text, source); });
}

TEST(PlanFile, ReadsEveryField) {
  const PlanFile p = parse_plan_file(kSmallPlan, "small.json");
  EXPECT_EQ(p.path, "small.json");
  EXPECT_EQ(p.algorithm, "test");
  EXPECT_EQ(p.cost_model, "toy");
  EXPECT_EQ(p.batch_size, 64);
  EXPECT_EQ(p.num_devices, 2);
  EXPECT_EQ(p.device_memory_bytes, (std::vector<int64_t>{100000, 200000}));
  ASSERT_EQ(p.num_tables(), 4);
  EXPECT_EQ(p.tables[0].name, "a");
  EXPECT_EQ(p.tables[3].name, "d");
  const PlanFileTable& b = p.tables[1];
  EXPECT_EQ(b.sharding_type, "column_wise");
  EXPECT_EQ(b.rows, 50);
  EXPECT_EQ(b.dim, 16);
  EXPECT_EQ(b.memory_bytes, 3600);
  ASSERT_EQ(b.shards.size(), 2u);
  EXPECT_EQ(b.shards[1].col_offset, 8);
  EXPECT_EQ(b.shards[1].cols, 8);
  EXPECT_EQ(b.shards[1].rows, 50);
  EXPECT_EQ(b.shards[1].device, 1);
  EXPECT_TRUE(p.tables[2].replicated());
  EXPECT_TRUE(p.tables[2].shards.empty());
  EXPECT_EQ(p.tables[2].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.tables[3].shards[1].row_offset, 20);
  EXPECT_EQ(p.tables[3].shards[1].device, 1);
  EXPECT_DOUBLE_EQ(p.predicted.cost_ms, 3.5);
  EXPECT_EQ(p.predicted.critical_device, 1);
  ASSERT_EQ(p.predicted.devices.size(), 2u);
  EXPECT_EQ(p.predicted.devices[0].memory_bytes, 9480);
  EXPECT_DOUBLE_EQ(p.predicted.devices[1].compute_ms, 2.5);
  EXPECT_EQ(p.predicted.devices[1].num_shards, 3);
}

// A damaged copy of kSmallPlan and what its error must say.
struct PlanFault {
  std::function<void(json&)> edit;
  std::vector<std::string> parts;
};

// Every fault: the message names the file, the field and the value.
void expect_faults_named(const std::vector<PlanFault>& faults) {
  const json good = json::parse(kSmallPlan);
  for (const PlanFault& c : faults) {
    json j = good;
    c.edit(j);
    const std::string message = error_of(j.dump(), "bad.json");
    ASSERT_FALSE(message.empty()) << "accepted: " << j.dump();
    EXPECT_EQ(message.rfind("bad.json: ", 0), 0u) << message;
    for (const std::string& part : c.parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "want: " << part << "\ngot: " << message;
    }
  }
}

// Fields missing or of the wrong kind, placements and shards that do not
// fit their table or the devices.
TEST(PlanFile, ErrorsNameTheFileFieldAndValue) {
  expect_faults_named({
      {[](json& j) { j["tables"]["a"].erase("rows"); }, {"missing field 'tables.a.rows'"}},
      {[](json& j) { j.erase("predicted"); }, {"missing field 'predicted'"}},
      {[](json& j) { j["tables"]["a"]["dim"] = "16"; },
       {"field 'tables.a.dim' is \"16\", expected an integer"}},
      {[](json& j) { j["batch_size"] = 1.5; }, {"field 'batch_size' is 1.5"}},
      {[](json& j) { j["num_devices"] = -2; }, {"field 'num_devices' is -2"}},
      {[](json& j) { j["format"] = "embshard-workload"; },
       {"field 'format' is \"embshard-workload\"", "embshard-plan"}},
      {[](json& j) { j["version"] = 3; }, {"field 'version' is 3"}},
      {[](json& j) { j["tables"]["b"]["shards"][1]["placement"] = "rank:x/cuda:1"; },
       {"field 'tables.b.shards[1].placement' is \"rank:x/cuda:1\"", "rank:N/cuda:N"}},
      {[](json& j) { j["tables"]["b"]["shards"][1]["placement"] = "rank:1/gpu"; },
       {"'tables.b.shards[1].placement' is \"rank:1/gpu\""}},
      {[](json& j) {
         j["tables"]["b"]["shards"][1]["placement"] = "rank:5/cuda:5";
         j["tables"]["b"]["ranks"][1] = 5;
       },
       {"field 'tables.b.ranks[1]' is 5, expected 0..1"}},
      {[](json& j) { j["tables"]["b"]["shards"][1]["placement"] = "rank:7/cuda:7"; },
       {"tables.b.shards[1].placement", "rank 7 is outside 0..1"}},
      {[](json& j) { j["tables"]["b"]["ranks"][1] = 0; },
       {"field 'tables.b.ranks[1]' is 0 but tables.b.shards[1].placement says rank 1"}},
      {[](json& j) { j["tables"]["c"]["ranks"] = {1}; },
       {"field 'tables.c.ranks' lists 1 of the 2 devices: a data_parallel table is on every "
        "device"}},
      {[](json& j) {
         j["tables"]["d"]["ranks"] = {1, 0};
         j["tables"]["d"]["shards"][0]["placement"] = "rank:1/cuda:1";
         j["tables"]["d"]["shards"][1]["placement"] = "rank:0/cuda:0";
       },
       {"field 'tables.d.shards[0]' holds rows 0..20 on rank 1", "row block b", "from rank b"}},
      {[](json& j) {
         j["tables"]["b"]["shards"][1]["shard_sizes"] = {50, 9};
       },
       {"field 'tables.b.shards[1]' is rows 0..50 x cols 8..17, outside table 'b'"}},
      {[](json& j) {
         j["tables"]["b"]["shards"][1]["shard_offsets"] = {0, 4};
       },
       {"field 'tables.b.shards': shards[0] and shards[1] overlap"}},
      {[](json& j) {
         j["tables"]["b"]["shards"][1]["shard_sizes"] = {50, 7};
       },
       {"field 'tables.b.shards': the shards cover 750 of the 800 values of table 'b'"}},
      {[](json& j) { j["tables"]["c"]["shards"] = json::array(); },
       {"field 'tables.c.shards' is an array of 0 values, expected null"}},
  });
}

// Bytes as the memory model says and within each device's capacity; shards
// shaped as their type says, and TorchRec's kernels.
TEST(PlanFile, MemoryAndShapesAreCheckedAgainstTheirFields) {
  expect_faults_named({
      {[](json& j) { j["tables"]["a"]["memory_bytes"] = 6801; },
       {"field 'tables.a.memory_bytes' is 6801, but its shards hold 6800 bytes under "
        "'memory_model'"}},
      {[](json& j) { j["device_memory_bytes"][0] = 9000; },
       {"rank 0 holds 9360 bytes of shards (a, b, c, d), past its capacity "
        "device_memory_bytes[0] = 9000"}},
      {[](json& j) { j["memory_model"]["bytes_per_weight"] = 0; },
       {"field 'memory_model.bytes_per_weight' is 0"}},
      // Shards shaped as their type says, and TorchRec's kernels.
      {[](json& j) { j["tables"]["d"]["sharding_type"] = "column_wise"; },
       {"field 'tables.d.shards[0]' holds rows 0..20 of 40: a column_wise shard holds every row"}},
      {[](json& j) { j["tables"]["b"]["sharding_type"] = "row_wise"; },
       {"field 'tables.b.shards[0]' holds columns 0..8 of 16: a row_wise shard holds every "
        "column"}},
      {[](json& j) { j["tables"]["b"]["sharding_type"] = "table_wise"; },
       {"field 'tables.b.shards' has 2 shards: a table_wise table is one shard"}},
      {[](json& j) { j["tables"]["a"]["compute_kernel"] = "gpu_magic"; },
       {"field 'tables.a.compute_kernel' is \"gpu_magic\", expected one of fused, fused_uvm"}},
      {[](json& j) { j["tables"]["c"]["compute_kernel"] = "fused"; },
       {"field 'tables.c.compute_kernel' is \"fused\", expected \"dense\" for a data_parallel "
        "table"}},
      {[](json& j) { j["tables"]["a"]["sharding_type"] = "diagonal"; },
       {"field 'tables.a.sharding_type' is \"diagonal\""}},
  });
}

// The table order, the prediction, sizes past int64 and the top level; a
// cut file and a missing one.
TEST(PlanFile, PredictionsOrderAndTheFileItselfAreChecked) {
  expect_faults_named({
      {[](json& j) { j["table_order"][1] = "zz"; },
       {"field 'table_order[1]' is \"zz\", which is not in 'tables'"}},
      {[](json& j) { j["predicted"]["devices"].erase(1); },
       {"field 'predicted.devices' has 1 devices, expected num_devices = 2"}},
      {[](json& j) { j["predicted"]["devices"][0]["compute_ms"] = nullptr; },
       {"field 'predicted.devices[0].compute_ms' is null, expected a number"}},
      {[](json& j) { j["predicted"]["devices"][1]["total_ms"] = -3.5; },
       {"field 'predicted.devices[1].total_ms' is -3.5, must be >= 0"}},
      {[](json& j) {
         j.erase("memory_model");  // a plan from before it: the prediction is checked
         j["device_memory_bytes"][0] = 1000;
       },
       {"field 'predicted.devices[0].memory_bytes' is 9480, past the device's capacity"}},
      {[](json& j) { j["device_memory_bytes"] = 5; },
       {"field 'device_memory_bytes' is 5, expected an array"}},
      {[](json& j) { j["tables"]["a"]["rows"] = json(uint64_t{1} << 63); },
       {"field 'tables.a.rows' is 9223372036854775808"}},
      {[](json& j) { j = json::array(); }, {"the top level is an array of 0 values"}},
  });
  EXPECT_NE(error_of("{\"format\": ", "cut.json").find("cut.json: not a plan file: not valid JSON"),
            std::string::npos);
  try {
    load_plan_file("/nonexistent/plan.json");
    FAIL() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plan.json"), std::string::npos) << e.what();
  }
}

// Parses, and where the damaged text still reads as a plan, diffs it against
// the original and renders both reports: any fault but an Error fails. True
// if the text read as a plan.
bool parse_damaged(const std::string& text, const PlanFile& original, bool expect_error) {
  try {
    const PlanFile p = parse_plan_file(text, "damaged.json");
    EXPECT_FALSE(expect_error) << "accepted a truncated file of " << text.size() << " bytes";
    try {
      const PlanDiff d = diff_plans(original, p);
      EXPECT_FALSE(plan_diff_text(d, true).empty());
      EXPECT_FALSE(plan_diff_json(d, true).dump().empty());
    } catch (const Error&) {
      // A damaged table name or shape: different tables, refused.
    }
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged.json"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an embshard::Error: " << e.what() << "\n" << text;
  }
  return false;
}

TEST(PlanFile, EveryTruncationIsAnError) {
  const std::string text = kSmallPlan;
  const PlanFile original = parse_plan_file(text, "small.json");
  for (size_t n = 0; n < text.size(); ++n) {
    // The closing brace is the last byte: every shorter prefix is cut JSON.
    parse_damaged(text.substr(0, n), original, true);
  }
}

TEST(PlanFile, ByteFlipsGiveAnErrorOrAPlan) {
  const std::string text = kSmallPlan;
  const PlanFile original = parse_plan_file(text, "small.json");
  const char replacements[] = {'0', '9', '-', '"', 'x', '{', ']', ':', '\0', '\xff'};
  int accepted = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : replacements) {
      if (text[i] == c) continue;
      std::string damaged = text;
      damaged[i] = c;
      accepted += parse_damaged(damaged, original, false);
    }
  }
  // Some flips leave a valid plan (a digit of a figure, a letter of a name):
  // the test reaches the diff, not only the parser.
  EXPECT_GT(accepted, 50);
}

// ---- The comparison on small hand-made plans -------------------------------

PlanFile small_plan() { return parse_plan_file(kSmallPlan, "small.json"); }

const TableComparison& table_of(const PlanDiff& d, const std::string& name) {
  for (const TableComparison& t : d.tables) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no table " + name);
}

TEST(PlanDiff, IdenticalPlansHaveNoChanges) {
  const PlanDiff d = diff_plans(small_plan(), small_plan());
  EXPECT_TRUE(d.changed.empty());
  EXPECT_EQ(d.moved_bytes, 0);
  EXPECT_DOUBLE_EQ(d.cost_ratio(), 1.0);
  EXPECT_EQ(table_of(d, "b").placement_a, "0:8 1:8");
  EXPECT_EQ(table_of(d, "c").placement_a, "0:all 1:all");
  EXPECT_EQ(table_of(d, "d").placement_a, "0:4[0:20] 1:4[20:40]");
  const std::string text = plan_diff_text(d, false);
  EXPECT_NE(text.find("tables changed: none of 4"), std::string::npos) << text;
  EXPECT_NE(text.find("B / A = 1.000 (the same)"), std::string::npos) << text;
}

TEST(PlanDiff, MovedBytesAndKindsOfChange) {
  const PlanFile a = small_plan();
  json j = json::parse(kSmallPlan);
  // a: moved whole to device 1.
  j["tables"]["a"]["ranks"] = {1};
  j["tables"]["a"]["shards"][0]["placement"] = "rank:1/cuda:1";
  // b: the halves swap devices.
  j["tables"]["b"]["ranks"] = {1, 0};
  j["tables"]["b"]["shards"][0]["placement"] = "rank:1/cuda:1";
  j["tables"]["b"]["shards"][1]["placement"] = "rank:0/cuda:0";
  // c: from a replica on both devices to table-wise on device 1.
  j["tables"]["c"] = json::parse(R"({"sharding_type": "table_wise", "compute_kernel": "fused",
      "ranks": [1], "shards": [{"shard_offsets": [0, 0], "shard_sizes": [10, 8],
      "placement": "rank:1/cuda:1"}], "rows": 10, "dim": 8, "memory_bytes": 360})");
  // d: rows cut at 30 instead of 20, same devices.
  j["tables"]["d"]["shards"][0]["shard_sizes"] = {30, 4};
  j["tables"]["d"]["shards"][1]["shard_offsets"] = {30, 0};
  j["tables"]["d"]["shards"][1]["shard_sizes"] = {10, 4};
  j["predicted"]["cost_ms"] = 7.0;
  const PlanDiff d = diff_plans(a, parse_plan_file(j.dump(), "b.json"));
  ASSERT_EQ(d.changed.size(), 4u);
  const TableComparison& ta = table_of(d, "a");
  EXPECT_TRUE(ta.change.devices && !ta.change.split && !ta.change.type);
  EXPECT_EQ(ta.moved_bytes, 100 * (16 * 4 + 4));
  EXPECT_EQ(ta.placement_b, "1:16");
  const TableComparison& tb = table_of(d, "b");
  EXPECT_TRUE(tb.change.devices && !tb.change.split);
  EXPECT_EQ(tb.moved_bytes, 2 * 50 * (8 * 4 + 4));
  EXPECT_EQ(tb.placement_b, "1:8 0:8");
  const TableComparison& tc = table_of(d, "c");
  EXPECT_TRUE(tc.change.type && !tc.change.devices);  // device 1 already held a copy
  EXPECT_EQ(tc.moved_bytes, 0);
  const TableComparison& td = table_of(d, "d");
  // Rows 20..30 go from device 1 to device 0.
  EXPECT_TRUE(td.change.split && td.change.devices && !td.change.type);
  EXPECT_EQ(td.moved_bytes, 10 * (4 * 4 + 4));
  EXPECT_EQ(td.placement_b, "0:4[0:30] 1:4[30:40]");
  EXPECT_EQ(d.moved_bytes, ta.moved_bytes + tb.moved_bytes + td.moved_bytes);
  // Device 1 receives a and b's first half; device 0 b's second half and rows 20..30 of d.
  EXPECT_EQ(d.devices[1].received_bytes, 6800 + 1800);
  EXPECT_EQ(d.devices[0].received_bytes, 1800 + 200);
  EXPECT_DOUBLE_EQ(d.cost_ratio(), 2.0);
  const json out = plan_diff_json(d, false);
  EXPECT_EQ(out["changed_tables"], json({"a", "b", "c", "d"}));
  EXPECT_EQ(out["tables"][0]["changes"], json({"devices"}));
  EXPECT_EQ(out["moved_bytes"], 6800 + 3600 + 200);
}

// A piece gathered from several pieces of another device receives each
// weight once and each row's optimizer state once.
TEST(PlanDiff, GatheredPiecesCountEachRowsStateOnce) {
  json ja = json::parse(kSmallPlan);
  ja["tables"]["b"]["ranks"] = {0, 0};  // both halves on device 0
  ja["tables"]["b"]["shards"][1]["placement"] = "rank:0/cuda:0";
  json jb = json::parse(kSmallPlan);
  jb["tables"]["b"] = json::parse(R"({"sharding_type": "table_wise", "compute_kernel": "fused",
      "ranks": [1], "shards": [{"shard_offsets": [0, 0], "shard_sizes": [50, 16],
      "placement": "rank:1/cuda:1"}], "rows": 50, "dim": 16, "memory_bytes": 3400})");
  const PlanDiff d =
      diff_plans(parse_plan_file(ja.dump(), "a.json"), parse_plan_file(jb.dump(), "b.json"));
  const TableComparison& tb = table_of(d, "b");
  EXPECT_EQ(tb.moved_bytes, 50 * (16 * 4 + 4));  // what device 1 now holds of b
  EXPECT_EQ(d.devices[1].received_bytes, 50 * (16 * 4 + 4));
}

TEST(PlanDiff, CliTableOrderMayDifferButNotTheTables) {
  json j = json::parse(kSmallPlan);
  j["table_order"] = {"d", "c", "b", "a"};
  EXPECT_TRUE(diff_plans(small_plan(), parse_plan_file(j.dump(), "r.json")).changed.empty());
  auto refusal = [](const json& other) {
    try {
      diff_plans(small_plan(), parse_plan_file(other.dump(), "other.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  json rows = json::parse(kSmallPlan);
  rows["tables"]["b"]["rows"] = 60;
  rows["tables"]["b"]["shards"][0]["shard_sizes"][0] = 60;
  rows["tables"]["b"]["shards"][1]["shard_sizes"][0] = 60;
  rows["tables"]["b"]["memory_bytes"] = 2 * 60 * (8 * 4 + 4);
  EXPECT_NE(refusal(rows).find("table 'b' is 50 rows x dim 16 in small.json but 60 rows x dim "
                               "16 in other.json"),
            std::string::npos)
      << refusal(rows);
  json renamed = json::parse(kSmallPlan);
  renamed["tables"]["e"] = renamed["tables"]["c"];
  renamed["tables"].erase("c");
  renamed["table_order"] = {"a", "b", "e", "d"};
  EXPECT_NE(refusal(renamed).find("table 'c' is in small.json but not in other.json"),
            std::string::npos)
      << refusal(renamed);
  json extra = json::parse(kSmallPlan);
  extra["tables"]["e"] = extra["tables"]["a"];
  extra["table_order"].push_back("e");
  EXPECT_NE(refusal(extra).find("table 'e' is in other.json but not in small.json"),
            std::string::npos)
      << refusal(extra);
}

// ---- Plans from the real CLI -----------------------------------------------

// The placement of each table as the file writes it, in a form that does not
// depend on shard order: the test's own reading, independent of the reader.
std::map<std::string, std::multiset<std::string>> placements(const json& plan) {
  std::map<std::string, std::multiset<std::string>> out;
  for (const auto& [name, t] : plan["tables"].items()) {
    std::multiset<std::string>& s = out[name];
    s.insert(t["sharding_type"].get<std::string>());
    if (t["shards"].is_null()) {
      for (const auto& r : t["ranks"]) s.insert("replica@" + r.dump());
      continue;
    }
    for (const auto& sh : t["shards"]) {
      s.insert(sh["shard_offsets"].dump() + sh["shard_sizes"].dump() +
               sh["placement"].get<std::string>());
    }
  }
  return out;
}

class DiffCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // The sanitizer build (scripts/test.sh) builds this test, not the CLI.
    if (!std::filesystem::exists(EMBSHARD_CLI_PATH)) GTEST_SKIP() << "no CLI";
  }
  // `embshard plan` of the built-in default workload (100 tables) on 4 devices.
  std::string plan(const std::string& name, const std::string& args) {
    const std::string path = dir_.file(name);
    const auto r = testing::run_cli("plan --devices 4 " + args + " -o " + path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path;
  }
  testing::ScratchDir dir_{"diff_cli"};
};

// The diff's facts, checked against the two files.
void expect_diff_matches_files(const PlanDiff& d, const std::string& path_a,
                               const std::string& path_b) {
  const json a = json::parse(testing::slurp(path_a)), b = json::parse(testing::slurp(path_b));
  const auto place_a = placements(a), place_b = placements(b);
  std::set<std::string> expected_changed;
  for (const auto& [name, s] : place_a) {
    if (s != place_b.at(name)) expected_changed.insert(name);
  }
  std::set<std::string> changed;
  for (int i : d.changed) changed.insert(d.tables[i].name);
  EXPECT_EQ(changed, expected_changed);
  ASSERT_EQ(d.tables.size(), a["tables"].size());
  // Every table in A's order.
  for (size_t i = 0; i < d.tables.size(); ++i) EXPECT_EQ(d.tables[i].name, a["table_order"][i]);
  // A table-wise table that moved moves all its bytes.
  int64_t moved = 0;
  for (const TableComparison& t : d.tables) {
    moved += t.moved_bytes;
    if (t.type_a == "table_wise" && t.type_b == "table_wise" && t.change.any()) {
      EXPECT_EQ(t.moved_bytes, a["tables"][t.name]["memory_bytes"].get<int64_t>()) << t.name;
    }
    if (!t.change.any()) {
      EXPECT_EQ(t.moved_bytes, 0) << t.name;
    }
  }
  EXPECT_EQ(d.moved_bytes, moved);
  int64_t received = 0;
  ASSERT_EQ(d.devices.size(), 4u);
  for (const DeviceComparison& c : d.devices) {
    received += c.received_bytes;
    const json& da = a["predicted"]["devices"][c.device];
    const json& db = b["predicted"]["devices"][c.device];
    ASSERT_TRUE(c.a && c.b);
    EXPECT_EQ(c.a->memory_bytes, da["memory_bytes"].get<int64_t>());
    EXPECT_EQ(c.b->memory_bytes, db["memory_bytes"].get<int64_t>());
    EXPECT_DOUBLE_EQ(c.delta().total_ms,
                     db["total_ms"].get<double>() - da["total_ms"].get<double>());
    EXPECT_DOUBLE_EQ(c.b->fwd_comm_ms, db["fwd_comm_ms"].get<double>());
  }
  EXPECT_EQ(received, d.moved_bytes);
  // The files' device memory is the sum of their shards' (rows x (4 cols + 4)).
  for (const json* plan : {&a, &b}) {
    std::vector<int64_t> memory(4, 0);
    for (const auto& [name, t] : (*plan)["tables"].items()) {
      ASSERT_FALSE(t["shards"].is_null()) << name;  // the default workload has no replicas
      for (const auto& s : t["shards"]) {
        const std::string place = s["placement"];  // "rank:N/cuda:N"
        const int device = std::stoi(place.substr(5));
        memory[device] +=
            s["shard_sizes"][0].get<int64_t>() * (4 * s["shard_sizes"][1].get<int64_t>() + 4);
      }
    }
    const PlanDiffSide& side = plan == &a ? d.a : d.b;
    for (int dev = 0; dev < 4; ++dev) {
      const DeviceComparison& c = d.devices[dev];
      EXPECT_EQ((plan == &a ? c.a : c.b)->memory_bytes, memory[dev]) << side.path << " " << dev;
    }
  }
  EXPECT_DOUBLE_EQ(d.cost_ratio(), b["predicted"]["cost_ms"].get<double>() /
                                       a["predicted"]["cost_ms"].get<double>());
}

TEST_F(DiffCli, TwoPlannersAndAPinnedTable) {
  const std::string a = plan("a.json", "--algo size_greedy");
  const std::string b = plan("b.json", "--algo neuroshard");
  const PlanDiff d = diff_plans(load_plan_file(a), load_plan_file(b));
  expect_diff_matches_files(d, a, b);
  EXPECT_FALSE(d.changed.empty());  // two planners of 100 tables do not agree on all of them
  EXPECT_GT(d.moved_bytes, 0);

  // Pinning one table to another device than the planner chose moves it there.
  const json jb = json::parse(testing::slurp(b));
  const int was = jb["tables"]["t000"]["ranks"][0];
  const int pin = (was + 1) % 4;
  const std::string c = plan("c.json", "--algo neuroshard --pin t000=" + std::to_string(pin));
  const PlanDiff pinned = diff_plans(load_plan_file(b), load_plan_file(c));
  expect_diff_matches_files(pinned, b, c);
  const TableComparison& t = table_of(pinned, "t000");
  EXPECT_TRUE(t.change.devices);
  EXPECT_EQ(t.placement_b, fmt::format("{}:{}", pin, t.dim));
  EXPECT_EQ(t.type_b, "table_wise");

  const PlanDiff same = diff_plans(load_plan_file(b), load_plan_file(b));
  EXPECT_TRUE(same.changed.empty());
  EXPECT_EQ(same.moved_bytes, 0);
}

TEST_F(DiffCli, CommandPrintsTextAndJsonAndRefusesBadInput) {
  const std::string a = plan("a.json", "--algo size_greedy");
  const std::string b = plan("b.json", "--algo neuroshard");
  const PlanDiff d = diff_plans(load_plan_file(a), load_plan_file(b));

  const auto text = testing::run_cli("diff " + a + " " + b);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find(fmt::format("tables changed: {} of 100", d.changed.size())),
            std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find(fmt::format("B / A = {:.3f}", d.cost_ratio())), std::string::npos)
      << text.output;
  const std::string first = d.tables[d.changed.front()].name;
  EXPECT_NE(text.output.find("\n" + first + " "), std::string::npos) << text.output;

  const auto as_json = testing::run_cli("diff --json " + a + " " + b);
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  const json j = json::parse(as_json.output);
  EXPECT_EQ(j["changed_tables"].size(), d.changed.size());
  EXPECT_EQ(j["tables"].size(), d.changed.size());
  EXPECT_EQ(j["moved_bytes"].get<int64_t>(), d.moved_bytes);
  const auto all = testing::run_cli("diff --json --all " + a + " " + b);
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(json::parse(all.output)["tables"].size(), 100u);

  const auto same = testing::run_cli("diff " + a + " " + a);
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("tables changed: none of 100"), std::string::npos) << same.output;

  // Plans of other tables are refused, naming the first table that differs.
  testing::spit(dir_.file("tables.json"),
                R"({"batch_size": 4096, "tables": [{"name": "t000", "rows": 10, "dim": 16}]})");
  const std::string other =
      plan("other.json", "--tables " + dir_.file("tables.json") + " --algo size_greedy");
  const auto refused = testing::run_cli("diff " + a + " " + other);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("plan different tables: table 't000' is "), std::string::npos)
      << refused.output;

  // A damaged file: the error names the file and the field.
  json broken = json::parse(testing::slurp(b));
  broken["tables"]["t007"]["shards"][0]["placement"] = "rank:4/cuda:4";
  testing::spit(dir_.file("broken.json"), broken.dump());
  const auto bad = testing::run_cli("diff " + a + " " + dir_.file("broken.json"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find(dir_.file("broken.json") + ": field 'tables.t007.shards[0].placement'"),
            std::string::npos)
      << bad.output;
  const auto missing = testing::run_cli("diff " + a + " " + dir_.file("none.json"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find(dir_.file("none.json")), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace embshard
