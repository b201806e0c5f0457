// eval under mpirun: the all-to-alls measured across the ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "embshard/eval/eval.h"
#include "embshard/util/file.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"
#include "eval_test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::make_pool;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;

// The pool and tasks the mpirun tests plan: 2 tasks of 4-6 tables.
std::string mpi_tasks(const ScratchDir& dir) {
  const std::string pool_dir = make_pool(dir, 10);
  const auto t = run_cli("tasks --pool " + pool_dir +
                         " --tables 4-6 --mem-cap 8388608 --count 2 "
                         "-o " +
                         dir.file("t.json"));
  EXPECT_EQ(t.exit_code, 0) << t.output;
  return dir.file("t.json");
}

// An eval of size_greedy and neuroshard over 2 ranks with two passes of the
// all-to-alls (quick exchanges: 1 warmup, 2 timed runs).
std::string passes_base(const std::string& tasks) {
  return "eval --tasks " + tasks +
         " --algos size_greedy,neuroshard --cost-model analytic "
         "--expert comm-warmup=1,comm-repeats=2 --reference-window-s 0.3 "
         "--comm-passes 2 --expert comm-pass-pause-s=0.1";
}

// Each plan's all-to-alls measured across 2 ranks; the file is not resumed
// without mpirun; a rank count other than --devices, or an unknown
// algorithm, is refused before anything is timed, and every rank leaves.
TEST(Eval, UnderMpirunMeasuresTheAllToAlls) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi");
  const std::string tasks = mpi_tasks(dir);
  const std::string args = "eval --tasks " + tasks +
                           " --algos size_greedy,neuroshard --cost-model analytic "
                           "--expert comm-warmup=1,comm-repeats=2 --reference-window-s 0.3 --out " +
                           dir.file("e.jsonl");
  const auto r = testing::run_mpi_cli(2, args + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json header;
  const auto records = RecordFile::read_all(dir.file("e.jsonl"), &header, nullptr);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(header["devices"], 2);
  EXPECT_NE(header["comm"].get<std::string>().find(
                "MPI all-to-all, and the row-wise and data-parallel collectives, over 2 ranks"),
            std::string::npos)
      << header.dump();
  for (const json& rec : records) {
    EXPECT_GT(rec["algos"]["neuroshard"]["measured_ms"].get<double>(), 0) << rec.dump();
  }
  EXPECT_NE(
      r.output.find("MPI all-to-all, and the row-wise and data-parallel collectives, over 2 ranks"),
      std::string::npos)
      << r.output;
  // The same file without mpirun: another run's communication, refused.
  const std::string before = slurp(dir.file("e.jsonl"));
  const auto single = run_cli(args + " --devices 2");
  EXPECT_NE(single.exit_code, 0);
  EXPECT_NE(single.output.find("comm"), std::string::npos) << single.output;
  EXPECT_EQ(slurp(dir.file("e.jsonl")), before);
  // More devices asked than ranks started: a clear error, no file, no hang.
  const auto bad =
      testing::run_mpi_cli(2, "eval --tasks " + tasks + " --algos neuroshard --devices 3 --out " +
                                  dir.file("bad.jsonl"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--devices is 3 but mpirun started 2 ranks"), std::string::npos)
      << bad.output;
  // An unknown algorithm: refused by rank 0 before any exchange is timed (the
  // run above timed its reference exchange first), and every rank leaves.
  EXPECT_NE(r.output.find("timing the reference exchange now"), std::string::npos) << r.output;
  const auto unknown = testing::run_mpi_cli(2, "eval --tasks " + tasks +
                                                   " --algos neuroshard,nope --cost-model analytic "
                                                   "--out " +
                                                   dir.file("unknown.jsonl"));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("unknown planner 'nope'"), std::string::npos) << unknown.output;
  EXPECT_EQ(unknown.output.find("timing the reference exchange"), std::string::npos)
      << unknown.output;
  EXPECT_FALSE(file_exists(dir.file("unknown.jsonl")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.jsonl")));
}

// --comm-passes: each plan's all-to-alls measured twice, the fastest kept.
TEST(EvalMpi, CommPassesKeepTheFastest) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi_passes");
  const std::string tasks = mpi_tasks(dir);
  const std::string passes_args = passes_base(tasks) + " --out " + dir.file("p.jsonl");
  const auto p = testing::run_mpi_cli(2, passes_args);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  json passes_header;
  const auto passes = RecordFile::read_all(dir.file("p.jsonl"), &passes_header, nullptr);
  EXPECT_EQ(passes_header["comm_passes"], 2);
  ASSERT_EQ(passes.size(), 2u);
  for (const json& rec : passes) {
    for (const char* algo : {"size_greedy", "neuroshard"}) {
      const json& a = rec["algos"][algo];
      ASSERT_EQ(a["measured_passes_ms"].size(), 2u) << a.dump();
      EXPECT_EQ(a["measured_ms"].get<double>(), std::min(a["measured_passes_ms"][0].get<double>(),
                                                         a["measured_passes_ms"][1].get<double>()))
          << a.dump();
    }
  }
}

// A verified algorithm chooses on as many passes, and says so.
TEST(EvalMpi, VerifiedAlgorithmsChooseOnThePasses) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi_verified");
  const std::string tasks = mpi_tasks(dir);
  const auto verified = testing::run_mpi_cli(
      2, "eval --tasks " + tasks +
             " --algos neuroshard+verify,neuroshard+verify:verify-tables:candidates=1:leaders=0"
             " --cost-model analytic "
             "--expert comm-warmup=1,comm-repeats=2 "
             "--reference-window-s 0.3 --comm-passes 2 --expert comm-pass-pause-s=0.1 "
             "--verify-candidates 2 --verify-rounds 1 --verify-leaders 2 --out " +
             dir.file("v.jsonl"));
  ASSERT_EQ(verified.exit_code, 0) << verified.output;
  json verified_header;
  const auto verified_records =
      RecordFile::read_all(dir.file("v.jsonl"), &verified_header, nullptr);
  EXPECT_EQ(verified_header["verify_passes"], 2);
  EXPECT_EQ(verified_header["verify_leaders"], 2);
  ASSERT_EQ(verified_records.size(), 2u);
  // A leader's figure: the median of its passes' figure and its fresh measurements.
  const auto figure = [](const json& v, const std::string& who) {
    std::vector<double> all = v[who + "_fresh_ms"].get<std::vector<double>>();
    all.push_back(fastest_half_mean(v[who + "_passes_ms"].get<std::vector<double>>()));
    return median(all);
  };
  for (const json& rec : verified_records) {
    const json& v = rec["algos"]["neuroshard+verify"]["verification"];
    EXPECT_EQ(v["chosen_passes_ms"].size(), 2u) << v.dump();
    ASSERT_EQ(v["chosen_fresh_ms"].size(), 1u) << v.dump();  // a leader, measured once more
    // The search's first pick, measured on the same passes; where it led
    // too, the chosen plan is never slower on the leaders' figures.
    ASSERT_EQ(v["first_passes_ms"].size(), 2u) << v.dump();
    EXPECT_GT(v["first_predicted_ms"].get<double>(), 0) << v.dump();
    if (v.contains("first_fresh_ms")) {
      EXPECT_LE(figure(v, "chosen"), figure(v, "first") * (1 + 1e-9)) << v.dump();
    }
    // Each table measured alone first where the algorithm asks for it.
    EXPECT_FALSE(v.contains("tables_measured")) << v.dump();
    const json& t =
        rec["algos"]["neuroshard+verify:verify-tables:candidates=1:leaders=0"]["verification"];
    EXPECT_EQ(t["tables_measured"], rec["tables"]) << t.dump();
    EXPECT_GE(t["verify_s"].get<double>(), t["tables_s"].get<double>()) << t.dump();
    // The item's own budget: one plan of the search's beside the rival's, no leaders.
    EXPECT_LE(t["measured_plans"].get<int>(), 2) << t.dump();
    EXPECT_FALSE(t.contains("chosen_fresh_ms")) << t.dump();
  }
}

// --raw-clock: the same plans on the wall clock, as many passes, beside;
// --compute-passes beside the first pass's figure.
TEST(EvalMpi, RawClockAndComputePassesReadBeside) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi_raw");
  const std::string tasks = mpi_tasks(dir);
  const auto raw =
      testing::run_mpi_cli(2, passes_base(tasks) + " --raw-clock --out " + dir.file("raw.jsonl"));
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_NE(raw.output.find("x best (raw)"), std::string::npos) << raw.output;
  json raw_header;
  const auto raw_records = RecordFile::read_all(dir.file("raw.jsonl"), &raw_header, nullptr);
  EXPECT_EQ(raw_header["raw_clock"], true);
  ASSERT_EQ(raw_records.size(), 2u);
  for (const json& rec : raw_records) {
    for (const char* algo : {"size_greedy", "neuroshard"}) {
      const json& a = rec["algos"][algo];
      ASSERT_EQ(a["measured_raw_passes_ms"].size(), 2u) << a.dump();
      EXPECT_GT(a["measured_raw_ms"].get<double>(), 0) << a.dump();
      EXPECT_EQ(a["measured_raw_ms"].get<double>(),
                std::min(a["measured_raw_passes_ms"][0].get<double>(),
                         a["measured_raw_passes_ms"][1].get<double>()))
          << a.dump();
    }
  }
  // --compute-passes: the medians' figure and the first pass's, each on
  // exchanges measured pass by pass.
  const auto medians = testing::run_mpi_cli(
      2, passes_base(tasks) + " --compute-passes 2 --out " + dir.file("c.jsonl"));
  ASSERT_EQ(medians.exit_code, 0) << medians.output;
  EXPECT_NE(medians.output.find("x best (1st compute)"), std::string::npos) << medians.output;
  for (const json& rec : RecordFile::read_all(dir.file("c.jsonl"), nullptr, nullptr)) {
    const json& a = rec["algos"]["neuroshard"];
    EXPECT_EQ(a["device_compute_ms"]["measured_passes"].size(), 2u) << a.dump();
    EXPECT_EQ(a["measured_passes_ms"].size(), 2u) << a.dump();
    EXPECT_EQ(a["measured_first_compute_passes_ms"].size(), 2u) << a.dump();
  }
  // Resuming it without --raw-clock would mix records: refused by name.
  const auto mixed =
      testing::run_mpi_cli(2, passes_base(tasks) + " --out " + dir.file("raw.jsonl"));
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_NE(mixed.output.find("'raw_clock'"), std::string::npos) << mixed.output;
}

