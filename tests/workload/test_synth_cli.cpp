// The synth and inspect commands end to end: flags, errors, JSON names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "embshard/workload/stats.h"
#include "test_util.h"

namespace embshard {
namespace {

using CliResult = testing::CommandResult;
using testing::run_cli;

class SynthCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(EMBSHARD_CLI_PATH)) GTEST_SKIP() << "no CLI at " EMBSHARD_CLI_PATH;
    dir_ = (std::filesystem::temp_directory_path() /
            ("embshard_test_synth_cli_" + std::to_string(::getpid())))
               .string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SynthCli, BadFlagsFailWithAMessage) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"synth --profile 2020 --tables 4 --batch 8 -o " + dir_, "valid profiles: 2021, 2022"},
      {"synth --profile 2021 --tables 0 --batch 8 -o " + dir_, "--tables is 0, must be in 1..1000000"},
      {"synth --profile 2021 --tables 4 --batch 8 --dims 16,4096 -o " + dir_,
       "--dims value 4096 is out of range 1..1024"},
      {"synth --profile 2021 --tables 4 --batch 8 --index-bytes 2 -o " + dir_,
       "--index-bytes is 2, must be 4 or 8"},
      {"synth --tables 4 --batch 8 -o " + dir_, "--profile is required"},
      {"inspect " + dir_ + "/missing", "no such directory"},
      {"synth --profile 2021 --tables 2 --seed -1 -o " + dir_,
       "--seed: is -1, must be a non-negative"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

// An empty value ('' or --name=) is not the option left out: CLI11 would
// read it as not given and the command would run on the default.
TEST_F(SynthCli, AnEmptyValueIsAnErrorNotTheDefault) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"synth --profile 2021 --tables 4 --batch 8 --seed '' -o " + dir_,
       "argument 9 is empty (after '--seed')"},
      {"synth --profile= --tables 4 --batch 8 -o " + dir_, "'--profile' has an empty value"},
      {"plan '' --devices 2", "argument 2 is empty (after 'plan')"},
      {"plan --devices 2 --model=", "'--model' has an empty value"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

TEST_F(SynthCli, SynthThenInspectJson) {
  const CliResult synth = run_cli("synth --profile 2022 --tables 30 --batch 1024 --seed 4 -o " + dir_);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  EXPECT_NE(synth.output.find("synth: 30/30 (100%)"), std::string::npos) << synth.output;
  const CliResult inspect = run_cli("inspect " + dir_ + " --json --compare 2022 2>/dev/null");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  const auto j = nlohmann::json::parse(inspect.output);
  const auto& a = j.at("aggregate");
  EXPECT_EQ(a.at("row_reuse_histogram").size(), kReuseBins);
  EXPECT_EQ(a.at("lookup_reuse_histogram").size(), kReuseBins);
  for (const char* field : {"avg_pooling_factor", "unique_ratio", "num_indices", "unique_rows",
                            "weight_bytes"}) {
    EXPECT_TRUE(a.contains(field)) << field;
  }
  EXPECT_EQ(j.at("tables").size(), 30u);
  EXPECT_LE(j.at("comparison").at("lookup_reuse_tv").get<double>(), 0.05);
  EXPECT_LE(j.at("comparison").at("row_reuse_tv").get<double>(), 0.05);
  // The text: every top reuse bin stands apart from the next, the widest included (a
  // small hot table of this pool puts 23% of its lookups in "(16384, 32768]").
  const std::string hot = dir_ + "/hot";
  ASSERT_EQ(run_cli("synth --profile 2021 --tables 20 --batch 2048 --seed 11 --hot-tables 2 "
                    "--hot-pooling 300 -o " + hot).exit_code, 0);
  const CliResult text = run_cli("inspect " + hot + " 2>/dev/null");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("(16384, 32768] "), std::string::npos) << text.output;
  EXPECT_EQ(text.output.find("%("), std::string::npos) << text.output;
}

// Ctrl-C or a kill while the trace is written leaves no temporary file (of
// gigabytes, for a big workload) behind, nor the directory synth made, and
// the exit status says why.
TEST_F(SynthCli, SigtermRemovesTheTemporaryTrace) {
  const std::string out = dir_ + "/killed";
  // synth into `out`, sent SIGTERM once its temporary trace is there.
  const auto killed_synth = [&] {
    const CliResult r = testing::run_shell(
        "sh -c '" + std::string(EMBSHARD_CLI_PATH) +
        " synth --profile 2021 --tables 100 --batch 65536 -o " + out +
        " >/dev/null 2>&1 & p=$!; i=0; while [ $i -lt 200 ] && ! ls " + out +
        "/*.tmp.* >/dev/null 2>&1; do sleep 0.05; i=$((i+1)); done; kill -TERM $p; wait $p; "
        "echo status=$?'");
    EXPECT_NE(r.output.find("status=143"), std::string::npos) << r.output;  // 128 + SIGTERM
  };
  killed_synth();
  EXPECT_FALSE(std::filesystem::exists(out));
  // Into a directory that was there: the trace's temporary file goes, the
  // directory and what it held stay.
  std::filesystem::create_directories(out);
  testing::spit(out + "/notes.txt", "mine\n");
  killed_synth();
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
}

// demo, which starts with synth, refuses its later steps' bad options
// before the first step writes anything.
TEST(DemoCli, BadOptionsAreRefusedBeforeAnyStep) {
  testing::ScratchDir dir("demo_refused");
  for (const char* bad : {"--devices 0", "--devices 70000", "--samples -1", "--threads 0"}) {
    const CliResult r = run_cli("demo --tables 4 " + std::string(bad) + " -o " + dir.file("d"));
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
    EXPECT_NE(r.output.find(std::string(bad).substr(0, std::string(bad).find(' '))),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("d"))) << bad;
  }
}

}  // namespace
}  // namespace embshard
