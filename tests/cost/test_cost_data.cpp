// The cost data files (bench compute records) as the models read them:
// bad records skipped and counted, header fields named, gzip read by
// content, pieces checked; accuracy figures and their report.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost_test_util.h"
#include "embshard/cost/accuracy_report.h"
#include "embshard/cost/cost_data.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "support/pt_writer.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

TEST(CostData, BadRecordsAreSkippedAndCounted) {
  ScratchDir dir("cost_data_bad");
  const std::string path = dir.file("compute.jsonl");
  testing::write_synth_compute(path, 90, 1);
  std::string text = read_file(path);
  // Line 3 gets a negative ms, line 5 is garbage, line 7 a null ms, line 9 no
  // tables, line 11 a table's rows as text, line 13 no rows, line 15 a short
  // histogram, and the last line is torn.
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(text.substr(at, nl - at));
  }
  auto r = nlohmann::json::parse(lines[2]);
  r["ms"] = -1.0;
  lines[2] = r.dump();
  lines[4] = "{\"sample\": 3, \"tab";
  r = nlohmann::json::parse(lines[6]);
  r["ms"] = nullptr;  // how JSON spells NaN
  lines[6] = r.dump();
  r = nlohmann::json::parse(lines[8]);
  r.erase("tables");
  lines[8] = r.dump();
  r = nlohmann::json::parse(lines[10]);
  r["tables"][0]["rows"] = "many";
  lines[10] = r.dump();
  r = nlohmann::json::parse(lines[12]);  // line 13: a table of no rows
  r["tables"][0]["rows"] = 0;
  lines[12] = r.dump();
  r = nlohmann::json::parse(lines[14]);  // line 15: a histogram cut short
  r["tables"][0]["row_reuse_histogram"] = {0.5, 0.5};
  lines[14] = r.dump();
  text.clear();
  for (const auto& l : lines) text += l + "\n";
  text += "{\"sample\": 90, \"tables\": [";
  write_file_atomic(path, text);
  const ComputeData data = load_compute_data(path);
  ASSERT_EQ(data.problems.size(), 8u);
  EXPECT_EQ(data.problems[0].line, 3);
  EXPECT_NE(data.problems[0].reason.find("ms"), std::string::npos);
  EXPECT_EQ(data.problems[1].line, 5);
  EXPECT_EQ(data.problems[2].line, 7);
  EXPECT_EQ(data.problems[3].line, 9);
  EXPECT_EQ(data.problems[2].reason, "field '/ms' is null, expected a number");
  EXPECT_EQ(data.problems[3].reason, "field '/tables' is missing");
  EXPECT_EQ(data.problems[4].line, 11);
  EXPECT_EQ(data.problems[4].reason, "field '/tables/0/rows' is \"many\", expected a whole number");
  EXPECT_EQ(data.problems[5].line, 13);
  EXPECT_NE(data.problems[5].reason.find("/tables/0: rows 0"), std::string::npos);
  EXPECT_EQ(data.problems[6].line, 15);
  EXPECT_EQ(data.problems[6].reason,
            "field '/tables/0/row_reuse_histogram' holds 2 shares, expected 17");
  EXPECT_EQ(data.problems[7].line, 92);
  EXPECT_EQ(data.records.size(), 83u);
  // Too many bad records: the file is refused, not trained on.
  LoadOptions strict_share;
  strict_share.max_bad_share = 0.05;
  EXPECT_THROW(load_compute_data(path, strict_share), Error);
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  EXPECT_THROW(load_compute_data(path, strict), Error);
  EXPECT_EQ(detect_cost_data_kind(path), CostDataKind::kCompute);
  EXPECT_THROW(load_comm_data(path), Error);
}

// A header's counts are named with the value found, or said to be missing.
TEST(CostData, HeaderCountsAreNamed) {
  ScratchDir dir("cost_data_header");
  const std::string path = dir.file("compute.jsonl");
  testing::write_synth_compute(path, 5, 1);
  const std::string text = read_file(path);
  const auto header = nlohmann::json::parse(text.substr(0, text.find('\n')));
  const std::string rest = text.substr(text.find('\n'));
  const std::pair<nlohmann::json, std::string> cases[] = {
      {nullptr, "the header has no field 'batch_size'"},
      {"2048", "header field 'batch_size' is \"2048\", expected an integer in 1..1099511627776"},
      {0, "header field 'batch_size' is 0, expected"},
      {18446744073709551615ull, "header field 'batch_size' is 18446744073709551615, expected"}};
  for (const auto& [value, message] : cases) {
    auto h = header;
    if (value.is_null()) {
      h.erase("batch_size");
    } else {
      h["batch_size"] = value;
    }
    write_file_atomic(path, h.dump() + rest);
    const std::string e = testing::error_of([&] { load_compute_data(path); });
    EXPECT_EQ(e.rfind(path + ": " + message, 0), 0u) << e;
  }
}

TEST(CostData, GzipFilesReadAsThePlainOnes) {
  ScratchDir dir("cost_data_gzip");
  testing::write_synth_compute(dir.file("compute.jsonl"), 12, 3);
  testing::gzip_file(dir.file("compute.jsonl"), dir.file("compute.jsonl.gz"));
  const ComputeData plain = load_compute_data(dir.file("compute.jsonl"));
  const ComputeData packed = load_compute_data(dir.file("compute.jsonl.gz"));
  ASSERT_EQ(packed.records.size(), plain.records.size());
  for (size_t i = 0; i < plain.records.size(); ++i) {
    EXPECT_EQ(packed.records[i].ms, plain.records[i].ms);
    EXPECT_EQ(packed.records[i].tables.size(), plain.records[i].tables.size());
  }
  EXPECT_EQ(detect_cost_data_kind(dir.file("compute.jsonl.gz")), CostDataKind::kCompute);
}