// In one process the communication is the model's: what measures it again
// needs mpirun, and nothing is written.
TEST(EvalMpi, WhatNeedsMpirunIsRefusedInOneProcess) {
  ScratchDir dir("eval_mpi_one");
  const std::string tasks = mpi_tasks(dir);
  const auto one_raw = run_cli("eval --tasks " + tasks +
                               " --algos size_greedy --cost-model analytic --devices 2 "
                               "--raw-clock --out " +
                               dir.file("one_raw.jsonl"));
  EXPECT_NE(one_raw.exit_code, 0);
  EXPECT_NE(one_raw.output.find("--raw-clock measures the all-to-alls on the raw clock, which "
                                "needs mpirun"),
            std::string::npos)
      << one_raw.output;
  EXPECT_FALSE(file_exists(dir.file("one_raw.jsonl")));
  const auto no_verify = run_cli("eval --tasks " + tasks +
                                 " --algos size_greedy --cost-model analytic --devices 2 "
                                 "--expert verify-tables --out " +
                                 dir.file("no_verify.jsonl"));
  EXPECT_NE(no_verify.exit_code, 0);
  EXPECT_NE(no_verify.output.find("--expert verify-tables needs a +verify algorithm"),
            std::string::npos)
      << no_verify.output;
  EXPECT_FALSE(file_exists(dir.file("no_verify.jsonl")));
  const auto one = run_cli(passes_base(tasks) + " --out " + dir.file("p.jsonl") + " --devices 2");
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.output.find("--comm-passes 2 measures the all-to-alls again, which needs mpirun"),
            std::string::npos)
      << one.output;
}

