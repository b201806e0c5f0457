#include <gtest/gtest.h>

#include <tuple>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"
#include "eval_test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::make_pool;
using testing::make_tasks;
using testing::ScratchDir;
using testing::run_cli;
using testing::slurp;
using testing::spit;

TEST(Eval, TasksRoundTripAndRejectBadIds) {
  ScratchDir dir("eval_tasks");
  const std::string pool_dir = make_pool(dir, 16);
  const Workload pool = load_workload(pool_dir);
  const TaskGenOptions o = testing::task_options(pool_dir, 4, 8, 1 << 20, 5);
  const auto tasks = generate_tasks(pool, o);
  ASSERT_EQ(tasks.size(), 5u);
  for (const EvalTask& t : tasks) {
    EXPECT_GE(t.tables.size(), 4u);
    EXPECT_LE(t.tables.size(), 8u);
    for (size_t k = 0; k < t.tables.size(); ++k) {
      EXPECT_LE(pool.tables[t.tables[k]].rows * t.dims[k] * 4, o.mem_cap_bytes);
    }
  }
  const std::string path = dir.file("tasks.json");
  save_tasks(path, pool_dir, tasks);
  std::string back_pool;
  const auto back = load_tasks(path, &back_pool);
  ASSERT_EQ(back.size(), tasks.size());
  EXPECT_EQ(back[2].tables, tasks[2].tables);
  EXPECT_EQ(back[2].dims, tasks[2].dims);

  json j = json::parse(slurp(path));
  j["tasks"][1]["tables"][0] = 99;
  spit(path, j.dump());
  try {
    load_tasks(path, nullptr);
    FAIL() << "table id 99 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tasks[1].tables[0] = 99"), std::string::npos)
        << e.what();
  }
  j["tasks"][1]["tables"][0] = j["tasks"][1]["tables"][1];  // a table twice
  spit(path, j.dump());
  EXPECT_NE(testing::error_of([&] { load_tasks(path, nullptr); })
                .find("tasks[1].tables[1] = " + j["tasks"][1]["tables"][1].dump() +
                      ", as tables[0]: a task holds a table once"),
            std::string::npos);
  // Numbers that are not integers of the field's range are errors, never
  // truncated (3.9 read as table 3, 2^32 + 5 as table 5).
  const struct {
    const char* field;
    json value;
    std::string message;
  } bad[] = {
      {"tables", json::array({3.9}), "field 'tasks[0].tables[0]' is 3.9, expected an integer"},
      {"tables", json::array({4294967301LL}), "field 'tasks[0].tables[0]' is 4294967301"},
      {"dims", json::array({8.5}), "field 'tasks[0].dims[0]' is 8.5, expected an integer in 1..1024"},
      {"mem_cap_bytes", 18446744073709551615ULL, "field 'tasks[0].mem_cap_bytes' is 18446744073709551615"},
      {"mem_cap_bytes", "1GB", "field 'tasks[0].mem_cap_bytes' is \"1GB\""},
      {"mem_cap_bytes", json::array(), "field 'tasks[0].mem_cap_bytes' is [], expected one integer"},
      {"mem_cap_bytes", json::array({5, 6}), "field 'tasks[0].mem_cap_bytes' is [5,6]"},
  };
  for (const auto& b : bad) {
    json one = json::parse(slurp(path));
    one["tasks"] = json::array({json::parse(slurp(path))["tasks"][0]});
    one["tasks"][0]["tables"] = json::array({0});
    one["tasks"][0]["dims"] = json::array({8});
    one["tasks"][0][b.field] = b.value;
    spit(path, one.dump());
    EXPECT_NE(testing::error_of([&] { load_tasks(path, nullptr); }).find(b.message), std::string::npos)
        << b.message;
  }
  json none = json::parse(slurp(path));
  none["tasks"] = json::array();
  spit(path, none.dump());
  EXPECT_NE(testing::error_of([&] { load_tasks(path, nullptr); }).find("field 'tasks' is empty"),
            std::string::npos);
  // The header's fields named with the value found.
  const std::string good = slurp(path);
  for (const auto& [key, value, message] :
       {std::tuple<std::string, json, std::string>{"pool", 3, "field 'pool' is 3, expected"},
        {"version", 2, "format is \"embshard-tasks\", version 2"},
        {"format", "embshard-plan", "format is \"embshard-plan\", version 1"}}) {
    json header = json::parse(good);
    header[key] = value;
    spit(path, header.dump());
    EXPECT_NE(testing::error_of([&] { load_tasks(path, nullptr); }).find(message),
              std::string::npos)
        << message;
  }
}

