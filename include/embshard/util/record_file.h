// An append-only file of JSON records, one per line, that survives kill -9.
//
// Line 1 is a header naming what the records are and how they were made,
// written in one write() before any record; every later line is one record,
// written with a single write() and fdatasync'd, so a crash loses at most the
// record being written. Reopening the file checks the
// header against the current run (the fields that must match), drops a torn
// last line (no trailing newline, or not valid JSON) and hands back the
// records already there, so that the caller resumes where it stopped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embshard {

// Throws Error when `text`, whose first line is not a JSON record, is one
// whole JSON document (a plan, a tables.json) rather than JSON lines: the
// message names `path` and the document's "format", not a corruption.
void check_not_a_json_document(const std::string& path, const std::string& text,
                               const std::string& expected);

// Whether `path` holds something to resume from: it exists and is not empty
// (a crash before a new file's header leaves it empty).
bool has_records(const std::string& path);

// Error when another RecordFile (in any process) has `path` open now: a
// command checks this before minutes of reference runs, then opens the file.
void check_not_being_written(const std::string& path);

class RecordFile {
 public:
  // Creates `path` with `header` or reopens it. When reopening, every key of
  // `header` listed in `must_match` must be equal in the file's header, else
  // Error names the file, the field and both values. A regular file is
  // locked (flock) while this lives: another RecordFile on it, in this
  // process or another, is an Error. A new file that fails to start (its
  // header cannot be written) is removed again.
  RecordFile(std::string path, const nlohmann::json& header,
             const std::vector<std::string>& must_match);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  const nlohmann::json& header() const { return header_; }
  const std::vector<nlohmann::json>& records() const { return records_; }
  // Bytes of a torn last line dropped on open (0 if none).
  uint64_t dropped_bytes() const { return dropped_bytes_; }

  void append(const nlohmann::json& record);

  // Error unless the records are numbered 0, 1, ... in their field "sample",
  // as a measuring run writes them: anything else is a foreign or edited file.
  void check_numbered() const;

  // Reads all records of a file without opening it for writing; a torn last
  // line is skipped and reported through `dropped_bytes`.
  static std::vector<nlohmann::json> read_all(const std::string& path, nlohmann::json* header,
                                              uint64_t* dropped_bytes);

 private:
  void open_locked(const std::vector<std::string>& must_match);

  std::string path_;
  int fd_ = -1;
  bool created_ = false;  // this opened a new file (removed again if it fails to start)
  nlohmann::json header_;
  std::vector<nlohmann::json> records_;
  uint64_t dropped_bytes_ = 0;
};

}  // namespace embshard
