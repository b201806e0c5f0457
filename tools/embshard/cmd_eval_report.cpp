// embshard eval-report: eval record files read as one report, nothing measured.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/eval/combine.h"
#include "embshard/util/file.h"
#include "options.h"

namespace embshard::cli {

void add_eval_report_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> files;
    std::vector<std::string> algos;
    std::string against;
    bool json = false;
    std::string svg;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "eval-report",
      "Report eval record files, one or many (task sets of other pools or seeds), side by side "
      "and pooled, without measuring anything");
  cmd->add_option("files", args->files, "Record files written by `embshard eval -o`")
      ->required();
  add_list_option(cmd, "--algos", args->algos,
                  "Algorithms to compare, each in every file (default: those in every file)");
  cmd->add_option("--against", args->against,
                  "The algorithm every ratio is to (default: each set's best baseline, and the "
                  "pooled best baseline for the pool)");
  cmd->add_flag("--json", args->json, "Print JSON (documented in docs/eval.md)");
  cmd->add_option("--svg", args->svg,
                  "Write a chart: each set's ratio, and the mean of the sets' ratios with its "
                  "interval over the sets");
  cmd->callback([args] {
    if (!args->svg.empty()) {
      for (const std::string& file : args->files) {
        check_distinct_outputs({{"--svg", args->svg}, {"the record file", file}});
      }
      check_writable(args->svg, "--svg");
    }
    const CombinedEval combined = combine_eval(args->files, args->algos, args->against);
    fmt::print("{}", args->json ? combined_eval_json(combined).dump(2) + "\n"
                                : combined_eval_report(combined));
    if (!args->svg.empty()) write_file_atomic(args->svg, combined_eval_svg(combined));
  });
}

}  // namespace embshard::cli
