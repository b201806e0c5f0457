// embshard diff: two plans of the same tables side by side.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/plan/diff.h"

namespace embshard::cli {

void add_diff_command(CLI::App& app) {
  struct Args {
    std::string plan_a, plan_b;
    bool all_tables = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "diff",
      "Compare two plans of the same tables: per device, per table, and the tables that "
      "moved");
  cmd->add_option("a", args->plan_a, "Plan A (from `embshard plan -o`)")->required();
  cmd->add_option("b", args->plan_b, "Plan B, compared against A")->required();
  cmd->add_flag("--all", args->all_tables, "List every table, not only those that changed");
  cmd->add_flag("--json", args->json, "Print JSON (documented in docs/formats.md)");
  cmd->callback([args] {
    const PlanDiff diff = diff_plans(load_plan_file(args->plan_a), load_plan_file(args->plan_b));
    fmt::print("{}", args->json ? plan_diff_json(diff, args->all_tables).dump(2) + "\n"
                                : plan_diff_text(diff, args->all_tables));
  });
}

}  // namespace embshard::cli
