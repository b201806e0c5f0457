// embshard: plan how to shard embedding tables across devices.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "embshard/util/error.h"

int main(int argc, char** argv) {
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
  try {
    app.parse(argc, argv);
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
