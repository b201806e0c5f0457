#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "embshard/bench/compute.h"
#include "embshard/bench/repeatability.h"
#include "embshard/cost/cost_data.h"
#include "embshard/util/statistics.h"
#include "embshard/util/reporter.h"
#include "embshard/util/data_dir.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/record_file.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;
using testing::run_cli;
using testing::slurp;
using testing::spit;

std::string make_workload(const ScratchDir& dir, int tables) {
  return testing::write_test_workload(dir, {tables, 64, 50, 400, 1, 1, 4, 5}).dir;
}

ComputeBenchOptions small_options(const std::string& workload, const std::string& out) {
  ComputeBenchOptions o;
  o.workload_dir = workload;
  o.out_path = out;
  o.samples = 6;
  o.max_tables = 4;
  o.mem_cap_bytes = 1 << 20;
  o.warmup = 1;
  o.min_rounds = 4;
  o.max_rounds = 4;
  o.scale = ComputeBenchOptions::Scale::kWindow;  // anchors: test_anchors.cpp
  o.reference_window_s = 0.2;
  o.seed = 11;
  return o;
}

TEST(ComputeBench, DrawsAreDeterministicAndRespectTheCap) {
  ScratchDir dir("compute_draw");
  const Workload w = load_workload(make_workload(dir, 8));
  ComputeBenchOptions o = small_options(dir.path().string(), "");
  o.mem_cap_bytes = 200'000;
  for (int64_t i = 0; i < 50; ++i) {
    const auto a = draw_shard(w, o, i), b = draw_shard(w, o, i);
    ASSERT_EQ(a.size(), b.size());
    int64_t bytes = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].table, b[k].table);
      EXPECT_EQ(a[k].dim, b[k].dim);
      bytes += w.tables[a[k].table].rows * a[k].dim * 4;
    }
    EXPECT_GE(a.size(), 1u);
    EXPECT_LE(a.size(), 4u);
    EXPECT_LE(bytes, o.mem_cap_bytes);
  }
}

TEST(ComputeBench, ResumesAfterATornRecordWithoutDuplicates) {
  ScratchDir dir("compute_resume");
  const std::string workload = make_workload(dir, 6);
  const std::string out = dir.file("costs.jsonl");
  ComputeBenchOptions o = small_options(workload, out);
  spit(out, "");  // a crash before the header: measured as a new file
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 6);
  const std::string full = slurp(out);
  // Tear the last record in half, as a crash in the middle of a write would.
  const size_t last_line = full.rfind('\n', full.size() - 2);
  spit(out, full.substr(0, last_line + 1 + (full.size() - last_line) / 2));
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 6);
  json header;
  const auto records = RecordFile::read_all(out, &header, nullptr);
  ASSERT_EQ(records.size(), 6u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["sample"], static_cast<int>(i));
    EXPECT_GT(records[i]["ms"].get<double>(), 0.0);
  }
  // The resumed record is the same shard the first run measured.
  const auto first_run = [&] {
    std::vector<json> lines;
    size_t begin = 0;
    while (begin < full.size()) {
      const size_t end = full.find('\n', begin);
      lines.push_back(json::parse(full.substr(begin, end - begin)));
      begin = end + 1;
    }
    return lines;
  }();
  EXPECT_EQ(records.back()["tables"], first_run.back()["tables"]);
  EXPECT_EQ(header["batch_size"], 64);
  EXPECT_EQ(header["threads"], 1);
  EXPECT_TRUE(header.contains("machine"));
  EXPECT_TRUE(header.contains("embshard_version"));
  // The executor's copy bandwidth, for physical floors: some GB/s, not a guess.
  EXPECT_GT(header["copy_gbps"].get<double>(), 0.1);
  EXPECT_LT(header["copy_gbps"].get<double>(), 1e4);

  // More samples extend the run; other options refuse to mix.
  o.samples = 8;
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 8);
  const auto seed = o.seed;
  o.seed = 12;
  EXPECT_THROW(run_compute_bench(o, silent_reporter()), Error);
  o.seed = seed;

  // The records' table of a file edited by hand names the record and field.
  EXPECT_NE(compute_records_table(out, 3).find("fwd ms"), std::string::npos);
  const std::string text = slurp(out);
  const size_t last = text.rfind('\n', text.size() - 2);
  json edited = json::parse(text.substr(last + 1));
  edited.erase("bwd_ms");
  spit(out, text.substr(0, last + 1) + edited.dump() + "\n");
  const std::string e = testing::error_of([&] { compute_records_table(out, 3); });
  EXPECT_NE(e.find(out + ": record 8: "), std::string::npos) << e;
  EXPECT_NE(e.find("field '/bwd_ms' is missing"), std::string::npos) << e;
  // Resuming it: a record's sample number of another type is named.
  edited["sample"] = "eight";
  spit(out, text.substr(0, last + 1) + edited.dump() + "\n");
  o.samples = 9;
  const std::string resumed = testing::error_of([&] { run_compute_bench(o, silent_reporter()); });
  EXPECT_NE(resumed.find(out + ": record 8: field '/sample' is \"eight\", expected a whole number"),
            std::string::npos)
      << resumed;
}

