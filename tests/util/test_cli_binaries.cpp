// The CLI's two binaries: `embshard` links no libtorch, and runs the commands
// that use it in `embshard-torch` beside it (CMakeLists.txt, tools/embshard/main.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "test_util.h"

namespace embshard {
namespace {

using testing::run_shell;
using testing::ScratchDir;

const char* const kTorchCommands[] = {"train", "train-policy", "fit", "bench kernel",
                                      "bench cost-model"};

std::filesystem::path torch_cli() {
  return std::filesystem::path(EMBSHARD_CLI_PATH).parent_path() / "embshard-torch";
}

// The dynamic loader names each library it loads (LD_DEBUG=libs).
bool loads_libtorch(const std::string& args) {
  const testing::CommandResult r =
      run_shell(std::string("LD_DEBUG=libs ") + EMBSHARD_CLI_PATH + " " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output.substr(0, 2000);
  return r.output.find("libtorch_cpu") != std::string::npos;
}

TEST(CliBinaries, OnlyTheCommandsThatUseLibtorchLoadIt) {
  if (!std::filesystem::exists(torch_cli())) GTEST_SKIP() << "built without libtorch";
  for (const char* command : kTorchCommands) {
    EXPECT_TRUE(loads_libtorch(std::string(command) + " --help")) << command;
  }
  for (const char* command : {"--version", "--help", "synth --help", "plan --help",
                              "eval --help", "bench plan --help", "bench compute --help",
                              "validate --help", "calibrate --help"}) {
    EXPECT_FALSE(loads_libtorch(command)) << command;
  }
  // The forwarded command is the whole one, not the stand-in a build
  // without libtorch has: `train`'s own options, and its arguments reach it.
  const testing::CommandResult help = testing::run_cli("train --help");
  EXPECT_NE(help.output.find("--compute"), std::string::npos) << help.output;
  const testing::CommandResult bad =
      testing::run_cli("train --compute /nonexistent/c.jsonl --out /nonexistent/model");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("/nonexistent/c.jsonl"), std::string::npos) << bad.output;
}

TEST(CliBinaries, ACopyWithoutTheTorchCliSaysWhatIsMissing) {
  if (!std::filesystem::exists(torch_cli())) GTEST_SKIP() << "built without libtorch";
  ScratchDir dir("cli_copy");
  const std::string copy = dir.file("embshard");
  std::filesystem::copy_file(EMBSHARD_CLI_PATH, copy);
  for (const char* command : kTorchCommands) {
    const testing::CommandResult r = run_shell(copy + " " + command + " --help");
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_NE(r.output.find(fmt::format("'{}' needs libtorch, which runs in '{}' beside this "
                                        "binary, and that file is missing",
                                        command, dir.file("embshard-torch"))),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(run_shell(copy + " plan --help").exit_code, 0);
}

}  // namespace
}  // namespace embshard
