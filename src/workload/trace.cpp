#include "embshard/workload/trace.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace embshard {
namespace {

constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryBytes = 24;

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const Bytef*>(data);
  // zlib's crc32 takes uInt lengths: feed large buffers in chunks.
  while (size > 0) {
    const size_t chunk = std::min<size_t>(size, 1u << 30);
    crc = static_cast<uint32_t>(::crc32(crc, bytes, static_cast<uInt>(chunk)));
    bytes += chunk;
    size -= chunk;
  }
  return crc;
}

template <typename T>
void put(unsigned char* buf, size_t& pos, T value) {
  std::memcpy(buf + pos, &value, sizeof(T));
  pos += sizeof(T);
}

template <typename T>
T get(const unsigned char* buf, size_t& pos) {
  T value;
  std::memcpy(&value, buf + pos, sizeof(T));
  pos += sizeof(T);
  return value;
}

void pread_all(int fd, void* buf, size_t size, uint64_t offset, const std::string& path,
               const char* what) {
  auto* out = static_cast<char*>(buf);
  while (size > 0) {
    const ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
    ES_CHECK(got > 0, "trace file '{}': truncated or unreadable {} at byte offset {}: {}",
             path, what, offset, got == 0 ? "unexpected end of file" : std::strerror(errno));
    out += got;
    size -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

}  // namespace

void validate_trace(const TableTrace& trace, int64_t rows, const std::string& context) {
  ES_CHECK(!trace.offsets.empty(), "{}: offsets is empty (need batch_size + 1 entries)",
           context);
  ES_CHECK(trace.offsets[0] == 0, "{}: offsets[0] is {}, must be 0", context,
           trace.offsets[0]);
  for (size_t b = 1; b < trace.offsets.size(); ++b) {
    ES_CHECK(trace.offsets[b] >= trace.offsets[b - 1],
             "{}: offsets not non-decreasing: offsets[{}] = {} < offsets[{}] = {}", context, b,
             trace.offsets[b], b - 1, trace.offsets[b - 1]);
  }
  ES_CHECK(trace.offsets.back() == static_cast<int64_t>(trace.indices.size()),
           "{}: last offset is {}, must equal the number of indices {}", context,
           trace.offsets.back(), trace.indices.size());
  for (size_t i = 0; i < trace.indices.size(); ++i) {
    const int64_t index = trace.indices[i];
    ES_CHECK(index >= 0 && (rows <= 0 || index < rows),
             "{}: indices[{}] = {} is out of range [0, {})", context, i, index,
             rows > 0 ? fmt::format("{}", rows) : std::string("inf"));
  }
}

// ---- writer -----------------------------------------------------------------

TraceWriter::TraceWriter(std::string path, uint64_t num_tables, uint64_t batch_size,
                         uint32_t index_bytes)
    : path_(std::move(path)), tmp_path_(temp_path_for(path_)), tmp_guard_(tmp_path_) {
  ES_CHECK(index_bytes == 4 || index_bytes == 8,
           "trace file '{}': index_bytes is {}, must be 4 or 8", path_, index_bytes);
  ES_CHECK(batch_size > 0, "trace file '{}': batch_size must be positive", path_);
  info_ = {index_bytes, num_tables, batch_size, 0};
  remove_stale_temp_files(path_);  // a killed writer's (SIGKILL) partial trace: hundreds of MB
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  ES_CHECK(file_ != nullptr, "cannot create '{}': {}", tmp_path_, std::strerror(errno));
  unsigned char zero[kHeaderBytes] = {};
  write_bytes(zero, sizeof(zero));  // the header is written last, by finish()
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove(tmp_path_.c_str());
}

void TraceWriter::write_bytes(const void* data, size_t size) {
  if (size == 0) return;
  const size_t written = std::fwrite(data, 1, size, file_);
  ES_CHECK(written == size, "cannot write '{}' (disk full?): {}", tmp_path_,
           std::strerror(errno));
  position_ += size;
}

void TraceWriter::add_table(const TableTrace& trace) {
  const std::string context = fmt::format("trace file '{}': table {}", path_, directory_.size());
  ES_CHECK(!finished_, "{}: writer already finished", context);
  ES_CHECK(directory_.size() < info_.num_tables, "{}: more tables than declared ({})", context,
           info_.num_tables);
  ES_CHECK(trace.offsets.size() == info_.batch_size + 1,
           "{}: {} offsets, expected batch_size + 1 = {}", context, trace.offsets.size(),
           info_.batch_size + 1);
  validate_trace(trace, 0, context);

  Entry entry{position_, trace.indices.size(), 0};
  const size_t offsets_bytes = trace.offsets.size() * sizeof(int64_t);
  entry.crc = crc32_update(0, trace.offsets.data(), offsets_bytes);
  write_bytes(trace.offsets.data(), offsets_bytes);
  if (info_.index_bytes == 8) {
    entry.crc = crc32_update(entry.crc, trace.indices.data(), trace.indices.size() * 8);
    write_bytes(trace.indices.data(), trace.indices.size() * 8);
  } else {
    std::vector<int32_t> narrow(std::min<size_t>(trace.indices.size(), 1u << 20));
    for (size_t begin = 0; begin < trace.indices.size(); begin += narrow.size()) {
      const size_t count = std::min(narrow.size(), trace.indices.size() - begin);
      for (size_t i = 0; i < count; ++i) {
        const int64_t index = trace.indices[begin + i];
        ES_CHECK(index <= std::numeric_limits<int32_t>::max(),
                 "{}: indices[{}] = {} does not fit int32", context, begin + i, index);
        narrow[i] = static_cast<int32_t>(index);
      }
      entry.crc = crc32_update(entry.crc, narrow.data(), count * 4);
      write_bytes(narrow.data(), count * 4);
    }
  }
  info_.num_indices += trace.indices.size();
  directory_.push_back(entry);
}

void TraceWriter::finish() {
  ES_CHECK(!finished_, "trace file '{}': finish() called twice", path_);
  ES_CHECK(directory_.size() == info_.num_tables,
           "trace file '{}': {} tables written, {} declared", path_, directory_.size(),
           info_.num_tables);
  const uint64_t directory_offset = position_;
  std::vector<unsigned char> dir(directory_.size() * kEntryBytes);
  size_t pos = 0;
  for (const Entry& e : directory_) {
    put<uint64_t>(dir.data(), pos, e.section_offset);
    put<uint64_t>(dir.data(), pos, e.num_indices);
    put<uint32_t>(dir.data(), pos, e.crc);
    put<uint32_t>(dir.data(), pos, 0);
  }
  write_bytes(dir.data(), dir.size());

  unsigned char header[kHeaderBytes] = {};
  pos = 0;
  std::memcpy(header, kTraceMagic, 8);
  pos += 8;
  put<uint32_t>(header, pos, kTraceVersion);
  put<uint32_t>(header, pos, info_.index_bytes);
  put<uint64_t>(header, pos, info_.num_tables);
  put<uint64_t>(header, pos, info_.batch_size);
  put<uint64_t>(header, pos, info_.num_indices);
  put<uint64_t>(header, pos, directory_offset);
  put<uint32_t>(header, pos, crc32_update(0, dir.data(), dir.size()));
  put<uint32_t>(header, pos, crc32_update(0, header, pos));
  ES_CHECK(std::fseek(file_, 0, SEEK_SET) == 0, "cannot seek in '{}'", tmp_path_);
  ES_CHECK(std::fwrite(header, 1, kHeaderBytes, file_) == kHeaderBytes,
           "cannot write '{}' (disk full?)", tmp_path_);
  const int close_rc = std::fclose(file_);
  file_ = nullptr;
  ES_CHECK(close_rc == 0, "cannot close '{}' (disk full?): {}", tmp_path_, std::strerror(errno));
  commit_file(tmp_path_, path_);
  finished_ = true;
}

// ---- reader -----------------------------------------------------------------

TraceReader::TraceReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY);
  ES_CHECK(fd_ >= 0, "cannot open trace file '{}': {}", path_, std::strerror(errno));
  // A refused file is closed again: no destructor runs for a constructor that throws.
  struct CloseUnlessKept {
    int& fd;
    bool keep = false;
    ~CloseUnlessKept() {
      if (!keep) ::close(std::exchange(fd, -1));
    }
  } guard{fd_};
  const uint64_t file_bytes = file_size_bytes(path_);
  const auto [directory_offset, directory_crc] = read_header(file_bytes);
  read_directory(file_bytes, directory_offset, directory_crc);
  guard.keep = true;
}