TEST(ComputeBench, ThreadCpuTimeIsItsOwnExecutorAndScale) {
  ScratchDir dir("compute_clock");
  const std::string workload = make_workload(dir, 4);
  ComputeBenchOptions wall = small_options(workload, dir.file("wall.jsonl"));
  wall.samples = 2;
  EXPECT_EQ(run_compute_bench(wall, silent_reporter()), 2);
  ComputeBenchOptions cpu = small_options(workload, dir.file("cpu.jsonl"));
  cpu.samples = 2;
  cpu.thread_cpu_time = true;
  cpu.reference_from = wall.out_path;  // the wall clock's reference: refused
  const std::string refused = testing::error_of([&] { run_compute_bench(cpu, silent_reporter()); });
  for (const char* part : {"wall.jsonl", "'executor'", "thread CPU time"}) {
    EXPECT_NE(refused.find(part), std::string::npos) << refused;
  }
  EXPECT_FALSE(file_exists(cpu.out_path));
  cpu.reference_from.clear();
  EXPECT_EQ(run_compute_bench(cpu, silent_reporter()), 2);
  json header;
  const auto records = RecordFile::read_all(cpu.out_path, &header, nullptr);
  EXPECT_EQ(header["executor"], "cpu (1 thread, thread CPU time)");
  for (const json& r : records) EXPECT_GT(r["ms"].get<double>(), 0.0);
  // Nor does a wall-clock run resume the thread-time file.
  wall.out_path = cpu.out_path;
  const std::string mixed = testing::error_of([&] { run_compute_bench(wall, silent_reporter()); });
  EXPECT_NE(mixed.find("cpu.jsonl: field 'executor'"), std::string::npos) << mixed;
}

// --keep-rounds: each record carries its timed rounds, from which its
// figures can be computed again; the cost loader reads such a file as any other.
TEST(ComputeBench, KeptRoundsReproduceTheRecord) {
  ScratchDir dir("compute_rounds");
  ComputeBenchOptions o = small_options(make_workload(dir, 4), dir.file("rounds.jsonl"));
  o.samples = 2;
  o.keep_rounds = true;
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 2);
  json header;
  const auto records = RecordFile::read_all(o.out_path, &header, nullptr);
  ASSERT_EQ(records.size(), 2u);
  for (const json& r : records) {
    const json& rounds = r.at("per_round");
    const auto work = rounds.at("work_ms").get<std::vector<double>>();
    const auto probe = rounds.at("probe_ms").get<std::vector<double>>();
    ASSERT_EQ(work.size(), r["rounds"].get<size_t>()) << r.dump();
    ASSERT_EQ(probe.size(), work.size()) << r.dump();
    EXPECT_DOUBLE_EQ(median(work), r["raw_ms"].get<double>());
    EXPECT_DOUBLE_EQ(median(probe), r["probe_ms"].get<double>());
    EXPECT_DOUBLE_EQ(median(rounds.at("block_ratios").get<std::vector<double>>()),
                     r["ratio_median"].get<double>());
  }
  EXPECT_EQ(load_compute_data(o.out_path).records.size(), 2u);
  // Without the flag the records stay lean.
  o.keep_rounds = false;
  o.out_path = dir.file("lean.jsonl");
  EXPECT_EQ(run_compute_bench(o, silent_reporter()), 2);
  for (const json& r : RecordFile::read_all(o.out_path, nullptr, nullptr)) {
    EXPECT_FALSE(r.contains("per_round")) << r.dump();
  }
}

