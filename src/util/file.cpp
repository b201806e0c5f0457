#include "embshard/util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <zlib.h>

#include "embshard/util/error.h"

namespace embshard {

namespace {

// Slots the signal handler reads: a path is published by setting `ready`
// after it is copied, and unpublished before the slot is freed.
constexpr int kTempSlots = 64;
constexpr size_t kTempPathBytes = 4096;
struct TempSlot {
  std::atomic<bool> taken{false};
  std::atomic<bool> ready{false};
  bool directory = false;
  char path[kTempPathBytes];
};
TempSlot temp_slots[kTempSlots];

extern "C" void remove_temp_files_and_reraise(int signal_number) {
  // Files, then directories (async-signal-safe calls only; rmdir removes an
  // empty one), twice: a directory guarded inside another one goes first.
  for (TempSlot& s : temp_slots) {
    if (s.ready.load(std::memory_order_acquire) && !s.directory) ::unlink(s.path);
  }
  for (int round = 0; round < 2; ++round) {
    for (int i = kTempSlots - 1; i >= 0; --i) {
      TempSlot& s = temp_slots[i];
      if (s.ready.load(std::memory_order_acquire) && s.directory) ::rmdir(s.path);
    }
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

TempFileGuard::TempFileGuard(const std::string& path, bool directory) {
  if (path.size() >= kTempPathBytes) return;
  for (int i = 0; i < kTempSlots; ++i) {
    bool expected = false;
    if (!temp_slots[i].taken.compare_exchange_strong(expected, true)) continue;
    std::memcpy(temp_slots[i].path, path.c_str(), path.size() + 1);
    temp_slots[i].directory = directory;
    temp_slots[i].ready.store(true, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ < 0) return;
  temp_slots[slot_].ready.store(false, std::memory_order_release);
  temp_slots[slot_].taken.store(false, std::memory_order_release);
}

OutputDirectoryGuard::OutputDirectoryGuard(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const bool existed = fs::exists(path, error);
  fs::create_directories(path, error);
  ES_CHECK(!error, "cannot create the directory '{}': {}", path, error.message());
  ES_CHECK(fs::is_directory(path), "'{}' exists and is not a directory", path);
  if (!existed) on_signal_ = std::make_unique<TempFileGuard>(path, /*directory=*/true);
}

OutputDirectoryGuard::~OutputDirectoryGuard() {
  if (on_signal_ == nullptr || keep_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void remove_temp_files_on_signals() {
  for (int s : {SIGINT, SIGTERM, SIGHUP}) std::signal(s, remove_temp_files_and_reraise);
}

namespace {

// What an output path names: a link's target (the rename replaces the file it
// points to, not the link), else the path itself.
std::string output_target(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  const std::filesystem::path target = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

// Copies `from` into the device or pipe `to` (/dev/null, a FIFO): written
// into, never replaced by a regular file.
void write_into(const std::string& from, const std::string& to) {
  const std::string bytes = read_file(from);
  std::remove(from.c_str());
  const int fd = ::open(to.c_str(), O_WRONLY);
  ES_CHECK(fd >= 0, "cannot open '{}' for writing: {}", to, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ES_THROW("cannot write '{}': {}", to, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  return fmt::format("{}.tmp.{}", output_target(path), static_cast<long>(getpid()));
}

int remove_stale_temp_files(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(output_target(path));
  const std::string prefix = target.filename().string() + ".tmp.";
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  int removed = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::stol(digits);
    // Only a writer that no longer runs; a live one (or this process) keeps its file.
    if (pid == static_cast<long>(getpid()) || ::kill(static_cast<pid_t>(pid), 0) == 0 ||
        errno != ESRCH) {
      continue;
    }
    // The pid is this host's: a file written in the last minute may be a live
    // writer's on another host sharing the directory.
    const auto written = fs::last_write_time(e.path(), ec);
    if (ec || fs::file_time_type::clock::now() - written < std::chrono::minutes(1)) continue;
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

void commit_file(const std::string& from, const std::string& to_path) {
  int fd = ::open(from.c_str(), O_RDONLY);
  ES_CHECK(fd >= 0, "cannot open '{}' to commit it: {}", from, std::strerror(errno));
  const int sync_rc = ::fsync(fd);
  ::close(fd);
  ES_CHECK(sync_rc == 0, "cannot fsync '{}': {}", from, std::strerror(errno));
  const std::string to = output_target(to_path);
  struct stat st;
  if (::stat(to.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return write_into(from, to);
    ::chmod(from.c_str(), st.st_mode & 07777);  // the file it replaces keeps its mode
  }
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    std::remove(from.c_str());
    ES_THROW("cannot rename '{}' to '{}': {}", from, to, std::strerror(err));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = temp_path_for(path);
  const TempFileGuard guard(tmp);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out.good()) {
      const int err = errno;
      check_writable(path, "");  // names a missing directory, a file in the way
      ES_THROW("cannot write '{}': {} (creating its temporary file '{}')", path,
               std::strerror(err), tmp);
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      ES_THROW("cannot write '{}' (disk full?)", tmp);
    }
  }
  commit_file(tmp, path);
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  ES_CHECK(!std::filesystem::is_directory(path, ec), "'{}' is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  ES_CHECK(in.good(), "cannot open '{}': {}", path, std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  ES_CHECK(!in.bad(), "cannot read '{}'", path);
  return buffer.str();
}

bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string read_file_gunzip(const std::string& path) {
  std::string packed = read_file(path);
  if (!is_gzip(packed)) return packed;
  // Far past any record file; a bound so that a corrupted or hostile stream
  // ends in an error, not in all of memory.
  constexpr uint64_t kMaxBytes = uint64_t{4} << 30;
  // And a bound by the file's size: the JSON embshard writes gzips 4 to 10
  // times smaller, a crafted stream 1000 times (a few kilobytes that hold
  // gigabytes once parsed).
  constexpr uint64_t kMaxRatio = 256, kAnyBytes = uint64_t{1} << 20;
  const uint64_t max_bytes = std::min(kMaxBytes, packed.size() * kMaxRatio + kAnyBytes);
  z_stream z{};
  // 15 + 16: a gzip wrapper, the largest window.
  ES_CHECK(inflateInit2(&z, 15 + 16) == Z_OK, "'{}': cannot start gunzip", path);
  z.next_in = reinterpret_cast<Bytef*>(packed.data());
  z.avail_in = static_cast<uInt>(packed.size());
  ES_CHECK(packed.size() == z.avail_in, "'{}': {} bytes of gzip, past zlib's 4 GiB input", path,
           packed.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - z.avail_out);
    if (rc == Z_STREAM_END) {
      // gzip allows members one after another (cat a.gz b.gz).
      if (z.avail_in == 0) break;
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (rc != Z_OK || out.size() > max_bytes) break;
    if (z.avail_in == 0 && z.avail_out != 0) break;  // input ends inside a member
  }
  const std::string why = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  ES_CHECK(out.size() <= max_bytes,
           "'{}': the gzip content runs past {} bytes, more than a {}-byte gzip file embshard "
           "reads holds: corrupted or crafted",
           path, max_bytes, packed.size());
  ES_CHECK(rc == Z_STREAM_END, "'{}': {} gzip stream after {} uncompressed bytes{}", path,
           rc == Z_OK || rc == Z_BUF_ERROR ? "truncated" : "corrupted", out.size(),
           why.empty() ? "" : ": " + why);
  return out;
}

void check_writable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  // A link's target: the file that is written (output_target).
  const fs::path p(output_target(path));
  const std::string prefix = what.empty() ? "" : what + ": ";
  std::error_code ec;
  ES_CHECK(!fs::is_directory(p, ec), "{}'{}' is a directory, not a file", prefix, path);
  struct stat st;
  if (::stat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or pipe (/dev/null, a FIFO) is written into, not replaced.
    ES_CHECK(::access(p.c_str(), W_OK) == 0, "{}cannot write '{}': {}", prefix, path,
             std::strerror(errno));
    return;
  }
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  ES_CHECK(fs::is_directory(dir, ec), "{}cannot write '{}': {}", prefix, path,
           fs::exists(dir, ec) ? fmt::format("'{}' is a file, not a directory", dir.string())
                               : fmt::format("directory '{}' does not exist", dir.string()));
  // A file made and removed, not access(W_OK) alone: as root that passes a
  // directory no file can be made in (/proc).
  const std::string probe = temp_path_for(path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  const int err = errno;
  if (fd >= 0) {
    // Guarded once made (not before: a file of that name that was there is
    // not ours to remove), so that a signal now does not leave it behind.
    const TempFileGuard guard(probe);
    ::close(fd);
    ::unlink(probe.c_str());
  }
  ES_CHECK(fd >= 0 || (err == EEXIST && ::access(dir.c_str(), W_OK) == 0),
           "{}cannot write '{}': no file can be made in directory '{}' ({})", prefix, path,
           dir.string(), std::strerror(err));
}

void check_writable_directory(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string prefix = what.empty() ? "" : what + ": ";
  std::error_code ec;
  fs::path dir = fs::absolute(path, ec);
  while (!fs::exists(dir, ec) && dir.has_relative_path()) dir = dir.parent_path();
  const bool exists = dir == fs::absolute(path, ec);
  ES_CHECK(fs::is_directory(dir, ec), "{}cannot write the directory '{}': '{}' is a file, not a "
           "directory", prefix, path, exists ? path : dir.string());
  // A directory made and removed (see check_writable).
  const fs::path probe = dir / fmt::format(".embshard-probe.{}", static_cast<long>(getpid()));
  const int rc = ::mkdir(probe.c_str(), 0700);
  const int err = errno;
  if (rc == 0) {
    const TempFileGuard guard(probe.string(), /*directory=*/true);  // as in check_writable
    ::rmdir(probe.c_str());
  }
  ES_CHECK(rc == 0 || (err == EEXIST && ::access(dir.c_str(), W_OK) == 0),
           "{}cannot write the directory '{}': nothing can be made in '{}' ({})", prefix, path,
           exists ? path : dir.string(), std::strerror(err));
}

std::filesystem::path resolved_path(const std::string& path) {
  // Absolute first: weakly_canonical leaves a path none of whose parts
  // exist relative, so "a.json" and "./a.json" would differ.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return path;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, ec);
  return ec ? absolute : resolved;
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (outputs[i].second.empty() || outputs[j].second.empty()) continue;
      ES_CHECK(resolved_path(outputs[i].second) != resolved_path(outputs[j].second),
               "{} '{}' and {} '{}' name the same file: one would overwrite the other",
               outputs[i].first, outputs[i].second, outputs[j].first, outputs[j].second);
    }
  }
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t file_size_bytes(const std::string& path) {
  struct stat st {};
  ES_CHECK(::stat(path.c_str(), &st) == 0, "cannot stat '{}': {}", path,
           std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace embshard
