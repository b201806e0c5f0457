// embshard inspect: per-table and aggregate statistics of a workload.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/workload/inspect.h"

namespace embshard::cli {

void add_inspect_command(CLI::App& app) {
  struct Args {
    std::string dir;
    bool json = false;
    std::string compare_profile;  // "" = no comparison
    std::string stats_dir;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Print per-table and aggregate statistics of a workload (recomputed from its "
                 "trace)");
  cmd->add_option("workload", args->dir, "Workload directory (tables.json [+ trace.bin])")
      ->required();
  cmd->add_flag("--json", args->json, "Print JSON (documented in docs/cli.md)");
  cmd->add_option("--compare", args->compare_profile,
                  "Also report the distance to a published profile: 2021 | 2022");
  cmd->add_option("--stats-dir", args->stats_dir,
                  "Directory of the published statistics files (default: data/published "
                  "under the data root, the shipped files)");
  cmd->callback([args] {
    const WorkloadInspection in =
        inspect_workload(args->dir, args->compare_profile, args->stats_dir);
    fmt::print("{}", args->json ? inspection_json(in).dump(2) + "\n" : inspection_text(in));
  });
}

}  // namespace embshard::cli
