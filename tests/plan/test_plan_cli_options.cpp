// The CLI's own option parsing: sizes with units, output paths, list
// options, misspelt commands.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace embshard {
namespace {

// Sizes with units, and output paths checked before any search.
TEST(PlanCliOptions, SizesTakeUnitsAndBadOutputPathsFailFirst) {
  testing::ScratchDir dir("plan_units");
  const auto ok = testing::run_cli("plan --devices 4 --algo size_greedy --mem-per-device 3GB -o " +
                                   dir.file("p.json"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const auto bad_unit = testing::run_cli("plan --devices 4 --mem-per-device 3XB");
  EXPECT_NE(bad_unit.exit_code, 0);
  EXPECT_NE(bad_unit.output.find("--mem-per-device"), std::string::npos) << bad_unit.output;
  EXPECT_NE(bad_unit.output.find("XB"), std::string::npos) << bad_unit.output;
  const auto bad_out =
      testing::run_cli("plan --devices 4 --algo size_greedy -o " + dir.file("missing/p.json"));
  EXPECT_NE(bad_out.exit_code, 0);
  EXPECT_NE(bad_out.output.find("does not exist"), std::string::npos) << bad_out.output;
  // Refused before planning: no plan report.
  EXPECT_EQ(bad_out.output.find("predicted cost"), std::string::npos) << bad_out.output;
}

// Re-planning: --from takes a plan file, --max-moves needs it, and the report
// says what moved.
TEST(PlanCliOptions, ReplanFromAPlanFile) {
  testing::ScratchDir dir("plan_from");
  const std::string old = dir.file("old.json");
  ASSERT_EQ(testing::run_cli("plan --devices 4 --algo size_greedy --mem-per-device 3GB -o " + old)
                .exit_code,
            0);
  const auto r = testing::run_cli("plan --devices 4 --mem-per-device 3GB --from " + old +
                                  " --max-moves 3 -o " + dir.file("new.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("re-planned from " + old + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("moved (at most 3)"), std::string::npos) << r.output;
  const auto alone = testing::run_cli("plan --devices 4 --max-moves 3");
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.output.find("--max-moves requires --from"), std::string::npos) << alone.output;
  const auto missing = testing::run_cli("plan --devices 4 --from " + dir.file("none.json"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("none.json"), std::string::npos) << missing.output;
}

// Every list option refuses an empty item, which CLI11's delimiter would
// drop, and an item that is not of its kind, naming the option; refused
// before any work (synth writes no workload).
TEST(PlanCliOptions, ListOptionsRefuseEmptyAndMalformedItems) {
  testing::ScratchDir dir("list_options");
  const std::string out = dir.file("w");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"synth --profile 2021 --tables 2 --batch 8 -o " + out + " --dims 8,,16",
       "--dims: an empty item in '8,,16'"},
      {"synth --profile 2021 --tables 2 --batch 8 -o " + out + " --dims 8,sixteen",
       "--dims: 'sixteen' in '8,sixteen' is not a"},
      {"tasks --pool " + out + " --dims 16,", "--dims: an empty item in '16,'"},
      {"eval --tasks " + dir.file("t.json") + " --algos neuroshard,,torchrec",
       "--algos: an empty item"},
      {"bench plan --sizes 50x4,,100x8", "--sizes: an empty item"},
      {"fit --batches 1024,0 -o " + out, "--batches: '0'"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = testing::run_cli(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  // Lists still take several items, and several occurrences.
  const auto ok = testing::run_cli("synth --profile 2021 --tables 2 --batch 8 -o " + out +
                                   " --dims 8,16 --dims 32");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
}

TEST(PlanCliOptions, AMisspeltCommandIsNamed) {
  const auto top = testing::run_cli("plna --devices 4");
  EXPECT_NE(top.exit_code, 0);
  EXPECT_NE(top.output.find("unknown command 'plna'"), std::string::npos) << top.output;
  EXPECT_NE(top.output.find("plan, diff"), std::string::npos) << top.output;
  const auto nested = testing::run_cli("bench plna");
  EXPECT_NE(nested.exit_code, 0);
  EXPECT_NE(nested.output.find("unknown command 'plna' of 'bench'"), std::string::npos)
      << nested.output;
}

}  // namespace
}  // namespace embshard