// bench repeat: the same draws measured twice; the agreement figures are
// those of the shards' two figures, and the kept rounds reproduce each pass.
TEST(ComputeBench, CliRepeatMeasuresTheSameShardsTwice) {
  ScratchDir dir("compute_repeat");
  ComputeBenchOptions o = small_options(make_workload(dir, 4), "");
  o.samples = 3;
  o.keep_rounds = true;
  const RepeatResult r = run_repeatability(o, silent_reporter());
  ASSERT_EQ(r.shards.size(), 3u);
  EXPECT_GT(r.reference_ms, 0.0);
  const Workload w = load_workload(o.workload_dir);
  std::vector<double> raw_diff;
  for (size_t i = 0; i < r.shards.size(); ++i) {
    const RepeatShard& s = r.shards[i];
    EXPECT_EQ(s.sample, static_cast<int64_t>(i));
    EXPECT_EQ(s.tables, static_cast<int>(draw_shard(w, o, s.sample).size()));
    for (int pass = 0; pass < 2; ++pass) {
      EXPECT_GT(s.raw_ms[pass], 0.0);
      EXPECT_GT(s.normalized_ms[pass], 0.0);
    }
    raw_diff.push_back(100 * std::abs(s.raw_ms[0] - s.raw_ms[1]) /
                       (0.5 * (s.raw_ms[0] + s.raw_ms[1])));
  }
  EXPECT_DOUBLE_EQ(r.raw.mean_pct, mean(raw_diff));
  EXPECT_DOUBLE_EQ(r.raw.max_pct, *std::max_element(raw_diff.begin(), raw_diff.end()));
  EXPECT_DOUBLE_EQ(r.normalized.mean_pct, agreement(r.shards, true).mean_pct);

  const json j = repeat_json(r);
  ASSERT_EQ(j.at("shards").size(), 3u);
  for (size_t i = 0; i < r.shards.size(); ++i) {
    const json& rounds = j["shards"][i].at("per_round");
    ASSERT_EQ(rounds.size(), 2u);
    for (int pass = 0; pass < 2; ++pass) {
      const auto work = rounds[pass].at("work_ms").get<std::vector<double>>();
      EXPECT_EQ(work.size(), 4u);  // min_rounds = max_rounds = 4
      EXPECT_DOUBLE_EQ(median(work), r.shards[i].raw_ms[pass]);
    }
  }
  // Without the flag the JSON stays lean; on the command line it needs --json.
  RepeatResult lean = r;
  lean.keep_rounds = false;
  EXPECT_FALSE(repeat_json(lean)["shards"][0].contains("per_round"));
  const auto cli = run_cli("bench repeat --workload " + o.workload_dir + " --keep-rounds");
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.output.find("--json"), std::string::npos) << cli.output;
}

TEST(ComputeBench, ShardThatCannotFitTheCapIsAnError) {
  ScratchDir dir("compute_cap");
  const std::string workload = make_workload(dir, 3);
  ComputeBenchOptions o = small_options(workload, dir.file("costs.jsonl"));
  o.mem_cap_bytes = 50 * 4 * 4 - 1;  // the smallest table at dim 4 needs 800 bytes
  try {
    run_compute_bench(o, silent_reporter());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'t0'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("costs.jsonl")));
}

