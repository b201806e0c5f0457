// embshard import FILE.pt[.gz] -o DIR: a dlrm_datasets file into a workload.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/import.h"

namespace embshard::cli {

void add_import_command(CLI::App& app) {
  struct Args {
    std::string input, out_dir;
    ImportOptions options;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Import a dlrm_datasets file: a torch.save'd tuple (indices, offsets, lengths), gzip'd or "
      "not, into a workload directory (trace.bin + tables.json)");
  cmd->add_option("input", args->input, "the .pt or .pt.gz file")->required();
  cmd->add_option("-o,--out", args->out_dir, "workload directory to write (created if missing)")
      ->required();
  cmd->add_option("--dim", args->options.dim, "embedding dim given to every table")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--index-bytes", args->options.index_bytes,
                  "trace index width, 4 or 8 (default: as the file's indices)")
      ->check(CLI::IsMember({4u, 8u}));
  cmd->add_flag("-q,--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args] {
    args->options.reporter = args->quiet ? nullptr : &stderr_reporter();
    const Workload w = import_pt(args->input, args->out_dir, args->options);
    int64_t lookups = 0;
    for (const TableSpec& t : w.tables) {
      lookups += static_cast<int64_t>(t.pooling_factor * static_cast<double>(w.batch_size) + 0.5);
    }
    std::printf("imported %s: %zu tables, batch size %lld, %lld lookups -> %s\n",
                args->input.c_str(), w.tables.size(), static_cast<long long>(w.batch_size),
                static_cast<long long>(lookups), args->out_dir.c_str());
  });
}

}  // namespace embshard::cli