std::pair<uint64_t, uint32_t> TraceReader::read_header(uint64_t file_bytes) {
  ES_CHECK(file_bytes >= kHeaderBytes,
           "trace file '{}': truncated: {} bytes, the header alone is {}", path_, file_bytes,
           kHeaderBytes);
  unsigned char header[kHeaderBytes];
  pread_all(fd_, header, kHeaderBytes, 0, path_, "header");
  ES_CHECK(std::memcmp(header, kTraceMagic, 8) == 0,
           "trace file '{}': wrong magic '{}' (not an embshard trace)", path_,
           std::string(reinterpret_cast<char*>(header), 8));
  size_t pos = 8;
  const auto version = get<uint32_t>(header, pos);
  ES_CHECK(version == kTraceVersion, "trace file '{}': field 'version' is {}, this build reads {}",
           path_, version, kTraceVersion);
  info_.index_bytes = get<uint32_t>(header, pos);
  info_.num_tables = get<uint64_t>(header, pos);
  info_.batch_size = get<uint64_t>(header, pos);
  info_.num_indices = get<uint64_t>(header, pos);
  const auto directory_offset = get<uint64_t>(header, pos);
  const auto directory_crc = get<uint32_t>(header, pos);
  const uint32_t computed_header_crc = crc32_update(0, header, pos);
  const auto header_crc = get<uint32_t>(header, pos);
  ES_CHECK(header_crc == computed_header_crc,
           "trace file '{}': header checksum mismatch (stored {:#010x}, computed {:#010x}): "
           "corrupted header",
           path_, header_crc, computed_header_crc);
  ES_CHECK(info_.index_bytes == 4 || info_.index_bytes == 8,
           "trace file '{}': field 'index_bytes' is {}, must be 4 or 8", path_, info_.index_bytes);
  ES_CHECK(info_.batch_size > 0, "trace file '{}': field 'batch_size' is 0", path_);
  const uint64_t max_tables = file_bytes / kEntryBytes;
  ES_CHECK(info_.num_tables <= max_tables && directory_offset <= file_bytes &&
               file_bytes - directory_offset == info_.num_tables * kEntryBytes,
           "trace file '{}': truncated or corrupted: {} bytes on disk, directory of {} tables "
           "expected at byte {}",
           path_, file_bytes, info_.num_tables, directory_offset);
  // Each table's section starts with batch_size + 1 offsets of 8 bytes: a
  // batch the file cannot hold is refused before anything is sized by it.
  ES_CHECK(info_.num_tables == 0 || info_.batch_size < file_bytes / 8,
           "trace file '{}': field 'batch_size' is {}, but a table's batch_size + 1 offsets of "
           "8 bytes do not fit in the file's {} bytes: truncated or corrupted",
           path_, info_.batch_size, file_bytes);
  return {directory_offset, directory_crc};
}

