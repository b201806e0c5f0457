#include "embshard/util/record_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {
namespace {

using nlohmann::json;

struct ParsedFile {
  json header;
  std::vector<json> records;
  uint64_t good_bytes = 0;     // length of the valid prefix
  uint64_t dropped_bytes = 0;  // torn tail
};

ParsedFile parse_records(const std::string& path, const std::string& text) {
  ParsedFile parsed;
  size_t begin = 0;
  int line_number = 0;
  while (begin < text.size()) {
    ++line_number;
    const size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    const std::string line = text.substr(begin, complete ? end - begin : std::string::npos);
    // A line nested past any record's depth is not a record (json_field.h).
    json value = json_nests_deeper_than(line, kMaxJsonDepth)
                     ? json(json::value_t::discarded)
                     : json::parse(line, nullptr, /*allow_exceptions=*/false);
    const size_t next = complete ? end + 1 : text.size();
    const bool last = next >= text.size();
    if (!complete || value.is_discarded() || !value.is_object()) {
      if (line_number == 1 && complete) check_not_a_json_document(path, text, "records");
      // The header goes into an empty file in one write() before any record: a
      // first line that is not one is another file, never a torn header to drop.
      ES_CHECK(line_number > 1, "{}: line 1 is not a records header ('{}'): not a records file; "
               "give another output path", path, line.substr(0, 80));
      // Only the last line can be torn by a crash; anything earlier is corruption.
      ES_CHECK(last, "{}: line {} is not a valid JSON record ('{}'): the file is corrupted", path,
               line_number, line.substr(0, 80));
      parsed.dropped_bytes = text.size() - begin;
      break;
    }
    if (line_number == 1) {
      parsed.header = std::move(value);
    } else {
      parsed.records.push_back(std::move(value));
    }
    parsed.good_bytes = next;
    begin = next;
  }
  return parsed;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ES_CHECK(n > 0, "cannot write '{}' (disk full?): {}", path, std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void check_not_a_json_document(const std::string& path, const std::string& text,
                               const std::string& expected) {
  if (json_nests_deeper_than(text, kMaxJsonDepth)) return;
  const json whole = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (whole.is_discarded()) return;
  const std::string format =
      whole.is_object() && whole.contains("format") && whole["format"].is_string()
          ? fmt::format(" (format '{}')", whole["format"].get<std::string>())
          : "";
  ES_THROW("{}: a JSON document{}, not a file of {} (one JSON object per line)", path, format,
           expected);
}

std::vector<json> RecordFile::read_all(const std::string& path, json* header,
                                       uint64_t* dropped_bytes) {
  ParsedFile parsed = parse_records(path, read_file_gunzip(path));
  ES_CHECK(parsed.header.is_object(), "{}: no header line (empty or torn file)", path);
  if (header != nullptr) *header = parsed.header;
  if (dropped_bytes != nullptr) *dropped_bytes = parsed.dropped_bytes;
  return std::move(parsed.records);
}

bool has_records(const std::string& path) {
  return file_exists(path) && file_size_bytes(path) > 0;
}

namespace {

[[noreturn]] void throw_being_written(const std::string& path) {
  ES_THROW("{}: another process is writing this file (wait for it, or give another output path)",
           path);
}

}  // namespace

void check_not_being_written(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no file yet: nobody writes it
  struct stat st {};
  const bool locked = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                      ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the lock this took, if it took one
  if (locked) throw_being_written(path);
}

RecordFile::RecordFile(std::string path, const json& header,
                       const std::vector<std::string>& must_match)
    : path_(std::move(path)), header_(header) {
  // Opened, never truncated, and locked before it is read: a second process
  // given the same file fails here instead of interleaving its records.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  created_ = fd_ >= 0;
  if (!created_ && errno == EEXIST) fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    if (!file_exists(path_)) check_writable(path_, "");  // names a missing or read-only directory
    ES_THROW("cannot open '{}' for appending: {}", path_, std::strerror(error));
  }
  // Regular files only: a device such as /dev/null is one node every process
  // shares. A filesystem without flock (some cluster filesystems) goes unlocked.
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      ::close(fd_);
      fd_ = -1;
      throw_being_written(path_);
    }
    ES_CHECK(error == ENOSYS || error == EOPNOTSUPP || error == ENOLCK || error == EINVAL,
             "cannot lock '{}': {}", path_, std::strerror(error));
  }
  try {
    open_locked(must_match);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    if (created_) ::unlink(path_.c_str());  // refused or unwritable: leave nothing behind
    throw;
  }
}

void RecordFile::open_locked(const std::vector<std::string>& must_match) {
  const std::string text = file_size_bytes(path_) > 0 ? read_file(path_) : std::string();
  if (!text.empty()) {
    ES_CHECK(!is_gzip(text),
             "{}: is gzip-compressed; records are appended to a plain file: give another "
             "output path (or gunzip it to resume into it)",
             path_);
    ParsedFile parsed = parse_records(path_, text);
    if (parsed.header.is_object()) {
      const auto shown = [](const json& v) {
        return v.is_null() ? std::string("not set") : v.dump();
      };
      for (const std::string& key : must_match) {
        const json stored = parsed.header.value(key, json());
        const json wanted = header_.value(key, json());
        ES_CHECK(stored == wanted,
                 "{}: cannot resume: header field '{}' is {} in the file but {} in this run "
                 "(use another --out file, or the same options)",
                 path_, key, shown(stored), shown(wanted));
      }
      header_ = parsed.header;
      records_ = std::move(parsed.records);
      dropped_bytes_ = parsed.dropped_bytes;
      ES_CHECK(::ftruncate(fd_, static_cast<off_t>(parsed.good_bytes)) == 0,
               "cannot drop the torn last record of '{}': {}", path_, std::strerror(errno));
      ES_CHECK(::lseek(fd_, 0, SEEK_END) >= 0, "cannot seek '{}'", path_);
      return;
    }
  }
  // An empty file (new, or one a crash left before its header): the header
  // in one write, synced before any record follows it. A write that fails
  // part way (disk full, a file size limit) leaves the file empty again.
  try {
    write_all(fd_, header_.dump() + "\n", path_);
    ES_CHECK(::fdatasync(fd_) == 0 || errno == EINVAL, "cannot sync '{}': {}", path_,
             std::strerror(errno));
  } catch (...) {
    if (::ftruncate(fd_, 0) != 0) {}  // best effort: the error below is the one to report
    throw;
  }
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RecordFile::append(const json& record) {
  // One write of the whole line, then fdatasync: a crash tears at most this line.
  write_all(fd_, record.dump() + "\n", path_);
  ES_CHECK(::fdatasync(fd_) == 0 || errno == EINVAL, "cannot sync '{}': {}", path_,
           std::strerror(errno));  // EINVAL: a device such as /dev/null, which keeps nothing
  records_.push_back(record);
}

void RecordFile::check_numbered() const {
  for (size_t i = 0; i < records_.size(); ++i) {
    const nlohmann::json* sample = json_optional(records_[i], "/sample", JsonKind::kCount,
                                                 fmt::format("{}: record {}", path_, i + 1));
    ES_CHECK(sample && *sample == i,
             "{}: record {} has sample {}, expected {}: the file is not a clean run", path_, i + 1,
             sample ? sample->dump() : "none", i);
  }
}

}  // namespace embshard
