// Inference plans (--task inference): the forward's costs, weights without
// optimizer state, quantized tables; the plan JSON's task read back.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/analytic/model.h"
#include "embshard/plan/plan_file.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/table_specs.h"
#include "test_util.h"

namespace embshard {
namespace {

Workload quantized_workload() {
  return parse_table_specs(R"({"batch_size": 2048, "tables": [
      {"name": "a", "rows": 200000, "dim": 64, "data_type": "int8"},
      {"name": "b", "rows": 100000, "dim": 32, "data_type": "int4"},
      {"name": "c", "rows": 50000, "dim": 128, "data_type": "fp16"},
      {"name": "d", "rows": 80000, "dim": 16},
      {"name": "e", "rows": 3000, "dim": 8, "data_type": "int8"}]})",
                           "q.json");
}

PlanRequest request(const Workload& w, StepKind step) {
  PlanRequest r;
  r.workload = w;
  r.devices = 2;
  r.mem_per_device_bytes = int64_t{1} << 30;
  r.cost_model = "analytic";
  r.step = step;
  r.verify.candidates = 0;
  return r;
}

// The forward's compute is the analytic forward alone; the exchanges keep
// their forward, the backward reads 0, and collectives add nothing backward.
TEST(Inference, CostModelsPriceTheForwardAlone) {
  CostModelOptions o;
  o.batch_size = 2048;
  const CostModel training = create_cost_model("analytic", o);
  o.forward_only = true;
  const CostModel inference = create_cost_model("analytic", o);
  TableFeatures t = table_features(quantized_workload().tables[3], 16);
  const int a = training.compute->add_table(t), b = inference.compute->add_table(t);
  const double train_ms = training.compute->compute_ms(std::vector<int>{a});
  const double fwd_ms = inference.compute->compute_ms(std::vector<int>{b});
  EXPECT_GT(fwd_ms, 0);
  EXPECT_LT(fwd_ms, train_ms);
  const std::vector<double> dims = {64, 32}, delays = {0, 0.5};
  std::vector<double> f1(2), b1(2), f2(2), b2(2);
  training.comm->comm_ms(dims, delays, f1, b1);
  inference.comm->comm_ms(dims, delays, f2, b2);
  EXPECT_EQ(f1, f2);
  EXPECT_EQ(b2, std::vector<double>(2, 0.0));
  EXPECT_GT(b1[0], 0);
  CollectiveLoad load;
  load.reset(2);
  load.add_row_shard(0, 32, 1e6);
  load.add_row_shard(1, 32, 1e6);
  std::vector<double> cf(2, 1.0), cb(2, 1.0);
  inference.comm->collective_ms(load, cf, cb);
  EXPECT_GT(cf[0], 1.0);
  EXPECT_EQ(cb, std::vector<double>(2, 1.0));
}

// Quantized tables plan for inference: weights only, the task in the JSON
// and the report, read back; a training plan of them is refused naming
// --task inference, and an optimizer for inference is refused.
TEST(Inference, QuantizedTablesPlanWithWeightsOnly) {
  const Workload w = quantized_workload();
  const PlanOutcome out = plan_workload(request(w, StepKind::kInference), silent_reporter());
  EXPECT_EQ(out.task.step, StepKind::kInference);
  for (int t = 0; t < out.task.num_tables(); ++t) {
    EXPECT_EQ(out.task.table_bytes(t), w.tables[t].weight_bytes()) << w.tables[t].name;
  }
  const nlohmann::json j = plan_to_json(out.task, out.result);
  EXPECT_EQ(j["task"], "inference");
  EXPECT_EQ(j["memory_model"]["optimizer_bytes_per_row"], 0);
  EXPECT_EQ(parse_plan_file(j.dump(), "p.json").step, StepKind::kInference);
  nlohmann::json wrong = j;
  wrong["task"] = "serving";
  EXPECT_NE(testing::error_of([&] {
              parse_plan_file(wrong.dump(), "p.json");
            }).find("field 'task' is \"serving\""),
            std::string::npos);
  wrong.erase("task");  // a plan written before inference plans: training
  EXPECT_EQ(parse_plan_file(wrong.dump(), "p.json").step, StepKind::kTraining);
  const std::string report = plan_report(out.task, out.result, false);
  EXPECT_NE(report.find("inference: weights only"), std::string::npos) << report;

  const std::string refused =
      testing::error_of([&] { plan_workload(request(w, StepKind::kTraining), silent_reporter()); });
  EXPECT_NE(refused.find("table 'a' is int8"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--task inference"), std::string::npos) << refused;
  PlanRequest r = request(w, StepKind::kTraining);
  const std::string optimizer =
      testing::error_of([&] { set_step(r, "inference", "adam", "--task", "--optimizer"); });
  EXPECT_NE(optimizer.find("--optimizer adam"), std::string::npos) << optimizer;
  EXPECT_NE(testing::error_of([&] {
              set_step(r, "serve", "", "--task", "--optimizer");
            }).find("--task is 'serve'"),
            std::string::npos);
}

// The same fp16 and fp32 tables cost less to serve than to train, and take
// less memory (no optimizer state).
TEST(Inference, ServingCostsLessThanTraining) {
  Workload w = quantized_workload();
  w.tables.erase(w.tables.begin(), w.tables.begin() + 2);
  w.tables.pop_back();
  const PlanOutcome train = plan_workload(request(w, StepKind::kTraining), silent_reporter());
  const PlanOutcome serve = plan_workload(request(w, StepKind::kInference), silent_reporter());
  EXPECT_LT(serve.result.predicted.cost_ms, train.result.predicted.cost_ms);
  for (int t = 0; t < serve.task.num_tables(); ++t) {
    EXPECT_LT(serve.task.table_bytes(t), train.task.table_bytes(t));
  }
}

// The CLI: --task inference plans quantized tables; with --optimizer it is refused.
TEST(Inference, CliTaskOption) {
  testing::ScratchDir dir("inference_cli");
  const std::string specs = dir.file("q.json");
  testing::spit(specs, R"({"batch_size": 1024, "tables": [
      {"name": "a", "rows": 100000, "dim": 32, "data_type": "int8"},
      {"name": "b", "rows": 50000, "dim": 16, "data_type": "int4"}]})");
  const auto ok = testing::run_cli("plan --tables " + specs +
                                   " --devices 2 --task inference --cost-model analytic -o " +
                                   dir.file("p.json"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("inference: weights only"), std::string::npos) << ok.output;
  const auto bad =
      testing::run_cli("plan --tables " + specs + " --devices 2 --task inference --optimizer adam");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--optimizer adam"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace embshard