TEST(Eval, RunsResumesAndSummarises) {
  ScratchDir dir("eval_run");
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  o.algos = {"size_greedy", "neuroshard", "neuroshard+verify"};
  o.verify.candidates = 2;
  o.verify.rounds = 2;
  o.devices = 2;
  o.cost_model = "analytic";  // the shipped calibration
  o.out_path = dir.file("eval.jsonl");
  o.measure.reference_window_s = 0.3;
  o.trace_dir = dir.file("traces");
  CaptureReporter reporter;
  const auto records = run_eval(o, reporter);
  ASSERT_FALSE(reporter.events().empty());
  EXPECT_EQ(reporter.events().back().done, 3u);
  ASSERT_EQ(records.size(), 3u);
  // One trace per task and algorithm, one track per device, ending at the
  // measured cost; below it (process 1) the model's prediction of the plan,
  // ending at the predicted cost.
  for (int t = 0; t < 3; ++t) {
    for (const char* a : {"size_greedy", "neuroshard+verify"}) {
      const json trace = json::parse(slurp(dir.file(fmt::format("traces/task{}_{}.json", t, a))));
      std::set<int> tracks[2];
      double end_us[2] = {0, 0};
      for (const json& e : trace["traceEvents"]) {
        if (e["ph"] != "X") continue;
        const int pid = e["pid"].get<int>();
        ASSERT_TRUE(pid == 0 || pid == 1) << pid;
        tracks[pid].insert(e["tid"].get<int>());
        end_us[pid] = std::max(end_us[pid], e["ts"].get<double>() + e["dur"].get<double>());
      }
      const json& r = records[t]["algos"][a];
      EXPECT_EQ(tracks[0].size(), 2u) << t << " " << a;
      EXPECT_EQ(tracks[1].size(), 2u) << t << " " << a;
      EXPECT_NEAR(end_us[0] / 1e3, r["measured_ms"].get<double>(), 1e-6 * end_us[0]) << t << " " << a;
      EXPECT_NEAR(end_us[1] / 1e3, r["predicted_ms"].get<double>(), 1e-6 * end_us[1]) << t << " " << a;
      // The record's per-device compute: the critical device's is within its cost.
      const auto predicted = r["device_compute_ms"]["predicted"].get<std::vector<double>>();
      const auto measured = r["device_compute_ms"]["measured"].get<std::vector<double>>();
      ASSERT_EQ(predicted.size(), 2u);
      ASSERT_EQ(measured.size(), 2u);
      for (int d = 0; d < 2; ++d) {
        EXPECT_GT(measured[d], 0);
        EXPECT_LE(measured[d], r["measured_ms"].get<double>());
        EXPECT_LE(predicted[d], r["predicted_ms"].get<double>() * (1 + 1e-9));
      }
    }
  }
  for (const json& r : records) {
    // The verified algorithm says what its rounds measured.
    const json& v = r["algos"]["neuroshard+verify"]["verification"];
    EXPECT_GE(v["measured_plans"].get<int>(), 1);
    EXPECT_LE(v["measured_plans"].get<int>(), 4 + 1);  // and torchrec's, the default rival
    EXPECT_TRUE(v["chosen_round"] == 0 || v["chosen_round"] == 1) << v;
    EXPECT_TRUE(v["chosen_source"] == "neuroshard" || v["chosen_source"] == "torchrec") << v;
    EXPECT_FALSE(r["algos"]["neuroshard"].contains("verification"));
    for (const char* a : {"size_greedy", "neuroshard", "neuroshard+verify"}) {
      EXPECT_GT(r["algos"][a]["measured_ms"].get<double>(), 0) << a;
      EXPECT_GT(r["algos"][a]["predicted_ms"].get<double>(), 0) << a;
      EXPECT_LE(r["algos"][a]["bound_ms"].get<double>(),
                r["algos"][a]["predicted_ms"].get<double>() * (1 + 1e-9))
          << a;
    }
  }
  EXPECT_EQ(run_eval(o, silent_reporter()).size(), 3u);  // resumed: nothing new to do
  {
    // Other verification settings never resume these records.
    EvalOptions rounds = o;
    rounds.verify.rounds = 3;
    EXPECT_NE(testing::error_of([&] { run_eval(rounds, silent_reporter()); }).find("verify_rounds"),
              std::string::npos);
  }
  {
    // A torn last record (a crash mid-write) is dropped, said so, and measured again.
    const std::string whole = slurp(o.out_path);
    const size_t last = whole.rfind('\n', whole.size() - 2);
    spit(o.out_path, whole.substr(0, last + 1) + whole.substr(last + 1, 20));
    CaptureReporter torn;
    EXPECT_EQ(run_eval(o, torn).size(), 3u);
    bool said = false;
    for (const std::string& n : torn.notes()) said = said || n.find("torn last record") != n.npos;
    EXPECT_TRUE(said);
  }
  {
    // Task 0's record twice, in task 1's place (task 1 would never be
    // planned): an error naming the file; one record too many, too.
    const std::string whole = slurp(o.out_path);
    const size_t first = whole.find('\n') + 1, second = whole.find('\n', first) + 1,
                 third = whole.find('\n', second) + 1;
    spit(o.out_path, whole + whole.substr(first, second - first));
    EXPECT_NE(testing::error_of([&] { run_eval(o, silent_reporter()); }).find("holds 4 records"),
              std::string::npos);
    spit(o.out_path, whole.substr(0, second) + whole.substr(first, second - first) +
                         whole.substr(third));
    const std::string e = testing::error_of([&] { run_eval(o, silent_reporter()); });
    EXPECT_NE(e.find("record 2 is {\"algos\""), std::string::npos) << e;
    spit(o.out_path, whole);
    // The task file made again at the same path: not resumed on the old records.
    const std::string original = slurp(o.tasks_path);
    json tasks = json::parse(original);
    tasks["tasks"].erase(tasks["tasks"].begin());
    spit(o.tasks_path, tasks.dump());
    EXPECT_NE(testing::error_of([&] { run_eval(o, silent_reporter()); }).find("tasks_crc32"),
              std::string::npos);
    spit(o.tasks_path, original);
  }
  const EvalSummary summary = summarize_eval(records, o.algos);
  ASSERT_EQ(summary.algos.size(), 3u);
  EXPECT_EQ(summary.tasks, 3);
  EXPECT_EQ(summary.left_out, 0);
  EXPECT_EQ(summary.algos[0].name, "size_greedy");
  EXPECT_DOUBLE_EQ(summary.algos[0].ratio_to_best_baseline, 1.0);  // the only baseline
  EXPECT_GE(summary.algos[0].tasks_won + summary.algos[1].tasks_won +
                summary.algos[2].tasks_won,
            3);
  const json j = eval_summary_json(summary, "model");
  for (const char* key : {"mean_measured_ms", "mean_predicted_ms", "tasks_won", "mean_gap_to_bound"}) {
    EXPECT_TRUE(j["algorithms"]["neuroshard"].contains(key)) << key;
  }
  EXPECT_NE(eval_svg(summary, 2).find("</svg>"), std::string::npos);

  o.devices = 3;  // another run's options: refused, file untouched
  const std::string before = slurp(o.out_path);
  EXPECT_THROW(run_eval(o, silent_reporter()), Error);
  EXPECT_EQ(slurp(o.out_path), before);
  // So is another clock: the header names the executor measurements ran on.
  json header;
  RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["executor"], "cpu (1 thread)");
  o.devices = 2;
  o.measure.thread_cpu_time = true;
  const std::string refused = testing::error_of([&] { run_eval(o, silent_reporter()); });
  EXPECT_NE(refused.find("executor"), std::string::npos) << refused;
  EXPECT_EQ(slurp(o.out_path), before);
}

