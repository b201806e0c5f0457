#include <gtest/gtest.h>

#include <tuple>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"
#include "cost/cost_test_util.h"
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
  // --whole-pool: one task of every table at its own dim, however large.
  TaskGenOptions whole = o;
  whole.whole_pool = true;
  whole.mem_cap_bytes = 1;
  const auto one = generate_tasks(pool, whole);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].tables.size(), pool.tables.size());
  for (size_t t = 0; t < pool.tables.size(); ++t) {
    EXPECT_EQ(one[0].tables[t], static_cast<int>(t));
    EXPECT_EQ(one[0].dims[t], pool.tables[t].dim);
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
}

// Numbers that are not integers of the field's range are errors, never
// truncated (3.9 read as table 3, 2^32 + 5 as table 5); an empty task list
// and the header's fields are named with the value found.
TEST(Eval, TaskFilesNameTheFieldAndValue) {
  ScratchDir dir("eval_tasks_bad");
  const std::string pool_dir = make_pool(dir, 16);
  const std::string path = dir.file("tasks.json");
  save_tasks(
      path, pool_dir,
      generate_tasks(load_workload(pool_dir), testing::task_options(pool_dir, 4, 8, 1 << 20, 5)));
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

// One trace per task and algorithm, one track per device, ending at the
// measured cost; below it (process 1) the model's prediction of the plan,
// ending at the predicted cost.
void expect_traces_match_records(const ScratchDir& dir, const std::vector<json>& records) {
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
}

// Every algorithm's figures, and what the verified one's rounds measured.
void expect_records_of_every_algorithm(const std::vector<json>& records) {
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
}

// Another run's records, a torn or repeated record, or another task file:
// never resumed silently.
void expect_resumes_only_its_own_records(const EvalOptions& o) {
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
}

void expect_summary_of_three_algorithms(const std::vector<json>& records,
                                        const std::vector<std::string>& algos) {
  const EvalSummary summary = summarize_eval(records, algos);
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
  expect_traces_match_records(dir, records);
  expect_records_of_every_algorithm(records);
  EXPECT_EQ(run_eval(o, silent_reporter()).size(), 3u);  // resumed: nothing new to do
  expect_resumes_only_its_own_records(o);
  expect_summary_of_three_algorithms(records, o.algos);
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

// A model that learned raw medians (a GPU set's) is judged on the raw clock,
// and the header says so; an executor other than the CPU is refused under
// mpirun (each rank would measure on the one device), naming it.
TEST(Eval, AModelOfRawMediansIsJudgedOnRawMediansAndOneDeviceIsNotShared) {
  ScratchDir dir("eval_raw_truth");
  NeuralModel model = testing::random_neural_model(3);
  model.info["data"]["ground_truth"] = ground_truth_label(false);
  save_neural_model(model, dir.file("raw_model"));
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  o.algos = {"size_greedy"};
  o.devices = 2;
  o.cost_model = "neural";
  o.model_dir = dir.file("raw_model");
  o.out_path = dir.file("eval.jsonl");
  o.measure.reference_window_s = 0.3;
  o.trace_dir = dir.file("traces");
  const auto records = run_eval(o, silent_reporter());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_GT(records[0]["algos"]["size_greedy"]["measured_ms"].get<double>(), 0);
  json header;
  RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["ground_truth"], ground_truth_label(false));
  // The iteration's trace names what measured it.
  EXPECT_NE(slurp(dir.file("traces/task0_size_greedy.json")).find("measured compute (raw medians)"),
            std::string::npos);

  o.measure.executor = "cuda";
  const std::string e = testing::error_of([&] { check_eval_options(o, true); });
  EXPECT_NE(e.find("--executor cuda under mpirun"), std::string::npos) << e;
  o.measure.executor = "cpu";
  EXPECT_NO_THROW(check_eval_options(o, true));
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

}  // namespace
}  // namespace embshard
