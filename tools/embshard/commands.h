// The embshard CLI: one file per command, each adding its subcommand here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace embshard::cli {

void add_inspect_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_bench_command(CLI::App& app);  // bench kernel | compute | comm | plan
void add_demo_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_eval_commands(CLI::App& app);  // tasks | eval
void add_train_command(CLI::App& app);
void add_validate_command(CLI::App& app);
void add_bench_kernel_command(CLI::App& bench);      // under bench
void add_bench_comm_command(CLI::App& bench);        // under bench
void add_bench_plan_command(CLI::App& bench);        // under bench
void add_bench_cost_model_command(CLI::App& bench);  // under bench

// Prints the last `show` records of a `bench compute` output file as a table.
void print_compute_records(const std::string& path, int64_t show);

}  // namespace embshard::cli