// --predict-only: the plans and their predicted costs, nothing executed; the
// summary ranks on the predictions and says so; a measuring run cannot
// resume its file, and a verified algorithm (which measures) is refused.
// A trace whose indices fall outside their table's rows is an error naming
// the table, not tasks left out as if they did not fit the devices.
TEST(Eval, ATraceOutsideItsTablesIsAnError) {
  ScratchDir dir("eval_bad_trace");
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  std::string pool_dir;
  load_tasks(o.tasks_path, &pool_dir);
  const std::string tables = (std::filesystem::path(pool_dir) / "tables.json").string();
  json spec = json::parse(slurp(tables));
  for (json& t : spec["tables"]) t["rows"] = 10, t.erase("unique_rows");
  write_file_atomic(tables, spec.dump());
  o.algos = {"size_greedy"};
  o.devices = 2;
  o.cost_model = "analytic";
  o.out_path = dir.file("eval.jsonl");
  o.predict_only = true;
  const std::string e = testing::error_of([&] { run_eval(o, silent_reporter()); });
  EXPECT_NE(e.find("table"), std::string::npos) << e;
  EXPECT_NE(e.find("outside"), std::string::npos) << e;
}

TEST(Eval, PredictOnlyExecutesNothing) {
  ScratchDir dir("eval_predict");
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  o.algos = {"size_greedy", "neuroshard"};
  o.devices = 2;
  o.cost_model = "analytic";
  o.out_path = dir.file("eval.jsonl");
  o.predict_only = true;
  o.trace_dir = dir.file("traces");
  const auto records = run_eval(o, silent_reporter());
  ASSERT_EQ(records.size(), 3u);
  for (const json& r : records) {
    for (const char* a : {"size_greedy", "neuroshard"}) {
      EXPECT_GT(r["algos"][a]["predicted_ms"].get<double>(), 0) << a;
      EXPECT_FALSE(r["algos"][a].contains("measured_ms")) << a;
      EXPECT_FALSE(r["algos"][a].contains("device_compute_ms")) << a;
    }
    // The search's beams, as plan's report gives them; none for a heuristic.
    EXPECT_NE(r["algos"]["neuroshard"].value("search", "").find("halvings: "), std::string::npos);
    EXPECT_FALSE(r["algos"]["size_greedy"].contains("search"));
  }
  json header;
  RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["predict_only"], true);
  EXPECT_FALSE(header.contains("probe_reference"));
  // The trace is the predicted iteration alone: it ends at the predicted cost.
  const json trace = json::parse(slurp(dir.file("traces/task0_neuroshard.json")));
  double end_us = 0;
  for (const json& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 0);
    if (e["ph"] == "X") end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_NEAR(end_us / 1e3, records[0]["algos"]["neuroshard"]["predicted_ms"].get<double>(),
              1e-6 * end_us);

  const EvalSummary summary = summarize_eval(records, o.algos);
  EXPECT_TRUE(summary.predicted_only);
  EXPECT_EQ(summary.tasks, 3);
  double predicted = 0;
  for (const json& r : records) predicted += r["algos"]["neuroshard"]["predicted_ms"].get<double>();
  EXPECT_NEAR(summary.algos[1].mean_predicted_ms, predicted / 3, 1e-9);
  EXPECT_NEAR(summary.algos[1].ratio_to_best_baseline,
              summary.algos[1].mean_predicted_ms / summary.algos[0].mean_predicted_ms, 1e-12);
  EXPECT_EQ(summary.algos[1].mean_measured_ms, 0);
  const std::string report = eval_report(summary, "model");
  EXPECT_NE(report.find("predicted only"), std::string::npos) << report;
  EXPECT_EQ(report.find("measured ms"), std::string::npos) << report;
  EXPECT_NE(eval_svg(summary, 2).find("Mean predicted cost"), std::string::npos);
  EXPECT_TRUE(eval_summary_json(summary, "model")["predicted_only"].get<bool>());
  // What was not measured is null, not a zero that reads like a figure.
  const json pj = eval_summary_json(summary, "model")["algorithms"]["neuroshard"];
  EXPECT_TRUE(pj["mean_measured_ms"].is_null());
  EXPECT_TRUE(pj["prediction_mape_pct"].is_null());
  EXPECT_GT(pj["mean_predicted_ms"].get<double>(), 0);
  const EvalSummary alone = summarize_eval(records, {"neuroshard"});  // no baseline
  EXPECT_TRUE(eval_summary_json(alone, "model")["algorithms"]["neuroshard"]
                  ["ratio_to_best_baseline"].is_null());
  const EvalSummary empty = summarize_eval({}, o.algos);
  EXPECT_NE(eval_report(empty, "model").find("nothing to compare"), std::string::npos);
  EXPECT_TRUE(eval_summary_json(empty, "model")["algorithms"]["neuroshard"]["mean_predicted_ms"]
                  .is_null());
  EvalOptions twice = o;
  twice.algos = {"neuroshard", "size_greedy", "neuroshard"};
  EXPECT_NE(testing::error_of([&] { run_eval(twice, silent_reporter()); })
                .find("'neuroshard' twice"),
            std::string::npos);

  EvalOptions measuring = o;  // the same file, measured: refused, untouched
  measuring.predict_only = false;
  measuring.measure.reference_window_s = 0.3;
  const std::string before = slurp(o.out_path);
  EXPECT_THROW(run_eval(measuring, silent_reporter()), Error);
  EXPECT_EQ(slurp(o.out_path), before);

  EvalOptions verified = o;
  verified.out_path = dir.file("verified.jsonl");
  verified.algos = {"neuroshard+verify"};
  EXPECT_THROW(run_eval(verified, silent_reporter()), Error);
}

