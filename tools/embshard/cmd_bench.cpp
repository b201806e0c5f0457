// embshard bench: compute | kernel | comm | plan | cost-model | repeat | stream.
#include "commands.h"

namespace embshard::cli {

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure costs on this machine");
  bench->require_subcommand(1);
  add_bench_compute_command(*bench);
  add_bench_kernel_command(*bench);
  add_bench_comm_command(*bench);
  add_bench_plan_command(*bench);
  add_bench_cost_model_command(*bench);
  add_bench_repeat_command(*bench);
}

}  // namespace embshard::cli
