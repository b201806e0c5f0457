#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "embshard/bench/comm.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/record_file.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::ScratchDir;
using testing::slurp;
using testing::spit;

TEST(CommBench, DrawsAreDeterministicAndConsistent) {
  CommBenchOptions o;
  o.seed = 7;
  o.max_delay_ms = 3.5;
  o.tables_per_device = {2, 6};
  bool some_unbalanced = false, some_differ = false;
  for (int n : {1, 2, 4, 8}) {
    for (int64_t i = 0; i < 40; ++i) {
      const CommSample a = draw_comm_sample(o, n, i), b = draw_comm_sample(o, n, i);
      EXPECT_EQ(a.table_dims, b.table_dims);
      EXPECT_EQ(a.table_device, b.table_device);
      EXPECT_EQ(a.dim_sums, b.dim_sums);
      EXPECT_EQ(a.delays_ms, b.delays_ms);
      some_differ |= a.dim_sums != draw_comm_sample(o, n, i + 1).dim_sums;
      ASSERT_EQ(a.dim_sums.size(), static_cast<size_t>(n));
      ASSERT_EQ(a.delays_ms.size(), static_cast<size_t>(n));
      EXPECT_GE(a.table_dims.size(), static_cast<size_t>(2 * n));
      EXPECT_LE(a.table_dims.size(), static_cast<size_t>(6 * n));
      // The dim sums are exactly the drawn tables' dims, device by device.
      std::vector<int64_t> sums(n, 0);
      for (size_t t = 0; t < a.table_dims.size(); ++t) {
        EXPECT_NE(std::find(o.dims.begin(), o.dims.end(), a.table_dims[t]), o.dims.end());
        ASSERT_GE(a.table_device[t], 0);
        ASSERT_LT(a.table_device[t], n);
        sums[a.table_device[t]] += a.table_dims[t];
      }
      EXPECT_EQ(sums, a.dim_sums);
      EXPECT_EQ(std::accumulate(a.dim_sums.begin(), a.dim_sums.end(), int64_t{0}),
                std::accumulate(a.table_dims.begin(), a.table_dims.end(), int64_t{0}));
      EXPECT_EQ(*std::min_element(a.delays_ms.begin(), a.delays_ms.end()), 0.0);
      EXPECT_LE(*std::max_element(a.delays_ms.begin(), a.delays_ms.end()), o.max_delay_ms);
      const auto [lo, hi] = std::minmax_element(a.dim_sums.begin(), a.dim_sums.end());
      some_unbalanced |= *hi > 2 * *lo + 128;
    }
  }
  EXPECT_TRUE(some_differ);
  EXPECT_TRUE(some_unbalanced);
  o.seed = 8;
  EXPECT_NE(draw_comm_sample(o, 4, 0).table_dims,
            draw_comm_sample(CommBenchOptions{}, 4, 0).table_dims);
}

