// Per-table data types in planning: table specs, memory per type and
// optimizer, the plan JSON (version 2) read back and checked, and the
// report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embshard/plan/plan_file.h"
#include "embshard/plan/report.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/workload/table_specs.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

std::string specs_with(const std::string& data_type) {
  return R"({"batch_size": 512, "tables": [{"name": "a", "rows": 1000, "dim": 16},
             {"name": "b", "rows": 500, "dim": 8, "data_type": )" +
         data_type + "}]}";
}

TEST(DataTypes, TableSpecsReadTorchRecsNamesAndRefuseOthers) {
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, DataType>>{{"\"fp16\"", DataType::kFp16},
                                                     {"\"BF16\"", DataType::kBf16},
                                                     {"\"DataType.INT8\"", DataType::kInt8},
                                                     {"\"int4\"", DataType::kInt4}}) {
    const Workload w = parse_table_specs(specs_with(text), "t.json");
    EXPECT_EQ(w.tables[0].data_type, DataType::kFp32);
    EXPECT_EQ(w.tables[1].data_type, want) << text;
  }
  const std::string bad =
      testing::error_of([] { parse_table_specs(specs_with("\"int2\""), "t.json"); });
  for (const char* part : {"t.json", "tables[1]", "'b'", "data_type", "'int2'", "fp16"}) {
    EXPECT_NE(bad.find(part), std::string::npos) << part << " in: " << bad;
  }
  const std::string number =
      testing::error_of([] { parse_table_specs(specs_with("16"), "t.json"); });
  EXPECT_NE(number.find("field 'data_type' is 16"), std::string::npos) << number;
}

TEST(DataTypes, BytesPerTypeAndOptimizer) {
  TableSpec t;
  t.rows = 1000;
  t.dim = 9;
  const std::pair<DataType, int64_t> bytes[] = {{DataType::kFp32, 36},
                                                {DataType::kFp16, 18},
                                                {DataType::kBf16, 18},
                                                {DataType::kInt8, 17},
                                                {DataType::kInt4, 9}};
  for (const auto& [type, row] : bytes) {
    t.data_type = type;
    EXPECT_EQ(t.weight_bytes(), 1000 * row) << data_type_name(type);
  }
  MemoryModel adagrad, adam{0, 8}, sgd{0, 0};
  EXPECT_EQ(adagrad.shard_bytes(DataType::kFp16, 10, 8), 10 * (16 + 4));
  EXPECT_EQ(adam.shard_bytes(DataType::kFp16, 10, 8), 10 * (16 + 64));
  EXPECT_EQ(sgd.shard_bytes(DataType::kInt8, 10, 8), 10 * 16);
}

TEST(DataTypes, QuantizedTablesAreRefusedForTraining) {
  std::vector<TableSpec> tables = testing::random_tables(3, 1);
  tables[2].data_type = DataType::kInt4;
  const std::string message = testing::error_of(
      [&] { make_task(tables, 4096, std::vector<int64_t>(2, int64_t{1} << 40), {}); });
  EXPECT_NE(message.find("table '" + tables[2].name + "' is int4"), std::string::npos) << message;
  EXPECT_NE(message.find("forward-only"), std::string::npos) << message;
}

// A table too large for the device in fp32 fits in fp16; the plan's JSON
// carries the types and reads back with its memory checked by type.
TEST(DataTypes, HalfTablesFitWhereFp32OnesDoNotAndThePlanReadsBack) {
  std::vector<TableSpec> tables = testing::random_tables(6, 3);
  for (TableSpec& t : tables) t.dim = 32;
  tables[0].rows = 100'000;
  TaskConstraints whole;
  whole.no_split = {tables[0].name};
  const int64_t cap = MemoryModel{}.shard_bytes(DataType::kFp16, tables[0].rows, 32) * 12 / 10;
  EXPECT_NE(testing::error_of([&] {
              make_task(tables, 4096, {cap, cap, cap}, whole);
            }).find("cannot fit"),
            std::string::npos);
  tables[0].data_type = DataType::kFp16;
  tables[1].data_type = DataType::kBf16;
  const PlanTask task = make_task(tables, 4096, {cap, cap, cap}, whole);
  testing::ToyCostModel model;
  auto planner = create_planner("neuroshard", {});
  const PlanResult r = make_plan(*planner, task, model);
  const nlohmann::json j = plan_to_json(task, r);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["tables"][tables[0].name]["data_type"], "fp16");
  EXPECT_EQ(j["tables"][tables[2].name]["data_type"], "fp32");
  const PlanFile back = parse_plan_file(j.dump(), "p.json");
  EXPECT_EQ(back.tables[0].data_type, DataType::kFp16);
  EXPECT_EQ(back.tables[1].data_type, DataType::kBf16);
  EXPECT_EQ(back.tables[0].memory_bytes, task.table_bytes(0));
  nlohmann::json wrong = j;  // claimed fp32: its memory_bytes no longer add up
  wrong["tables"][tables[0].name]["data_type"] = "fp32";
  EXPECT_NE(
      testing::error_of([&] { parse_plan_file(wrong.dump(), "p.json"); }).find("memory_bytes"),
      std::string::npos);
  wrong["tables"][tables[0].name]["data_type"] = "fp8";
  EXPECT_NE(testing::error_of([&] {
              parse_plan_file(wrong.dump(), "p.json");
            }).find("tables." + tables[0].name + ".data_type"),
            std::string::npos);
  const std::string report = plan_report(task, r, true);
  EXPECT_NE(report.find("data types: 4 fp32, 1 fp16, 1 bf16"), std::string::npos) << report;
}

}  // namespace
}  // namespace embshard