// A trace with indices past a table's rows: the error names the sample and
// the shard's tables (the executor numbers them from 0), and no record is kept.
TEST(ComputeBench, AnIndexPastATablesRowsNamesTheTables) {
  ScratchDir dir("compute_bad_index");
  const std::string workload = make_workload(dir, 3);
  json specs = json::parse(slurp(workload + "/tables.json"));
  for (json& t : specs["tables"]) {
    t["rows"] = 2;
    t["unique_rows"] = 2;
  }
  spit(workload + "/tables.json", specs.dump());
  const ComputeBenchOptions o = small_options(workload, dir.file("costs.jsonl"));
  const std::string e = testing::error_of([&] { run_compute_bench(o, silent_reporter()); });
  EXPECT_NE(e.find("bench compute: " + workload + ": sample 0 (tables 0.. of the shard: t"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  EXPECT_EQ(RecordFile::read_all(dir.file("costs.jsonl"), nullptr, nullptr).size(), 0u);
}

// Another command's file, as the output or the reference, is named as such;
// an output in a missing directory fails before the reference window.
TEST(ComputeBench, ForeignFilesAndMissingDirectoriesFailFirst) {
  ScratchDir dir("compute_foreign");
  const std::string workload = make_workload(dir, 3);
  spit(dir.file("comm.jsonl"),
       "{\"format\":\"embshard-comm-costs\",\"version\":2,\"probe\":{}}\n");
  const std::string before = slurp(dir.file("comm.jsonl"));
  for (bool as_reference : {false, true}) {
    ComputeBenchOptions o = small_options(workload, dir.file("comm.jsonl"));
    if (as_reference) {
      o.out_path = dir.file("costs.jsonl");
      o.reference_from = dir.file("comm.jsonl");
    }
    EXPECT_NE(testing::error_of([&] { run_compute_bench(o, silent_reporter()); })
                  .find("format is \"embshard-comm-costs\""),
              std::string::npos)
        << as_reference;
  }
  EXPECT_EQ(slurp(dir.file("comm.jsonl")), before);
  EXPECT_FALSE(std::filesystem::exists(dir.file("costs.jsonl")));
  // A reference of the wrong type in an edited file is named.
  spit(dir.file("edited.jsonl"),
       "{\"format\":\"embshard-compute-costs\",\"version\":2,\"probe\":{\"reference\":"
       "{\"reference_ms\":\"3 ms\"}}}\n");
  ComputeBenchOptions edited = small_options(workload, dir.file("costs.jsonl"));
  edited.reference_from = dir.file("edited.jsonl");
  const std::string e = testing::error_of([&] { run_compute_bench(edited, silent_reporter()); });
  EXPECT_NE(
      e.find("edited.jsonl: field '/probe/reference/reference_ms' is \"3 ms\", expected a number"),
      std::string::npos)
      << e;
  EXPECT_FALSE(std::filesystem::exists(dir.file("costs.jsonl")));
  ComputeBenchOptions o = small_options(workload, dir.file("missing/costs.jsonl"));
  o.reference_window_s = 600;  // would take ten minutes if measured first
  EXPECT_NE(testing::error_of([&] { run_compute_bench(o, silent_reporter()); })
                .find("does not exist"),
            std::string::npos);
}

// Anchors priced by a GPU's model would put a CPU's shards in the GPU's units
// (and a GPU's in a CPU model's): refused before anything is measured.
TEST(ComputeBench, AnchorsOfAnotherExecutorsModelAreRefusedFirst) {
  ScratchDir dir("compute_anchor_kind");
  ComputeBenchOptions o = small_options(make_workload(dir, 3), dir.file("costs.jsonl"));
  o.scale = ComputeBenchOptions::Scale::kAnchors;
  o.model_dir = (std::filesystem::path(data_root()) / "models" / "h200").string();
  const std::string e = testing::error_of([&] { run_compute_bench(o, silent_reporter()); });
  EXPECT_NE(e.find("measured on cuda (NVIDIA H100 80GB HBM3), but this run measures on cpu"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--scale window"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir.file("costs.jsonl")));
}

// kill -9 in the middle of a run loses at most the shard being measured; the
// same command then completes the run with every sample exactly once.
TEST(ComputeBench, CliSurvivesKillNine) {
  ScratchDir dir("compute_kill");
  const std::string workload = make_workload(dir, 6);
  const std::string out = dir.file("costs.jsonl");
  const std::string args =
      "bench compute --workload " + workload + " --out " + out +
      " --samples 400 --max-tables 4 --mem-cap 1048576 --warmup 1 "
      "--min-rounds 2 --max-rounds 2 --scale window --reference-window-s 0.2 --seed 3";
  for (int attempt = 0; attempt < 3; ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string command = std::string(EMBSHARD_CLI_PATH) + " " + args + " >/dev/null 2>&1";
      ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 200 * attempt));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  const auto result = run_cli(args + " --show 0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto records = RecordFile::read_all(out, nullptr, nullptr);
  ASSERT_EQ(records.size(), 400u);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i]["sample"], static_cast<int>(i));
}

TEST(ComputeBench, CliBadFlagsFailCleanly) {
  ScratchDir dir("compute_flags");
  const std::string workload = make_workload(dir, 2);
  const std::string out = dir.file("c.jsonl");
  auto fails = [&](const std::string& extra, const std::string& needle) {
    const auto r = run_cli("bench compute --workload " + workload + " --out " + out +
                           " --samples 2 " + extra);
    EXPECT_NE(r.exit_code, 0) << extra;
    EXPECT_NE(r.output.find(needle), std::string::npos) << extra << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << extra;
  };
  fails("--dims 4,0", "--dims");
  fails("--threads 0", "--threads");
  fails("--max-tables 0", "--max-tables");
  fails("--optimizer adam", "adam");
  const auto r = run_cli("bench compute --workload " + dir.file("nope") + " --out " + out +
                         " --samples 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("nope"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace embshard

namespace embshard {
namespace {

// --pieces: drawn tables become row blocks or replica slices, recorded with
// the features of their own lookups (fewer than the table's).
TEST(ComputeBench, PiecesAreDrawnAndRecordedWithTheirOwnFeatures) {
  ScratchDir dir("compute_pieces");
  const Workload w = load_workload(make_workload(dir, 8));
  ComputeBenchOptions o = small_options(dir.path().string(), dir.file("pieces.jsonl"));
  o.piece_share = 1;
  int pieces = 0;
  for (int64_t i = 0; i < 40; ++i) {
    for (const ShardTable& t : draw_shard(w, o, i)) {
      if (t.rows > 0) {
        EXPECT_LE(t.row_offset + t.rows, w.tables[t.table].rows);
        ++pieces;
      }
      if (t.batch_slices > 1) {
        EXPECT_LT(t.batch_slice, t.batch_slices);
        ++pieces;
      }
    }
  }
  EXPECT_GT(pieces, 20);
  o.samples = 3;
  ASSERT_EQ(run_compute_bench(o, silent_reporter()), 3);
  json header;
  const auto records = RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["piece_share"].get<double>(), 1.0);
  int checked = 0;
  for (const json& r : records) {
    for (const json& t : r["tables"]) {
      const TableSpec& spec = w.tables[t["table"].get<int>()];
      if (!t.contains("row_offset") && !t.contains("batch_slice")) continue;
      EXPECT_LE(t["rows"].get<int64_t>(), spec.rows);
      EXPECT_LT(t["pooling_factor"].get<double>(), spec.pooling_factor);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  o.piece_share = 2;
  EXPECT_THROW(run_compute_bench(o, silent_reporter()), Error);
}

// --data-types draws each table's type; the records carry it and load back
// into the features; without it every draw is the workload's own (fp32 here)
// and the draws are those of a run without types; forward-only types are refused.
TEST(ComputeBench, DataTypesAreDrawnAndRecorded) {
  ScratchDir dir("compute_types");
  const Workload w = load_workload(make_workload(dir, 8));
  ComputeBenchOptions o = small_options(dir.path().string(), dir.file("types.jsonl"));
  ComputeBenchOptions plain = o;
  o.data_types = {DataType::kFp16, DataType::kBf16};
  std::array<int, 5> drawn{};
  for (int64_t i = 0; i < 40; ++i) {
    for (const ShardTable& t : draw_shard(w, plain, i)) EXPECT_EQ(t.data_type, DataType::kFp32);
    for (const ShardTable& t : draw_shard(w, o, i)) ++drawn[static_cast<size_t>(t.data_type)];
  }
  EXPECT_EQ(drawn[0], 0);
  EXPECT_GT(drawn[1], 10);
  EXPECT_GT(drawn[2], 10);
  o.samples = 3;
  ASSERT_EQ(run_compute_bench(o, silent_reporter()), 3);
  json header;
  const auto records = RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["data_types"], json::array({"fp16", "bf16"}));
  const ComputeData data = load_compute_data(o.out_path);
  ASSERT_EQ(data.records.size(), 3u);
  for (size_t r = 0; r < records.size(); ++r) {
    const std::vector<ShardTable> shard = draw_shard(w, o, r);
    ASSERT_EQ(data.records[r].tables.size(), shard.size());
    for (size_t i = 0; i < shard.size(); ++i) {
      EXPECT_EQ(records[r]["tables"][i]["data_type"], data_type_name(shard[i].data_type));
      EXPECT_EQ(data.records[r].tables[i].data_type, shard[i].data_type);
    }
  }
  o.data_types = {DataType::kInt8};
  const std::string e = testing::error_of([&] { run_compute_bench(o, silent_reporter()); });
  EXPECT_NE(e.find("--data-types holds int8"), std::string::npos) << e;
}

}  // namespace
}  // namespace embshard
