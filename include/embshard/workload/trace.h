// Index traces: for each table, one batch of bags (offsets and indices).
//
// File format (little endian), version 1:
//   header, 64 bytes: magic "EMBTRACE", u32 version, u32 index_bytes (4 or 8),
//     u64 num_tables, u64 batch_size, u64 num_indices (all tables),
//     u64 directory_offset, u32 directory_crc, u32 header_crc (crc32 of the
//     preceding 56 bytes), u64 reserved (0)
//   one section per table, in order: i64 offsets[batch_size + 1] (local, first
//     is 0, non-decreasing, last = the table's index count), then the table's
//     indices as i32 or i64
//   directory at directory_offset: per table u64 section_offset,
//     u64 num_indices, u32 crc32 of the section, u32 reserved (0)
// Readers check the header and directory once, then read any table on demand
// with one read and verify its checksum: a whole file is read once, never twice.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "embshard/util/file.h"

namespace embshard {

constexpr char kTraceMagic[8] = {'E', 'M', 'B', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kTraceVersion = 1;

// One table's bags for one batch. offsets.size() == batch_size + 1.
struct TableTrace {
  std::vector<int64_t> offsets;
  std::vector<int64_t> indices;

  int64_t batch_size() const {
    return offsets.empty() ? 0 : static_cast<int64_t>(offsets.size()) - 1;
  }
};

// Throws Error naming `context`, the field and the value if the trace is not
// well formed: offsets[0] != 0, decreasing offsets, last offset != number of
// indices, a negative index, or (rows > 0) an index >= rows.
void validate_trace(const TableTrace& trace, int64_t rows, const std::string& context);

struct TraceFileInfo {
  uint32_t index_bytes = 8;
  uint64_t num_tables = 0;
  uint64_t batch_size = 0;
  uint64_t num_indices = 0;
};

// Writes a trace file table by table; holds one table at a time. The file
// appears at `path` only when finish() succeeds (written to a temporary file,
// then renamed); a writer destroyed before finish() removes its temporary.
class TraceWriter {
 public:
  TraceWriter(std::string path, uint64_t num_tables, uint64_t batch_size,
              uint32_t index_bytes);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends the next table. Indices must fit index_bytes.
  void add_table(const TableTrace& trace);
  // Writes the directory and header, fsyncs and renames into place.
  void finish();

 private:
  struct Entry {
    uint64_t section_offset, num_indices;
    uint32_t crc;
  };
  void write_bytes(const void* data, size_t size);

  std::string path_, tmp_path_;
  TempFileGuard tmp_guard_;  // removes tmp_path_ if a signal ends the process
  std::FILE* file_ = nullptr;
  TraceFileInfo info_;
  std::vector<Entry> directory_;
  uint64_t position_ = 0;
  bool finished_ = false;
};

class TraceReader {
 public:
  explicit TraceReader(std::string path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceFileInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  uint64_t num_indices(uint64_t table) const;
  // Reads and verifies one table (checksum and offsets); throws Error naming
  // the file and table on corruption.
  TableTrace read_table(uint64_t table) const;

 private:
  struct Entry {
    uint64_t section_offset, num_indices;
    uint32_t crc;
  };
  // The constructor's steps: the header (sets info_; returns the directory's
  // offset and checksum), then the directory (sets directory_).
  std::pair<uint64_t, uint32_t> read_header(uint64_t file_bytes);
  void read_directory(uint64_t file_bytes, uint64_t directory_offset, uint32_t directory_crc);
  std::string path_;
  int fd_ = -1;
  TraceFileInfo info_;
  std::vector<Entry> directory_;
};

}  // namespace embshard
