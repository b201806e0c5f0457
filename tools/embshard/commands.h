// The embshard CLI: one file per command, each adding its subcommand here.
#pragma once

#include <CLI/CLI.hpp>

namespace embshard::cli {

void add_inspect_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_bench_command(CLI::App& app);  // bench kernel | bench compute | bench comm
void add_demo_command(CLI::App& app);
void add_bench_kernel_command(CLI::App& bench);  // under bench
void add_bench_comm_command(CLI::App& bench);    // under bench

}  // namespace embshard::cli
