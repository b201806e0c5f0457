// The --algos items: a planner with its own sharding types, uncertainty and
// verification budget, and the names eval refuses.
#include <gtest/gtest.h>

#include <string>

#include "embshard/eval/eval.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "eval_test_util.h"

namespace embshard {
namespace {

using testing::make_pool;
using testing::run_cli;
using testing::ScratchDir;

// An --algos item carries its own sharding types and uncertainty; anything
// else after the ':' is an error naming the item.
TEST(Eval, AlgoSpecsCarryTheirOwnOptions) {
  EvalOptions run;
  run.planner.uncertainty = 0.05;
  const AlgoSpec a = parse_algo_spec("neuroshard:uncertainty=0.15@table_wise+column_wise", run);
  EXPECT_EQ(a.name, "neuroshard");
  EXPECT_DOUBLE_EQ(a.planner.uncertainty, 0.15);
  EXPECT_TRUE(a.types.allows(ShardingType::kColumnWise));
  EXPECT_FALSE(a.types.allows(ShardingType::kRowWise));
  const AlgoSpec b = parse_algo_spec("neuroshard+verify:uncertainty=0", run);
  EXPECT_EQ(b.name, "neuroshard+verify");
  EXPECT_DOUBLE_EQ(b.planner.uncertainty, 0);
  EXPECT_TRUE(b.types.allows(ShardingType::kRowWise));
  const AlgoSpec c = parse_algo_spec("torchrec", run);
  EXPECT_EQ(c.name, "torchrec");
  EXPECT_DOUBLE_EQ(c.planner.uncertainty, 0.05);
  EXPECT_FALSE(b.verify.measure_tables);
  const AlgoSpec d = parse_algo_spec("neuroshard+verify:verify-tables:uncertainty=0.2", run);
  EXPECT_EQ(d.name, "neuroshard+verify");
  EXPECT_TRUE(d.verify.measure_tables);
  EXPECT_DOUBLE_EQ(d.planner.uncertainty, 0.2);
  // The run's --expert verify-tables reaches the verified algorithms only.
  run.verify.measure_tables = true;
  EXPECT_TRUE(parse_algo_spec("neuroshard+verify", run).verify.measure_tables);
  EXPECT_FALSE(parse_algo_spec("neuroshard", run).verify.measure_tables);
  // A +verify item's own verification budget; the run's where it sets none.
  run.verify.rounds = 3;
  const AlgoSpec e = parse_algo_spec("neuroshard+verify:candidates=2:rounds=1:leaders=0", run);
  EXPECT_EQ(e.name, "neuroshard+verify");
  EXPECT_EQ(e.verify.candidates, 2);
  EXPECT_EQ(e.verify.rounds, 1);
  EXPECT_EQ(e.verify.leaders, 0);
  // Searched on one host, measured on the run's hosts.
  EXPECT_TRUE(parse_algo_spec("neuroshard:flat", run).flat);
  EXPECT_FALSE(parse_algo_spec("neuroshard", run).flat);
  const AlgoSpec f = parse_algo_spec("neuroshard+verify:leaders=1", run);
  EXPECT_EQ(f.verify.candidates, run.verify.candidates);
  EXPECT_EQ(f.verify.rounds, 3);
  EXPECT_EQ(f.verify.leaders, 1);
  for (const std::string bad :
       {"neuroshard:uncertainty=", "neuroshard:uncertainty=0.1x", "neuroshard:uncertainty=-0.1",
        "neuroshard:beam=3", "neuroshard:", "neuroshard:flat=1", "neuroshard:verify-tables",
        "neuroshard+verify:verify-tables:", "neuroshard+verify:verify-tables=1",
        "neuroshard:candidates=2", "neuroshard+verify:candidates=0", "neuroshard+verify:candidates",
        "neuroshard+verify:rounds=1.5", "neuroshard+verify:leaders=-1",
        "neuroshard+verify:rounds=101"}) {
    const std::string e = testing::error_of([&] { parse_algo_spec(bad, run); });
    EXPECT_NE(e.find("--algos " + bad + ":"), std::string::npos) << e;
  }
  // The measured cost model has nothing for later rounds to correct, the
  // run's rounds or an item's.
  run.cost_model = "measured";
  run.verify.rounds = 1;
  run.algos = {"neuroshard+verify", "neuroshard+verify:rounds=2"};
  const std::string rounds = testing::error_of([&] { check_eval_options(run, false); });
  EXPECT_NE(rounds.find("neuroshard+verify:rounds=2 verifies in 2 rounds"), std::string::npos)
      << rounds;
  run.algos = {"neuroshard+verify"};
  EXPECT_TRUE(testing::error_of([&] { check_eval_options(run, false); }).empty());
}

// On hosts, every plan is predicted on them; `:flat` searches without them.
// Both cost at least what a one-host run predicts for them, and the search
// that sees the hosts predicts no worse than the one that does not.
TEST(Eval, HostsPriceEveryPlanAndFlatSearchesWithout) {
  ScratchDir dir("eval_hosts");
  EvalOptions o;
  o.tasks_path = testing::make_tasks(dir);
  o.algos = {"neuroshard", "neuroshard:flat"};
  o.devices = 4;
  o.topology = Topology{2, 1e-3, 0};
  o.cost_model = "analytic";
  o.out_path = dir.file("hosts.jsonl");
  o.predict_only = true;
  const auto hosts = run_eval(o, silent_reporter());
  o.topology = Topology{};
  o.out_path = dir.file("flat.jsonl");
  const auto flat = run_eval(o, silent_reporter());
  ASSERT_EQ(hosts.size(), flat.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const nlohmann::json& h = hosts[i]["algos"];
    EXPECT_LE(h["neuroshard"]["predicted_ms"].get<double>(),
              h["neuroshard:flat"]["predicted_ms"].get<double>() * 1.0001);
    EXPECT_GT(h["neuroshard:flat"]["predicted_ms"].get<double>(),
              flat[i]["algos"]["neuroshard:flat"]["predicted_ms"].get<double>());
    // Without hosts, :flat is the search itself.
    EXPECT_EQ(flat[i]["algos"]["neuroshard:flat"]["predicted_ms"],
              flat[i]["algos"]["neuroshard"]["predicted_ms"]);
  }
  nlohmann::json header;
  RecordFile::read_all(dir.file("hosts.jsonl"), &header, nullptr);
  EXPECT_EQ(header["topology"], "2 hosts of 2 devices, 0.001 GB/s between hosts");
  o.topology = Topology{2, 0, 0};
  EXPECT_NE(testing::error_of([&] { check_eval_options(o, false); }).find("--inter-host-gbps"),
            std::string::npos);
}

TEST(Eval, CliRejectsUnknownAlgorithm) {
  ScratchDir dir("eval_cli");
  const std::string pool_dir = make_pool(dir, 8);
  const auto t = run_cli("tasks --pool " + pool_dir + " --tables 3-5 --mem-cap 1048576 --count 2 -o " +
                         dir.file("t.json"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto r = run_cli("eval --tasks " + dir.file("t.json") + " --algos neuroshard,magic --out " +
                         dir.file("e.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("magic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("neuroshard"), std::string::npos) << r.output;  // the valid names
  EXPECT_FALSE(std::filesystem::exists(dir.file("e.jsonl")));
}

}  // namespace
}  // namespace embshard
