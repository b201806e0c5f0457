#include <gtest/gtest.h>

#include <random>

#include "embshard/util/error.h"
#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;
using testing::slurp;
using testing::spit;

TableTrace random_trace(std::mt19937_64& rng, int64_t batch, int64_t rows, int max_bag) {
  TableTrace t;
  t.offsets.push_back(0);
  std::uniform_int_distribution<int> bag(0, max_bag);
  std::uniform_int_distribution<int64_t> row(0, rows - 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int n = bag(rng);
    for (int i = 0; i < n; ++i) t.indices.push_back(row(rng));
    t.offsets.push_back(static_cast<int64_t>(t.indices.size()));
  }
  return t;
}

std::vector<TableTrace> write_random(const std::string& path, uint32_t index_bytes,
                                     int tables, int64_t batch) {
  std::mt19937_64 rng(42);
  std::vector<TableTrace> traces;
  TraceWriter writer(path, tables, batch, index_bytes);
  for (int t = 0; t < tables; ++t) {
    traces.push_back(random_trace(rng, batch, t == 0 ? 1 : 1000 + t, t == 1 ? 0 : 9));
    writer.add_table(traces.back());
  }
  writer.finish();
  return traces;
}

TEST(Trace, RoundTripsBothIndexWidths) {
  ScratchDir dir("trace_roundtrip");
  for (uint32_t bytes : {4u, 8u}) {
    const std::string path = dir.file("t" + std::to_string(bytes) + ".bin");
    const auto traces = write_random(path, bytes, 5, 33);
    TraceReader reader(path);
    EXPECT_EQ(reader.info().num_tables, 5u);
    EXPECT_EQ(reader.info().batch_size, 33u);
    EXPECT_EQ(reader.info().index_bytes, bytes);
    for (int t = 0; t < 5; ++t) {
      const TableTrace back = reader.read_table(t);
      EXPECT_EQ(back.offsets, traces[t].offsets) << "table " << t;
      EXPECT_EQ(back.indices, traces[t].indices) << "table " << t;
    }
    EXPECT_THROW(reader.read_table(5), Error);
  }
}

TEST(Trace, WriterRejectsBadTracesAndLeavesNoFile) {
  ScratchDir dir("trace_bad_writer");
  const std::string path = dir.file("t.bin");
  {
    TraceWriter writer(path, 1, 2, 4);
    TableTrace bad{{0, 2, 1}, {1, 2}};  // decreasing offsets
    EXPECT_THROW(writer.add_table(bad), Error);
    TableTrace wide{{0, 1, 1}, {int64_t{1} << 40}};  // does not fit int32
    EXPECT_THROW(writer.add_table(wide), Error);
    TableTrace wrong_batch{{0, 1}, {1}};
    EXPECT_THROW(writer.add_table(wrong_batch), Error);
    EXPECT_THROW(writer.finish(), Error);  // no table written
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // no temporary left behind
}

TEST(Trace, ValidateNamesFieldAndValue) {
  TableTrace t{{0, 1, 3}, {0, 7, 2}};
  try {
    validate_trace(t, 5, "ctx");
    FAIL() << "index 7 >= rows 5 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("indices[1] = 7"), std::string::npos) << e.what();
  }
  TableTrace short_end{{0, 1, 2}, {0, 1, 2}};
  EXPECT_THROW(validate_trace(short_end, 5, "ctx"), Error);
  TableTrace nonzero_start{{1, 2}, {0, 1}};
  EXPECT_THROW(validate_trace(nonzero_start, 5, "ctx"), Error);
}

// Every truncation and every single-byte corruption is caught with an Error,
// never a crash or silently wrong data.
TEST(Trace, DetectsTruncationAndCorruption) {
  ScratchDir dir("trace_corrupt");
  const std::string good = dir.file("good.bin");
  const auto traces = write_random(good, 4, 3, 7);
  const std::string bytes = slurp(good);
  const std::string bad = dir.file("bad.bin");

  auto read_everything = [&](const std::string& path) {
    TraceReader reader(path);
    for (uint64_t t = 0; t < reader.info().num_tables; ++t) {
      const TableTrace back = reader.read_table(t);
      if (back.offsets != traces[t].offsets || back.indices != traces[t].indices) {
        throw std::runtime_error("silently wrong data");
      }
    }
  };
  for (size_t len = 0; len < bytes.size(); len += 3) {
    spit(bad, bytes.substr(0, len));
    EXPECT_THROW(read_everything(bad), Error) << "truncated to " << len;
  }
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    std::string corrupt = bytes;
    corrupt[pos] = static_cast<char>(corrupt[pos] ^ 0x5a);
    spit(bad, corrupt);
    if (pos >= 56 && pos < 64) continue;  // reserved header bytes are not data
    EXPECT_THROW(read_everything(bad), Error) << "byte " << pos << " flipped";
  }
}

