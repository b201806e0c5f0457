// embshard: plan how to shard embedding tables across devices.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace {

// CLI11 says only that a command is required when the word given is none:
// name the word and the commands it could have been.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  const auto all = [](CLI::App*) { return true; };
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return "";
    const std::vector<CLI::App*> subs = at->get_subcommands(all);
    if (subs.empty()) return "";
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* sub : subs) {
      names.push_back(sub->get_name());
      if (sub->get_name() == word) next = sub;
    }
    if (next == nullptr) {
      return fmt::format("unknown command '{}'{}; the commands are: {}", word,
                         at == &app ? "" : " of '" + at->get_name() + "'",
                         fmt::join(names, ", "));
    }
    at = next;
  }
  return "";
}

// CLI11 reads an empty value ("" or --name=) as the option not given, so
// `--model "$UNSET"` would silently plan with the shipped model: an empty
// argument is an error naming it.
std::string empty_argument(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty()) {
      return fmt::format("argument {} is empty{}: give a value, or leave the option out for its "
                         "default",
                         i, i > 1 ? fmt::format(" (after '{}')", argv[i - 1]) : "");
    }
    if (word.size() > 1 && word[0] == '-' && word.back() == '=') {
      return fmt::format("'{}' has an empty value: give a value, or leave the option out for its "
                         "default",
                         word.substr(0, word.size() - 1));
    }
  }
  return "";
}

#ifdef EMBSHARD_TORCH_CLI  // `embshard` only, never `embshard-torch` (CMakeLists.txt)
// The command's words ("bench kernel") where its file tests EMBSHARD_WITH_TORCH,
// else "": this binary links no libtorch, and such a command runs in the one
// beside it that does (CMakeLists.txt).
std::string torch_command(int argc, char** argv) {
  if (argc < 2) return "";
  const std::string command = argv[1];
  if (command == "train" || command == "train-policy" || command == "fit") return command;
  if (command != "bench" || argc < 3) return "";
  const std::string bench = argv[2];
  return bench == "kernel" || bench == "cost-model" ? command + " " + bench : "";
}

// Replaces this process with the libtorch CLI, same arguments; returns an
// error message only when it cannot.
std::string run_in_torch_cli(const std::string& command, char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return fmt::format("cannot find this binary's path: {}", error.message());
  const std::filesystem::path torch_cli = self.parent_path() / EMBSHARD_TORCH_CLI;
  if (!std::filesystem::exists(torch_cli)) {
    return fmt::format("'{}' needs libtorch, which runs in '{}' beside this binary, and that file "
                       "is missing: keep the two binaries together",
                       command, torch_cli.string());
  }
  ::execv(torch_cli.c_str(), argv);
  return fmt::format("cannot run '{}': {}", torch_cli.string(), std::strerror(errno));
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef EMBSHARD_TORCH_CLI  // `embshard` only, never `embshard-torch` (CMakeLists.txt)
  if (const std::string command = torch_command(argc, argv); !command.empty()) {
    std::fprintf(stderr, "embshard: error: %s\n", run_in_torch_cli(command, argv).c_str());
    return 1;
  }
#endif
  // A temporary file being written (a trace of gigabytes) goes with the
  // process when Ctrl-C or a kill ends it.
  embshard::remove_temp_files_on_signals();
  CLI::App app{"embshard: measure, model and plan the sharding of embedding tables"};
  app.set_version_flag("--version", EMBSHARD_VERSION);
  app.require_subcommand(1);
  embshard::cli::add_demo_command(app);
  embshard::cli::add_synth_command(app);
  embshard::cli::add_import_command(app);
  embshard::cli::add_inspect_command(app);
  embshard::cli::add_bench_command(app);
  embshard::cli::add_calibrate_command(app);
  embshard::cli::add_train_command(app);
  embshard::cli::add_train_policy_command(app);
  embshard::cli::add_fit_command(app);
  embshard::cli::add_validate_command(app);
  embshard::cli::add_plan_command(app);
  embshard::cli::add_diff_command(app);
  embshard::cli::add_tasks_command(app);
  embshard::cli::add_eval_command(app);
  embshard::cli::add_eval_report_command(app);
  if (const std::string empty = empty_argument(argc, argv); !empty.empty()) {
    std::fprintf(stderr, "embshard: error: %s\n", empty.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    const std::string unknown = unknown_command(app, argc, argv);
    if (unknown.empty()) return app.exit(e);
    std::fprintf(stderr, "embshard: error: %s\n", unknown.c_str());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const embshard::Error& e) {
    std::fprintf(stderr, "embshard: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embshard: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