TEST(CommBench, BadOptionsNameTheFlag) {
  auto fails = [](CommBenchOptions o, int n, const std::string& needle) {
    try {
      check_comm_options(o, n);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  CommBenchOptions o;
  EXPECT_NO_THROW(check_comm_options(o, 4));
  fails(o, 3, "--batch is 4096");
  CommBenchOptions bad = o;
  bad.dims = {4, 0};
  fails(bad, 4, "--dims holds 0");
  bad = o;
  bad.tables_per_device = {5, 2};
  fails(bad, 4, "--tables-per-device is '5,2'");
  bad = o;
  bad.max_delay_ms = -1;
  fails(bad, 4, "--max-delay-ms is -1");
  bad = o;
  bad.timeout_s = 0;
  fails(bad, 4, "--timeout-s is 0");
  bad = o;
  bad.passes = 0;
  fails(bad, 4, "--passes is 0");
  bad = o;
  bad.pass_block_s = -1;
  fails(bad, 4, "--pass-block-s is -1");
  bad = o;
  bad.probe_dim = 0;
  fails(bad, 4, "--probe-dim is 0");
}

TEST(CommBench, HeaderHoldsTheIdentity) {
  CommBenchOptions o;
  const json h = comm_bench_header(o, 4, {"a", "a", "b", "b"}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(h["format"], "embshard-comm-costs");
  EXPECT_EQ(h["version"], 2);
  EXPECT_EQ(h["probe"]["reference_ms"].size(), 4u);
  EXPECT_EQ(h["num_devices"], 4);
  EXPECT_EQ(h["machine"]["rank_hosts"].size(), 4u);
  // One pass writes no 'passes', as the files from before --passes.
  EXPECT_FALSE(h.contains("passes"));
  o.passes = 3;
  const json h3 = comm_bench_header(o, 4, {"a", "a", "b", "b"}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(h3["passes"], 3);
  for (const std::string& field : comm_bench_must_match()) EXPECT_TRUE(h3.contains(field)) << field;
}

// Its references are read back; another command's file is named as such.
TEST(CommBench, MpiReferencesComeFromCommFilesOnly) {
  CommBenchOptions o;
  o.batch = 512;
  json h = comm_bench_header(o, 2, {"a", "a"}, {0.1, 0.2});
  EXPECT_EQ(exchange_references_of(h, "c.jsonl", 2, 512, kReferenceExchangeDim),
            (std::vector<double>{0.1, 0.2}));
  // Another reference exchange's time is another scale.
  EXPECT_NE(testing::error_of([&] { exchange_references_of(h, "c.jsonl", 2, 512, 512); })
                .find("c.jsonl: field 'probe.exchange_dim' is 64, the run's reference exchange "
                      "has 512 columns"),
            std::string::npos);
  o.probe_dim = 512;
  EXPECT_EQ(exchange_references_of(comm_bench_header(o, 2, {"a", "a"}, {0.3, 0.4}), "c.jsonl", 2,
                                   512, 512),
            (std::vector<double>{0.3, 0.4}));
  // A field of another type is named (an edited file).
  json edited = h;
  edited["probe"]["reference_ms"] = "fast";
  EXPECT_NE(
      testing::error_of([&] {
        exchange_references_of(edited, "c.jsonl", 2, 512, 64);
      }).find("c.jsonl: field '/probe/reference_ms' is \"fast\", expected an array of numbers"),
      std::string::npos);
  h["format"] = "embshard-compute-costs";
  EXPECT_NE(testing::error_of([&] { exchange_references_of(h, "c.jsonl", 2, 512, 64); })
                .find("c.jsonl: format is \"embshard-compute-costs\""),
            std::string::npos);
}

// --- integration: the CLI under mpirun -----------------------------------

struct Timed {
  CommandResult result;
  double seconds = 0;
};

Timed run_mpi(int ranks, const std::string& args) {
  const auto start = std::chrono::steady_clock::now();
  Timed timed;
  timed.result = testing::run_mpi_cli(ranks, "bench comm " + args);
  timed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return timed;
}

std::string small_args(const std::string& out, int samples) {
  return "--out " + out + " --samples " + std::to_string(samples) +
         " --batch 512 --warmup 1 --repeats 3 --max-delay-ms 2 --tables-per-device 1,4 --seed 5";
}

void expect_clean_records(const std::vector<json>& records, size_t count, int ranks) {
  ASSERT_EQ(records.size(), count);
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    EXPECT_EQ(r["sample"], static_cast<int>(i));
    ASSERT_EQ(r["fwd_ms"].size(), static_cast<size_t>(ranks));
    ASSERT_EQ(r["bwd_ms"].size(), static_cast<size_t>(ranks));
    EXPECT_EQ(r["dim_sums"].size(), static_cast<size_t>(ranks));
    EXPECT_EQ(r["delays_ms"].size(), static_cast<size_t>(ranks));
    for (int k = 0; k < ranks; ++k) {
      EXPECT_GT(r["fwd_ms"][k].get<double>(), 0.0) << r.dump();
      EXPECT_GT(r["bwd_ms"][k].get<double>(), 0.0) << r.dump();
    }
  }
}

// The records' table of a file edited by hand names the record and field.
TEST(CommBench, TableOfAnEditedFileNamesTheRecord) {
  ScratchDir dir("comm_table");
  const std::string text =
      read_file_gunzip(std::string(EMBSHARD_SOURCE_DIR) + "/data/cpu/comm_n4_b2048.jsonl.gz");
  std::vector<std::string> lines;
  for (size_t at = 0; lines.size() < 4;) {
    const size_t end = text.find('\n', at);
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  const std::string path = dir.file("comm.jsonl");
  spit(path, lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[3] + "\n");
  EXPECT_NE(comm_records_table(path, 2).find("fwd ms (ranks)"), std::string::npos);
  for (const auto& [field, value, said] :
       {std::tuple<const char*, json, const char*>{"delays_ms", nullptr,
                                                   "field '/delays_ms' is missing"},
        {"fwd_ms", json::array(), "field '/fwd_ms' is empty"},
        {"dim_sums", json::array(), "field '/dim_sums' is empty"},
        {"bwd_ms", "slow", "field '/bwd_ms' is \"slow\", expected an array of numbers"}}) {
    json edited = json::parse(lines[2]);
    if (value.is_null()) {
      edited.erase(field);
    } else {
      edited[field] = value;
    }
    spit(path, lines[0] + "\n" + lines[1] + "\n" + edited.dump() + "\n" + lines[3] + "\n");
    const std::string e = testing::error_of([&] { comm_records_table(path, 2); });
    EXPECT_NE(e.find(path + ": record 2: "), std::string::npos) << e;
    EXPECT_NE(e.find(said), std::string::npos) << e;
  }
  // The header's batch of another type.
  json header = json::parse(lines[0]);
  header["batch_size"] = "2048";
  spit(path, header.dump() + "\n" + lines[1] + "\n");
  EXPECT_NE(testing::error_of([&] { comm_records_table(path, 2); })
                .find(path + ": field '/batch_size' is \"2048\", expected a whole number >= 0"),
            std::string::npos);
}

TEST(CommBench, MpiFourRanksMeasureResumeAndDropATornLine) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("comm_resume");
  const std::string out = dir.file("comm.jsonl");
  Timed run = run_mpi(4, small_args(out, 5));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  json header;
  expect_clean_records(RecordFile::read_all(out, &header, nullptr), 5, 4);
  EXPECT_EQ(header["format"], "embshard-comm-costs");
  EXPECT_EQ(header["num_devices"], 4);
  EXPECT_EQ(header["batch_size"], 512);
  EXPECT_EQ(header["machine"]["rank_hosts"].size(), 4u);
  const std::string first = slurp(out);

  // More samples extend the run; the records there stay byte for byte.
  run = run_mpi(4, small_args(out, 7));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const std::string second = slurp(out);
  EXPECT_EQ(second.substr(0, first.size()), first);
  expect_clean_records(RecordFile::read_all(out, nullptr, nullptr), 7, 4);

  // A torn last line (a crash mid-write) is dropped and measured again.
  const size_t last_line = second.rfind('\n', second.size() - 2);
  spit(out, second.substr(0, last_line + 1 + (second.size() - last_line) / 2));
  run = run_mpi(4, small_args(out, 7));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("dropped a torn last record"), std::string::npos)
      << run.result.output;
  expect_clean_records(RecordFile::read_all(out, nullptr, nullptr), 7, 4);
  EXPECT_EQ(slurp(out).substr(0, last_line + 1), second.substr(0, last_line + 1));

  // Other options refuse to mix, naming the field; the file is untouched.
  const std::string before = slurp(out);
  run = run_mpi(4, small_args(out, 7) + " --dims 4,8");
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_NE(run.result.output.find("'dims'"), std::string::npos) << run.result.output;
  EXPECT_EQ(slurp(out), before);
}

// --collectives: every rank times the row-wise and data-parallel collectives
// of a drawn load; the file has its own format, so it never mixes with
// all-to-all records, and the report sets the analytic formula beside it.
TEST(CommBench, MpiCollectivesMeasureDrawnLoadsOnTwoRanks) {
  CommBenchOptions o;
  o.seed = 5;
  for (int n : {1, 2, 4}) {
    for (int64_t i = 0; i < 20; ++i) {
      const CollectiveLoad a = draw_collective_load(o, n, i), b = draw_collective_load(o, n, i);
      EXPECT_EQ(a.index_recv_bytes, b.index_recv_bytes);
      EXPECT_EQ(a.allreduce_bytes, b.allreduce_bytes);
      // What the row shards receive is what the others send.
      double sent = 0, received = 0;
      for (int d = 0; d < n; ++d) sent += a.index_send_bytes[d], received += a.index_recv_bytes[d];
      EXPECT_NEAR(sent, received, 1e-6 * std::max(1.0, received)) << n << " " << i;
      const CommSample s = draw_comm_sample(o, n, i);
      EXPECT_EQ(a.rw_dim_sums, std::vector<double>(s.dim_sums.begin(), s.dim_sums.end()));
    }
  }
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("comm_collectives");
  const std::string out = dir.file("coll.jsonl");
  Timed run = run_mpi(2, small_args(out, 3) + " --collectives");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("the analytic formula"), std::string::npos) << run.result.output;
  json header;
  const auto records = RecordFile::read_all(out, &header, nullptr);
  EXPECT_EQ(header["format"], "embshard-collective-costs");
  ASSERT_EQ(records.size(), 3u);
  for (const json& r : records) {
    for (const char* key : {"rw_dim_sums", "index_recv_bytes", "fwd_ms", "bwd_ms", "raw_bwd_ms"}) {
      ASSERT_EQ(r[key].size(), 2u) << key << " " << r.dump();
    }
    for (int k = 0; k < 2; ++k) {
      EXPECT_GT(r["fwd_ms"][k].get<double>(), 0.0) << r.dump();
      EXPECT_GT(r["bwd_ms"][k].get<double>(), 0.0) << r.dump();
    }
  }
  // An all-to-all run on the same file: refused by format, the file untouched.
  const std::string before = slurp(out);
  run = run_mpi(2, small_args(out, 4));
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_NE(run.result.output.find("format"), std::string::npos) << run.result.output;
  EXPECT_EQ(slurp(out), before);

  // --reference-from: a new file (of either kind) on the first one's scale.
  const std::string same_scale = dir.file("a2a.jsonl");
  run = run_mpi(2, small_args(same_scale, 1) + " --reference-from " + out);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  json other;
  RecordFile::read_all(same_scale, &other, nullptr);
  EXPECT_EQ(other["probe"]["reference_ms"], header["probe"]["reference_ms"]);
  EXPECT_EQ(other["probe"]["reference_from"], out);
  // Another batch times another exchange; a missing file is no scale: both
  // refused, naming the file and the field, and no output file is made.
  const std::string refused = dir.file("refused.jsonl");
  std::string other_batch = small_args(refused, 1);
  other_batch.replace(other_batch.find("--batch 512"), 11, "--batch 1024");
  const std::pair<std::string, std::string> cases[] = {
      {other_batch + " --reference-from " + out, "field 'batch_size' is 512, the run's batch is 1024"},
      {small_args(refused, 1) + " --reference-from " + dir.file("no"), "no such file"}};
  for (const auto& [args, message] : cases) {
    run = run_mpi(2, args);
    EXPECT_NE(run.result.exit_code, 0);
    EXPECT_NE(run.result.output.find(message), std::string::npos) << run.result.output;
    EXPECT_FALSE(std::filesystem::exists(refused));
  }
}

// --passes: every sample measured in several passes, in blocks (here of a
// sample or two); a rank's figure is the mean of its fastest half of the
// passes (of four: the fastest two), each pass kept.
TEST(CommBench, MpiPassesKeepTheMeanOfEachRanksFastestHalf) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("comm_passes");
  const std::string out = dir.file("comm.jsonl");
  const std::string passes = " --passes 4 --pass-block-s 0.02";
  Timed run = run_mpi(2, small_args(out, 4) + passes);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("mean of the fastest 2 of 4 passes"), std::string::npos)
      << run.result.output;
  const std::string first = slurp(out);
  run = run_mpi(2, small_args(out, 5) + passes);  // resumes
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(slurp(out).substr(0, first.size()), first);
  json header;
  const auto records = RecordFile::read_all(out, &header, nullptr);
  EXPECT_EQ(header["passes"], 4);
  expect_clean_records(records, 5, 2);
  for (const json& r : records) {
    for (const char* field : {"fwd_ms", "bwd_ms"}) {
      const json& each = r[std::string("pass_") + field];
      ASSERT_EQ(each.size(), 4u) << r.dump();
      for (int k = 0; k < 2; ++k) {
        std::vector<double> rank;
        for (const json& pass : each) rank.push_back(pass[k].get<double>());
        std::sort(rank.begin(), rank.end());
        EXPECT_DOUBLE_EQ(r[field][k].get<double>(), (rank[0] + rank[1]) / 2)
            << field << " " << r.dump();
      }
    }
  }
  // Another number of passes measures other figures: refused, the file untouched.
  const std::string before = slurp(out);
  run = run_mpi(2, small_args(out, 6) + " --passes 2");
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_NE(run.result.output.find("'passes'"), std::string::npos) << run.result.output;
  EXPECT_EQ(slurp(out), before);
}

