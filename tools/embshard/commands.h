// The embshard CLI: one file per command, each adding its subcommand here.
// A command parses its arguments, makes one library call and prints.
#pragma once

#include <CLI/CLI.hpp>

namespace embshard::cli {

void add_demo_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_bench_command(CLI::App& app);  // bench compute | kernel | comm | plan | cost-model
void add_bench_compute_command(CLI::App& bench);
void add_bench_kernel_command(CLI::App& bench);
void add_bench_comm_command(CLI::App& bench);
void add_bench_plan_command(CLI::App& bench);
void add_bench_cost_model_command(CLI::App& bench);
void add_bench_repeat_command(CLI::App& bench);  // bench repeat | stream
void add_calibrate_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_train_policy_command(CLI::App& app);
void add_fit_command(CLI::App& app);
void add_validate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_diff_command(CLI::App& app);
void add_tasks_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_eval_report_command(CLI::App& app);

}  // namespace embshard::cli
