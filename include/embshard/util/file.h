// File helpers: atomic whole-file writes, and an append-only record file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace embshard {

// Writes `content` to `path` through a temporary file in the same directory,
// fsyncs it and renames it into place: readers never see a partial file.
void write_file_atomic(const std::string& path, const std::string& content);

// Reads a whole file; throws Error naming the path if it cannot.
std::string read_file(const std::string& path);

// Reads a whole file, gunzipped when it starts with gzip's magic bytes (by
// content, not name: the measurements under data/, *.jsonl.gz, read as they are).
// Error names the path for a truncated or corrupted stream.
std::string read_file_gunzip(const std::string& path);

// Whether `bytes` start with gzip's magic bytes (1f 8b).
bool is_gzip(const std::string& bytes);

bool file_exists(const std::string& path);

// Checks, before long work, that `path` can be written later: its directory
// exists and is writable, and the path is not a directory. Error names
// `what` (the option; empty: none) and the path.
void check_writable(const std::string& path, const std::string& what);

// The same for an output directory: `path` is a writable directory, or it
// does not exist and the nearest part of it that does is one (so that
// create_directories can make the rest).
void check_writable_directory(const std::string& path, const std::string& what);

// `path` absolute and resolved ("a" and "./a" give one answer); a path that
// cannot be resolved (a pipe's, such as /dev/fd/63) stands absolute, as given.
std::filesystem::path resolved_path(const std::string& path);

// Checks that no two of a command's outputs (option, path; empty: not given)
// name one file, however spelt ("a.json", "./a.json", "../dir/a.json"):
// otherwise the last one written would be all that is left.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);
uint64_t file_size_bytes(const std::string& path);

// A temporary path next to `path` ("<path>.tmp.<pid>"; next to its target
// where `path` is a symbolic link), for write-then-rename.
std::string temp_path_for(const std::string& path);

// Removes the temporary files of `path` (temp_path_for's "<path>.tmp.<pid>")
// whose writer no longer runs on this host and that nothing wrote to in the
// last minute: what a writer killed with SIGKILL, which no handler sees, left
// behind. Returns how many it removed.
int remove_stale_temp_files(const std::string& path);

// Renames `from` onto `to` after fsyncing `from`; throws Error on failure.
// A link's target is replaced, not the link; a file replaced keeps its mode;
// a device or pipe (/dev/null) is written into and `from` removed.
void commit_file(const std::string& from, const std::string& to);

// A temporary file this process is writing, removed if SIGINT, SIGTERM or
// SIGHUP ends the process (no destructor runs then) once the CLI has called
// remove_temp_files_on_signals(). Lives as long as the file may exist; up to
// 64 at once (more are simply not covered).
class TempFileGuard {
 public:
  // `directory`: a directory, removed (after the files) if empty by then.
  explicit TempFileGuard(const std::string& path, bool directory = false);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;
};

// An output directory, created if missing. One this created is removed
// again, with what this process wrote into it, unless keep() was called
// first: when an error unwinds the stack, and (once the guarded files inside
// are gone, so empty) when a signal ends the process. One that existed is
// left alone.
class OutputDirectoryGuard {
 public:
  explicit OutputDirectoryGuard(const std::string& path);
  ~OutputDirectoryGuard();
  OutputDirectoryGuard(const OutputDirectoryGuard&) = delete;
  OutputDirectoryGuard& operator=(const OutputDirectoryGuard&) = delete;
  void keep() { keep_ = true; }

 private:
  std::string path_;
  std::unique_ptr<TempFileGuard> on_signal_;  // only for a directory this created
  bool keep_ = false;
};

// Installs the handlers: each removes the guarded files, then the guarded
// directories that are empty, then ends the process by the same signal (its
// exit status says so).
void remove_temp_files_on_signals();

}  // namespace embshard