TEST(CommBench, CliRunsAsOneRankAlone) {
  ScratchDir dir("comm_single");
  const std::string out = dir.file("comm.jsonl");
  const CommandResult run = testing::run_shell(std::string("timeout -k 5 60 ") +
                                               EMBSHARD_CLI_PATH + " bench comm " +
                                               small_args(out, 2));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto records = RecordFile::read_all(out, nullptr, nullptr);
  expect_clean_records(records, 2, 1);
  EXPECT_EQ(records[0]["delays_ms"][0], 0.0);
}

// A rank that dies, or hangs, at sample 3 ends the job with an error within
// bounded time; the 3 records written before stay intact.
void expect_bounded_failure(const std::string& mode, const std::string& name) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir(name);
  const std::string out = dir.file("comm.jsonl");
  const Timed run = run_mpi(4, small_args(out, 20) + " --timeout-s 3 --test-kill-rank 2 "
                                                     "--test-kill-at-sample 3 --test-kill-mode " +
                                   mode);
  EXPECT_NE(run.result.exit_code, 0) << run.result.output;
  EXPECT_LT(run.seconds, 30.0) << run.result.output;
  EXPECT_NE(run.result.output.find("rank 2: test fault"), std::string::npos) << run.result.output;
  if (mode == "hang") {
    EXPECT_NE(run.result.output.find("did not complete within 3 s (a rank died or hangs)"),
              std::string::npos)
        << run.result.output;
  }
  expect_clean_records(RecordFile::read_all(out, nullptr, nullptr), 3, 4);
}

TEST(CommBench, MpiDeadRankEndsTheRunInBoundedTime) { expect_bounded_failure("exit", "comm_dead"); }

TEST(CommBench, MpiHungRankEndsTheRunInBoundedTime) { expect_bounded_failure("hang", "comm_hang"); }

}  // namespace
}  // namespace embshard