void TraceReader::read_directory(uint64_t file_bytes, uint64_t directory_offset,
                                 uint32_t directory_crc) {
  std::vector<unsigned char> dir(info_.num_tables * kEntryBytes);
  pread_all(fd_, dir.data(), dir.size(), directory_offset, path_, "directory");
  const uint32_t computed_dir_crc = crc32_update(0, dir.data(), dir.size());
  ES_CHECK(computed_dir_crc == directory_crc,
           "trace file '{}': directory checksum mismatch (stored {:#010x}, computed {:#010x})",
           path_, directory_crc, computed_dir_crc);
  size_t pos = 0;
  uint64_t expected_offset = kHeaderBytes, total_indices = 0;
  for (uint64_t t = 0; t < info_.num_tables; ++t) {
    Entry e;
    e.section_offset = get<uint64_t>(dir.data(), pos);
    e.num_indices = get<uint64_t>(dir.data(), pos);
    e.crc = get<uint32_t>(dir.data(), pos);
    pos += 4;
    const uint64_t section_bytes =
        (info_.batch_size + 1) * 8 + e.num_indices * info_.index_bytes;
    ES_CHECK(e.section_offset == expected_offset && e.num_indices <= file_bytes &&
                 e.section_offset + section_bytes <= directory_offset,
             "trace file '{}': directory entry of table {} is inconsistent (section at byte {}, "
             "{} indices)",
             path_, t, e.section_offset, e.num_indices);
    expected_offset += section_bytes;
    total_indices += e.num_indices;
    directory_.push_back(e);
  }
  ES_CHECK(expected_offset == directory_offset && total_indices == info_.num_indices,
           "trace file '{}': sections end at byte {} but the directory starts at {}", path_,
           expected_offset, directory_offset);
}

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t TraceReader::num_indices(uint64_t table) const {
  ES_CHECK(table < directory_.size(), "trace file '{}': table {} out of range ({} tables)", path_,
           table, directory_.size());
  return directory_[table].num_indices;
}

TableTrace TraceReader::read_table(uint64_t table) const {
  ES_CHECK(table < directory_.size(), "trace file '{}': table {} out of range ({} tables)", path_,
           table, directory_.size());
  const Entry& e = directory_[table];
  TableTrace trace;
  trace.offsets.resize(info_.batch_size + 1);
  trace.indices.resize(e.num_indices);
  const size_t offsets_bytes = trace.offsets.size() * 8;
  pread_all(fd_, trace.offsets.data(), offsets_bytes, e.section_offset, path_, "offsets");
  uint32_t crc = crc32_update(0, trace.offsets.data(), offsets_bytes);
  const uint64_t indices_at = e.section_offset + offsets_bytes;
  if (info_.index_bytes == 8) {
    pread_all(fd_, trace.indices.data(), e.num_indices * 8, indices_at, path_, "indices");
    crc = crc32_update(crc, trace.indices.data(), e.num_indices * 8);
  } else {
    // Read the int32 indices into the upper half of the int64 buffer, then
    // widen in place from the front: no second buffer.
    auto* narrow = reinterpret_cast<int32_t*>(trace.indices.data()) + e.num_indices;
    pread_all(fd_, narrow, e.num_indices * 4, indices_at, path_, "indices");
    crc = crc32_update(crc, narrow, e.num_indices * 4);
    for (uint64_t i = 0; i < e.num_indices; ++i) trace.indices[i] = narrow[i];
  }
  ES_CHECK(crc == e.crc,
           "trace file '{}': table {} checksum mismatch (stored {:#010x}, computed {:#010x}): "
           "corrupted data",
           path_, table, e.crc, crc);
  validate_trace(trace, 0, fmt::format("trace file '{}': table {}", path_, table));
  return trace;
}

}  // namespace embshard