// Under mpirun every plan's all-to-alls are measured across the ranks (one
// per device), and the records and the report say so.
TEST(Eval, UnderMpirunMeasuresTheAllToAlls) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi");
  const std::string pool_dir = make_pool(dir, 10);
  const auto t = run_cli("tasks --pool " + pool_dir + " --tables 4-6 --mem-cap 8388608 --count 2 "
                         "-o " + dir.file("t.json"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string args = "eval --tasks " + dir.file("t.json") +
                           " --algos size_greedy,neuroshard --cost-model analytic "
                           "--expert comm-warmup=1,comm-repeats=2 --reference-window-s 0.3 --out " +
                           dir.file("e.jsonl");
  const auto r = testing::run_mpi_cli(2, args + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json header;
  const auto records = RecordFile::read_all(dir.file("e.jsonl"), &header, nullptr);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(header["devices"], 2);
  EXPECT_NE(header["comm"].get<std::string>().find("MPI all-to-all, and the row-wise and data-parallel collectives, over 2 ranks"),
            std::string::npos) << header.dump();
  for (const json& rec : records) {
    EXPECT_GT(rec["algos"]["neuroshard"]["measured_ms"].get<double>(), 0) << rec.dump();
  }
  EXPECT_NE(r.output.find("MPI all-to-all, and the row-wise and data-parallel collectives, over 2 ranks"), std::string::npos) << r.output;
  // The same file without mpirun: another run's communication, refused.
  const std::string before = slurp(dir.file("e.jsonl"));
  const auto single = run_cli(args + " --devices 2");
  EXPECT_NE(single.exit_code, 0);
  EXPECT_NE(single.output.find("comm"), std::string::npos) << single.output;
  EXPECT_EQ(slurp(dir.file("e.jsonl")), before);
  // --comm-passes: each plan's all-to-alls measured twice, the fastest kept.
  const std::string passes_base = "eval --tasks " + dir.file("t.json") +
                                  " --algos size_greedy,neuroshard --cost-model analytic "
                                  "--expert comm-warmup=1,comm-repeats=2 --reference-window-s 0.3 "
                                  "--comm-passes 2 --expert comm-pass-pause-s=0.1";
  const std::string passes_args = passes_base + " --out " + dir.file("p.jsonl");
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
      EXPECT_EQ(a["measured_ms"].get<double>(),
                std::min(a["measured_passes_ms"][0].get<double>(),
                         a["measured_passes_ms"][1].get<double>()))
          << a.dump();
    }
  }
  // A verified algorithm chooses on as many passes, and says so.
  const auto verified = testing::run_mpi_cli(
      2, "eval --tasks " + dir.file("t.json") +
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
  // --raw-clock: the same plans on the wall clock, as many passes, beside.
  const auto raw = testing::run_mpi_cli(2, passes_base + " --raw-clock --out " +
                                               dir.file("raw.jsonl"));
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
  const auto medians = testing::run_mpi_cli(2, passes_base + " --compute-passes 2 --out " +
                                                   dir.file("c.jsonl"));
  ASSERT_EQ(medians.exit_code, 0) << medians.output;
  EXPECT_NE(medians.output.find("x best (1st compute)"), std::string::npos) << medians.output;
  for (const json& rec : RecordFile::read_all(dir.file("c.jsonl"), nullptr, nullptr)) {
    const json& a = rec["algos"]["neuroshard"];
    EXPECT_EQ(a["device_compute_ms"]["measured_passes"].size(), 2u) << a.dump();
    EXPECT_EQ(a["measured_passes_ms"].size(), 2u) << a.dump();
    EXPECT_EQ(a["measured_first_compute_passes_ms"].size(), 2u) << a.dump();
  }
  // Resuming it without --raw-clock would mix records: refused by name.
  const auto mixed = testing::run_mpi_cli(2, passes_base + " --out " + dir.file("raw.jsonl"));
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_NE(mixed.output.find("'raw_clock'"), std::string::npos) << mixed.output;
  // In one process the communication is the model's: nothing to measure again.
  const auto one_raw = run_cli("eval --tasks " + dir.file("t.json") +
                               " --algos size_greedy --cost-model analytic --devices 2 "
                               "--raw-clock --out " + dir.file("one_raw.jsonl"));
  EXPECT_NE(one_raw.exit_code, 0);
  EXPECT_NE(one_raw.output.find("--raw-clock measures the all-to-alls on the raw clock, which "
                                "needs mpirun"),
            std::string::npos)
      << one_raw.output;
  EXPECT_FALSE(file_exists(dir.file("one_raw.jsonl")));
  const auto no_verify = run_cli("eval --tasks " + dir.file("t.json") +
                                 " --algos size_greedy --cost-model analytic --devices 2 "
                                 "--expert verify-tables --out " +
                                 dir.file("no_verify.jsonl"));
  EXPECT_NE(no_verify.exit_code, 0);
  EXPECT_NE(no_verify.output.find("--expert verify-tables needs a +verify algorithm"),
            std::string::npos)
      << no_verify.output;
  EXPECT_FALSE(file_exists(dir.file("no_verify.jsonl")));
  const auto one = run_cli(passes_args + " --devices 2");
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.output.find("--comm-passes 2 measures the all-to-alls again, which needs mpirun"),
            std::string::npos)
      << one.output;
  // More devices asked than ranks started: a clear error, no file, no hang.
  const auto bad = testing::run_mpi_cli(2, "eval --tasks " + dir.file("t.json") +
                                               " --algos neuroshard --devices 3 --out " +
                                               dir.file("bad.jsonl"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--devices is 3 but mpirun started 2 ranks"), std::string::npos)
      << bad.output;
  // An unknown algorithm: refused by rank 0 before any exchange is timed (the
  // run above timed its reference exchange first), and every rank leaves.
  EXPECT_NE(r.output.find("timing the reference exchange now"), std::string::npos) << r.output;
  const auto unknown = testing::run_mpi_cli(2, "eval --tasks " + dir.file("t.json") +
                                                   " --algos neuroshard,nope --cost-model analytic "
                                                   "--out " + dir.file("unknown.jsonl"));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("unknown planner 'nope'"), std::string::npos) << unknown.output;
  EXPECT_EQ(unknown.output.find("timing the reference exchange"), std::string::npos)
      << unknown.output;
  EXPECT_FALSE(file_exists(dir.file("unknown.jsonl")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.jsonl")));
}

// A table larger than a device is split by rows: its index all-to-all,
// reduce-scatter and all-gather are measured across the ranks too.
TEST(Eval, UnderMpirunMeasuresRowWiseCollectives) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  ScratchDir dir("eval_mpi_rows");
  const auto s = run_cli("synth --profile 2022 --tables 3 --batch 512 --huge-tables 1 "
                         "--huge-rows 400000 -o " + dir.file("pool"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto t = run_cli("tasks --pool " + dir.file("pool") + " --tables 3 --dims 128 "
                         "--mem-cap 160MiB --count 1 --oversized -o " + dir.file("t.json"));
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
