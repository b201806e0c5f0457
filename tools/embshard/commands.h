// The embshard CLI: one file per command, each adding its subcommand here.
#pragma once

#include <CLI/CLI.hpp>

namespace embshard::cli {

void add_inspect_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_bench_command(CLI::App& app);  // bench kernel | bench compute
void add_bench_kernel_command(CLI::App& bench);  // adds `kernel` under `bench`
void add_demo_command(CLI::App& app);

}  // namespace embshard::cli