TEST(CostData, PiecesAreReadAndChecked) {
  ScratchDir dir("cost_data_pieces");
  const std::string path = dir.file("compute.jsonl");
  testing::write_synth_compute(path, 80, 5);
  testing::edit_records(path, [](int k, nlohmann::json& r) {
    nlohmann::json& t = r["tables"][0];
    if (k == 0) t["row_offset"] = 100;
    if (k == 1) t["batch_slice"] = {1, 4};
    if (k == 2) t["row_offset"] = -1;
    if (k == 3) t["batch_slice"] = {4, 4};
    if (k == 4) t["batch_slice"] = "half";
    if (k == 5) t["row_offset"] = 1.5;
    if (k == 6) t["batch_slice"] = {0.5, 2};
    if (k == 7) t["row_offset"] = "x";
  });
  const ComputeData data = load_compute_data(path);
  ASSERT_EQ(data.records.size(), 74u);
  ASSERT_EQ(data.problems.size(), 6u);
  // Lines 4-9 (records 2-7): each names its field and value.
  const char* expected[] = {"row_offset is -1", "batch_slice is [4,4]", "batch_slice is \"half\"",
                            "row_offset is 1.5", "batch_slice is [0.5,2]", "row_offset is \"x\""};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(data.problems[i].line, static_cast<int64_t>(i + 4));
    EXPECT_NE(data.problems[i].reason.find(expected[i]), std::string::npos)
        << data.problems[i].reason;
  }
  const TableFeatures& row = data.records[0].tables[0];
  EXPECT_TRUE(row.row_piece);
  EXPECT_EQ(row.source_row_offset, 100);
  const TableFeatures& slice = data.records[1].tables[0];
  EXPECT_FALSE(slice.row_piece);
  EXPECT_EQ(slice.batch_slice, 1);
  EXPECT_EQ(slice.batch_slices, 4);
  EXPECT_FALSE(data.records[2].tables[0].row_piece);
  EXPECT_EQ(data.records[2].tables[0].batch_slices, 1);
}

// data_type: absent reads fp32; a name of another case, an unknown type or a
// number is a bad record naming the field and value.
TEST(CostData, DataTypesAreReadAndChecked) {
  ScratchDir dir("cost_data_types");
  const std::string path = dir.file("compute.jsonl");
  testing::write_synth_compute(path, 80, 5);
  testing::edit_records(path, [](int k, nlohmann::json& r) {
    nlohmann::json& t = r["tables"][0];
    if (k == 0) t["data_type"] = "fp16";
    if (k == 1) t["data_type"] = "bf16";
    if (k == 2) t["data_type"] = "FP16";
    if (k == 3) t["data_type"] = "int2";
    if (k == 4) t["data_type"] = 16;
  });
  const ComputeData data = load_compute_data(path);
  ASSERT_EQ(data.records.size(), 77u);
  ASSERT_EQ(data.problems.size(), 3u);
  const char* expected[] = {"data_type' is \"FP16\"", "data_type' is \"int2\"", "data_type' is 16"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(data.problems[i].line, static_cast<int64_t>(i + 4));
    EXPECT_NE(data.problems[i].reason.find(expected[i]), std::string::npos)
        << data.problems[i].reason;
  }
  EXPECT_EQ(data.records[0].tables[0].data_type, DataType::kFp16);
  EXPECT_EQ(data.records[1].tables[0].data_type, DataType::kBf16);
  EXPECT_EQ(data.records[2].tables[0].data_type, DataType::kFp32);
}

TEST(CostData, AccuracyFigures) {
  const std::vector<double> measured = {1, 2, 4, 8, 16};
  const std::vector<double> predicted = {1.1, 2, 3.6, 8, 17.6};
  const AccuracyFigures f = accuracy(predicted, measured);
  EXPECT_NEAR(f.mape_pct, (10 + 0 + 10 + 0 + 10) / 5.0, 1e-9);
  EXPECT_NEAR(f.p90_ape_pct, 10, 1e-9);
  EXPECT_NEAR(f.kendall_tau, 1.0, 1e-12);
  const std::vector<double> reversed = {16, 8, 4, 2, 1};
  EXPECT_NEAR(kendall_tau_b(reversed, measured), -1.0, 1e-12);
  const std::vector<double> one_swap = {1, 2, 8, 4, 16};
  EXPECT_NEAR(kendall_tau_b(one_swap, measured), 0.8, 1e-12);  // (9 - 1) / 10
}

TEST(CostData, ScatterSvgAndReport) {
  ScratchDir dir("cost_report");
  Comparison c{"compute_test", "compute <test>", {1, 2, 30}, {1.1, 2, 25}};
  const std::string svg = scatter_svg(c);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("MAPE"), std::string::npos);
  EXPECT_NE(svg.find("&lt;test&gt;"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<'), std::count(svg.begin(), svg.end(), '>'));
  const auto figures = write_accuracy_report(dir.path().string(), "t", {c}, {"a note"});
  EXPECT_TRUE(file_exists(dir.file("report.md")));
  EXPECT_TRUE(file_exists(dir.file("compute_test.svg")));
  EXPECT_GT(figures["compute_test"]["mape_pct"].get<double>(), 0);
}

}  // namespace
}  // namespace embshard