// A table larger than a device is split by rows: its index all-to-all,
// reduce-scatter and all-gather are measured across the ranks too.
TEST(Eval, UnderMpirunMeasuresRowWiseCollectives) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi_rows");
  const auto s = run_cli(
      "synth --profile 2022 --tables 3 --batch 512 --huge-tables 1 "
      "--huge-rows 400000 -o " +
      dir.file("pool"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto t = run_cli("tasks --pool " + dir.file("pool") +
                         " --tables 3 --dims 128 "
                         "--mem-cap 160MiB --count 1 --oversized -o " +
                         dir.file("t.json"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string algo = "neuroshard@table_wise+row_wise";
  const auto r = testing::run_mpi_cli(
      2,
      "eval --tasks " + dir.file("t.json") + " --algos " + algo +
          " --cost-model analytic --expert comm-warmup=1,comm-repeats=2 --reference-window-s 0.3 "
          "--out " +
          dir.file("e.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = RecordFile::read_all(dir.file("e.jsonl"), nullptr, nullptr);
  ASSERT_EQ(records.size(), 1u);
  const json& a = records[0]["algos"][algo];
  EXPECT_EQ(a["sharding_types"].value("row_wise", 0), 1) << a.dump();
  EXPECT_GT(a["measured_ms"].get<double>(), 0) << a.dump();
}

}  // namespace
}  // namespace embshard