TEST(Trace, WrongMagicAndVersionAreNamed) {
  ScratchDir dir("trace_magic");
  const std::string path = dir.file("t.bin");
  write_random(path, 8, 1, 3);
  std::string bytes = slurp(path);
  bytes[0] = 'X';
  spit(path, bytes);
  try {
    TraceReader reader(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Workload, SpecsRoundTripAndValidate) {
  ScratchDir dir("workload_specs");
  Workload w;
  w.batch_size = 16;
  w.source = "test";
  TableSpec t;
  t.name = "t0";
  t.rows = 100;
  t.dim = 8;
  t.pooling_factor = 2.5;
  t.unique_rows = 10;
  t.row_reuse[0] = 1.0;
  t.lookup_reuse[3] = 1.0;
  w.tables.push_back(t);
  save_workload_specs(w, dir.path().string());
  const Workload back = load_workload(dir.path().string());
  ASSERT_EQ(back.tables.size(), 1u);
  EXPECT_EQ(back.tables[0].name, "t0");
  EXPECT_EQ(back.tables[0].rows, 100);
  EXPECT_EQ(back.tables[0].dim, 8);
  EXPECT_DOUBLE_EQ(back.tables[0].pooling_factor, 2.5);
  EXPECT_EQ(back.tables[0].row_reuse, t.row_reuse);
  EXPECT_FALSE(back.trace_file.has_value());

  const std::string file = dir.file("tables.json");
  const std::string text = slurp(file);
  auto expect_error = [&](const std::string& from, const std::string& to,
                          const std::string& needle) {
    std::string edited = text;
    const auto at = edited.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    edited.replace(at, from.size(), to);
    spit(file, edited);
    try {
      load_workload(dir.path().string());
      ADD_FAILURE() << "accepted " << to;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("\"dim\": 8", "\"dim\": 0", "'dim' is 0");
  expect_error("\"dim\": 8", "\"dim\": -3", "'dim' is -3");
  expect_error("\"rows\": 100", "\"rows\": \"many\"", "'rows'");
  expect_error("\"pooling_factor\": 2.5", "\"pooling_factor\": NaN", "not valid JSON");
  expect_error("\"pooling_factor\": 2.5", "\"pooling_factor\": \"NaN\"", "pooling_factor");
  expect_error("\"version\": 1", "\"version\": 9", "'version' is 9");
  expect_error("\"batch_size\": 16", "\"batch_size\": 16,", "not valid JSON");
  // A name twice: the file and both entries named.
  w.tables.push_back(t);
  save_workload_specs(w, dir.path().string());
  EXPECT_EQ(testing::error_of([&] { load_workload(dir.path().string()); })
                .rfind(file + ": tables[1]: field 'name' is 't0', as tables[0]'s: every table "
                              "needs its own name",
                       0),
            0u);
}

TEST(Workload, TraceMustAgreeWithSpecs) {
  ScratchDir dir("workload_trace");
  write_random(dir.file("trace.bin"), 8, 2, 5);
  Workload w;
  w.batch_size = 5;
  w.trace_file = "trace.bin";
  TableSpec t;
  t.name = "a";
  t.rows = 2000;
  t.dim = 4;
  w.tables = {t};  // the trace holds 2 tables
  save_workload_specs(w, dir.path().string());
  EXPECT_THROW(load_workload(dir.path().string()), Error);
  t.name = "b";
  w.tables.push_back(t);
  save_workload_specs(w, dir.path().string());
  EXPECT_EQ(load_workload(dir.path().string()).tables.size(), 2u);
}

}  // namespace
}  // namespace embshard
