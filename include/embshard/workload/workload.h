// A workload: table specs (tables.json) and their index traces (trace.bin),
// in one directory.
//
// tables.json: {"format": "embshard-workload", "version": 1, "batch_size": B,
//   "source": "...", "trace": "trace.bin", "tables": [{"name", "rows", "dim",
//   "pooling_factor", "unique_rows", "row_reuse_histogram": [17],
//   "lookup_reuse_histogram": [17]}, ...]}
// The trace is optional (a spec-only workload has "trace": null).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/workload/table.h"
#include "embshard/workload/trace.h"

namespace embshard {

constexpr const char* kTablesFile = "tables.json";
constexpr const char* kTraceFile = "trace.bin";

struct Workload {
  std::string dir;              // where it was loaded from ("" if in memory)
  std::string source;           // how it was made: "synth 2021 seed 1", a .pt path
  int64_t batch_size = 0;
  std::vector<TableSpec> tables;
  std::optional<std::string> trace_file;  // relative to dir

  std::string trace_path() const;  // throws if the workload has no trace
};

// Parses tables.json in `dir` and checks every field (throws Error naming the
// file, the table, the field and the value). If a trace is named, checks that
// its header agrees with the specs (table count, batch size).
Workload load_workload(const std::string& dir);

// Writes tables.json into `dir` (created if missing) atomically.
void save_workload_specs(const Workload& workload, const std::string& dir);

// One table object of tables.json; `context` names the file and table for
// errors ("tables.json: tables[3]").
TableSpec table_from_json(const nlohmann::json& j, const std::string& context);

// Every table of a file (`path`) has its own name; Error names both entries.
void check_table_names(const std::vector<TableSpec>& tables, const std::string& path);
nlohmann::json table_to_json(const TableSpec& table);

}  // namespace embshard
