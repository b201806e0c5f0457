// embshard synth: a synthetic workload calibrated to published statistics.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/synth.h"
#include "embshard/workload/table_specs.h"

namespace embshard::cli {
namespace {

struct SynthArgs {
  SynthOptions options;
  std::string out_dir;
  std::string stats_dir;  // "" = the statistics committed with the repo
  std::string spec;       // table specs to follow, or ""
};

// Traces for the tables of a table-spec file: its rows, dims, pooling factors
// and reuse statistics (its profile's where it gives none).
void run_synth_from_specs(const SynthArgs& args, bool batch_given) {
  const Workload specs =
      load_table_specs(args.spec, args.options.profile, batch_given ? args.options.batch_size : 0);
  Reporter& reporter = stderr_reporter();
  Progress progress(reporter, "synth", specs.tables.size());
  const auto on_table = [&progress](size_t t, size_t, const TableSpec& spec) {
    progress.update(t + 1, fmt::format("{}: {} rows, dim {}, pooling {:.2f}", spec.name, spec.rows,
                                       spec.dim, spec.pooling_factor));
  };
  synthesize_from_specs(specs, args.options.seed, args.options.index_bytes, args.out_dir, on_table);
  progress.finish();
  reporter.note(fmt::format("synth: {} tables x batch {} from {}: wrote {}/{} and {}/{}",
                            specs.tables.size(), specs.batch_size, args.spec, args.out_dir,
                            kTablesFile, args.out_dir, kTraceFile));
}

void run_synth(const SynthArgs& args) {
  validate_synth_options(args.options);
  const PublishedStats target = load_published_profile(args.options.profile, args.stats_dir);
  Reporter& reporter = stderr_reporter();
  reporter.note(fmt::format(
      "synth: profile {} ({}): avg pooling {:.3f}, unique ratio {:.4f}; {} tables x batch {}, "
      "seed {}",
      target.profile, target.dataset, target.avg_pooling_factor, target.unique_ratio,
      args.options.num_tables, args.options.batch_size, args.options.seed));
  Progress progress(reporter, "synth", static_cast<uint64_t>(args.options.num_tables));
  const auto on_table = [&progress](size_t t, size_t, const TableSpec& spec) {
    progress.update(t + 1, fmt::format("{}: {} rows, dim {}, pooling {:.2f}", spec.name,
                                       spec.rows, spec.dim, spec.pooling_factor));
  };
  synthesize_workload(args.options, target, args.out_dir, on_table);
  progress.finish();
  reporter.note(fmt::format("synth: wrote {}/{} and {}/{}", args.out_dir, kTablesFile,
                            args.out_dir, kTraceFile));
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Generate a synthetic workload (tables + traces) calibrated to the published "
               "dlrm_datasets statistics");
  CLI::Option* profile = cmd->add_option(
      "--profile", args->options.profile,
      "Published statistics to match: 2021 | 2022 (with --spec: for tables that give none)");
  CLI::Option* tables = cmd->add_option("--tables", args->options.num_tables, "Number of tables");
  CLI::Option* batch = cmd->add_option("--batch", args->options.batch_size,
                                       "Batch size (bags per table; with --spec: the spec's)");
  CLI::Option* spec = cmd->add_option(
      "--spec", args->spec,
      "Table specs (plan --tables's file) whose tables to generate, one for one, instead of "
      "drawing tables");
  add_seed_option(cmd, args->options.seed, "Random seed (same seed, same bytes)");
  cmd->add_option("-o,--out", args->out_dir, "Output workload directory")->required();
  add_list_option(cmd, "--dims", args->options.dims, "Embedding dimensions to draw from");
  cmd->add_option("--index-bytes", args->options.index_bytes, "Trace index width: 4 or 8")
      ->capture_default_str();
  cmd->add_option("--huge-tables", args->options.huge_tables,
                  "Stress: the first N tables get at least --huge-rows rows (off the published statistics)")
      ->capture_default_str();
  cmd->add_option("--huge-rows", args->options.huge_rows, "Stress: rows of the huge tables (at least; a table drawn bigger keeps its rows)")
      ->capture_default_str();
  cmd->add_option("--hot-tables", args->options.hot_tables,
                  "Stress: the next N tables get pooling factor --hot-pooling")
      ->capture_default_str();
  cmd->add_option("--hot-pooling", args->options.hot_pooling,
                  "Stress: the hot tables' pooling factor")
      ->capture_default_str();
  cmd->add_option("--stats-dir", args->stats_dir,
                  "Directory of the published statistics files (default: data/published "
                  "under the data root, the shipped files)");
  for (const char* name : {"--tables", "--dims", "--huge-tables", "--huge-rows", "--hot-tables",
                           "--hot-pooling", "--stats-dir"}) {
    spec->excludes(name);
  }
  cmd->callback([args, profile, tables, batch, spec] {
    if (!spec->empty()) return run_synth_from_specs(*args, !batch->empty());
    for (const CLI::Option* o : {profile, tables, batch}) {
      ES_CHECK(!o->empty(), "synth: {} is required (or --spec FILE)", o->get_name());
    }
    run_synth(*args);
  });
}

}  // namespace embshard::cli
