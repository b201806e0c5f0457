#include "workload/pt_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace embshard::pt {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                   kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kReadWholeBelowBytes = 1 << 20;  // small records are CRC-checked at open
constexpr uint64_t kTailBytes = 1 << 20;  // the end of the archive searched for the directory
constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 30;
constexpr uint64_t kChunkBytes = 8 << 20;
// A deflate stream expands at most 1032:1: a bound on a gzip file's content
// that keeps corrupted sizes from turning into huge allocations.
constexpr uint64_t kMaxInflateRatio = 1032;

uint32_t crc_update(uint32_t crc, const void* data, size_t size) {
  return static_cast<uint32_t>(::crc32(crc, static_cast<const Bytef*>(data),
                                       static_cast<uInt>(size)));  // callers pass <= 8 MiB
}

template <typename T>
T le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int dtype_bytes(DType dtype) { return dtype == DType::kInt32 ? 4 : 8; }
const char* dtype_name(DType dtype) { return dtype == DType::kInt32 ? "int32" : "int64"; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// ---- byte sources: a plain file (pread) or a gzip stream (zlib gz*) ---------

class ByteSource {
 public:
  ByteSource(std::string path, ProgressFn progress)
      : path_(std::move(path)), progress_(std::move(progress)) {}
  virtual ~ByteSource() = default;
  virtual bool gzipped() const = 0;
  // The content's size (a gzip stream's: an upper bound until set_size()).
  uint64_t bound_bytes() const { return bound_; }
  void set_size(uint64_t size) { bound_ = size; }
  uint64_t position() const { return pos_; }

  void seek(uint64_t pos) {
    if (pos == pos_) return;
    if (pos > pos_ && gzipped()) done_ += pos - pos_;  // zlib decompresses what it skips
    do_seek(pos);
    pos_ = pos;
    report();
  }
  // Reads up to n bytes; fewer only at the end of the data.
  size_t read_some(void* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      const size_t step = do_read(static_cast<char*>(out) + got, n - got);
      if (step == 0) break;
      got += step;
      pos_ += step;
    }
    done_ += got;
    report();
    return got;
  }
  void read_exact(void* out, size_t n, const std::string& what) {
    const uint64_t at = pos_;
    const size_t got = read_some(out, n);
    ES_CHECK(got == n, "'{}': truncated file: {} at byte {} needs {} bytes, only {} left", path_,
             what, at, n, got);
  }

 protected:
  virtual void do_seek(uint64_t pos) = 0;
  virtual size_t do_read(char* out, size_t n) = 0;  // 0 at end of data
  void report() {
    if (progress_) progress_(done_);
  }
  std::string path_;
  uint64_t pos_ = 0, done_ = 0, bound_ = 0;
  ProgressFn progress_;
};

namespace {

class PlainSource : public ByteSource {
 public:
  PlainSource(std::string path, ProgressFn progress) : ByteSource(std::move(path), progress) {
    fd_ = ::open(path_.c_str(), O_RDONLY);
    ES_CHECK(fd_ >= 0, "cannot open '{}': {}", path_, std::strerror(errno));
    bound_ = file_size_bytes(path_);
  }
  ~PlainSource() override { ::close(fd_); }
  bool gzipped() const override { return false; }

 protected:
  void do_seek(uint64_t) override {}  // pread takes the position
  size_t do_read(char* out, size_t n) override {
    const ssize_t got = ::pread(fd_, out, std::min<size_t>(n, 1 << 30), static_cast<off_t>(pos_));
    ES_CHECK(got >= 0, "cannot read '{}' at byte {}: {}", path_, pos_, std::strerror(errno));
    return static_cast<size_t>(got);
  }

 private:
  int fd_ = -1;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(std::string path, ProgressFn progress) : ByteSource(std::move(path), progress) {
    file_ = ::gzopen(path_.c_str(), "rb");
    ES_CHECK(file_ != nullptr, "cannot open '{}': {}", path_, std::strerror(errno));
    ::gzbuffer(file_, 1 << 20);
    bound_ = file_size_bytes(path_) * kMaxInflateRatio + 4096;
  }
  ~GzipSource() override { ::gzclose(file_); }
  bool gzipped() const override { return true; }

 protected:
  void do_seek(uint64_t pos) override {
    // zlib emulates seeks: forward decompresses and discards, backward rewinds.
    const z_off64_t got = ::gzseek64(file_, static_cast<z_off64_t>(pos), SEEK_SET);
    ES_CHECK(got == static_cast<z_off64_t>(pos), "'{}': cannot seek the gzip stream to byte {}: {}",
             path_, pos, error_text());
  }
  size_t do_read(char* out, size_t n) override {
    const int got = ::gzread(file_, out, static_cast<unsigned>(std::min<size_t>(n, 1 << 30)));
    ES_CHECK(got >= 0, "'{}': corrupted gzip stream near uncompressed byte {}: {}", path_, pos_,
             error_text());
    if (got == 0) {
      // zlib reports a stream cut short (even in its CRC trailer) as a
      // non-fatal Z_BUF_ERROR, to allow reading a growing file.
      int code = Z_OK;
      ::gzerror(file_, &code);
      ES_CHECK(code == Z_OK, "'{}': truncated or corrupted gzip stream after {} uncompressed "
               "bytes: {}", path_, pos_, error_text());
    }
    return static_cast<size_t>(got);
  }

 private:
  std::string error_text() {
    int code = 0;
    const char* text = ::gzerror(file_, &code);
    return code == Z_ERRNO ? std::strerror(errno) : std::string(text ? text : "unknown error");
  }
  gzFile file_ = nullptr;
};

}  // namespace

namespace {

std::unique_ptr<ByteSource> open_source(const std::string& path, ProgressFn progress) {
  unsigned char magic[4] = {};
  size_t got = 0;
  {
    PlainSource raw(path, {});
    got = raw.read_some(magic, 4);
  }
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    auto source = std::make_unique<GzipSource>(path, std::move(progress));
    unsigned char inner[4] = {};
    const size_t inner_got = source->read_some(inner, 4);
    ES_CHECK(inner_got == 4 && le<uint32_t>(inner) == kLocalSig,
             "'{}': gzip file whose content is not a zip archive (torch.save format): first "
             "bytes {:02x}", path, fmt::join(inner, inner + inner_got, " "));
    source->seek(0);
    return source;
  }
  ES_CHECK(got == 4 && le<uint32_t>(magic) == kLocalSig,
           "'{}': not a torch.save file: neither a zip archive (PK\\x03\\x04) nor gzip "
           "(1f 8b); first bytes {:02x}", path, fmt::join(magic, magic + got, " "));
  return std::make_unique<PlainSource>(path, std::move(progress));
}

// Replaces 0xFFFFFFFF fields by their values from a ZIP64 extra field (0x0001),
// which holds them in this order: uncompressed size, compressed size, local
// header offset.
void apply_zip64(const std::string& extra, std::vector<uint64_t*> fields,
                 const std::string& where) {
  size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(extra.data()) + pos;
    const uint16_t id = le<uint16_t>(p), size = le<uint16_t>(p + 2);
    ES_CHECK(pos + 4 + size <= extra.size(), "{}: extra field 0x{:04x} of {} bytes overruns the "
             "extra data ({} bytes)", where, id, size, extra.size());
    if (id == 0x0001) {
      size_t at = 4;
      for (uint64_t* field : fields) {
        if (*field != 0xFFFFFFFFu) continue;
        ES_CHECK(at + 8 <= 4u + size, "{}: ZIP64 extra field of {} bytes lacks a value", where,
                 size);
        *field = le<uint64_t>(p + at);
        at += 8;
      }
      return;
    }
    pos += 4 + size;
  }
  for (uint64_t* field : fields) {
    ES_CHECK(*field != 0xFFFFFFFFu, "{}: size or offset 0xFFFFFFFF without a ZIP64 extra field",
             where);
  }
}

}  // namespace

// ---- the archive ------------------------------------------------------------

PtArchive::PtArchive(std::string path, ProgressFn progress) : path_(std::move(path)) {
  source_ = open_source(path_, std::move(progress));
  read_directory();
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& e : entries_) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pickle = &e;
    }
  }
  ES_CHECK(pickle != nullptr, "'{}': no '<archive>/data.pkl' record among the {} records of the "
           "zip archive (is it a torch.save file?)", path_, entries_.size());
  prefix_ = pickle->name.substr(0, pickle->name.size() - 8);
  ES_CHECK(pickle->size_bytes <= kMaxPickleBytes, "'{}': record '{}' is {} bytes, more than "
           "this reader accepts ({})", path_, pickle->name, pickle->size_bytes, kMaxPickleBytes);
  const std::string bytes = read_record(*pickle);
  pickle_ = parse_pickle(bytes, fmt::format("'{}': record '{}'", path_, pickle->name));
  if (!gzipped()) {
    // Small records are cheap to check in a plain file (a gzip'd one had its
    // whole content checked against the gzip CRC while finding the directory).
    for (const ZipEntry& e : entries_) {
      if (&e == pickle || e.size_bytes > kReadWholeBelowBytes) continue;
      const std::string content = read_record(e);
      if (e.name == prefix_ + "byteorder") {
        ES_CHECK(content == "little", "'{}': record '{}' says '{}', this reader reads 'little'",
                 path_, e.name, content);
      }
    }
  }
}

PtArchive::~PtArchive() = default;

bool PtArchive::gzipped() const { return source_->gzipped(); }
uint64_t PtArchive::file_bytes() const { return file_size_bytes(path_); }

// Finds the end of central directory record (and its ZIP64 twin) at the end of
// the archive, then reads the central directory: every record's name, size,
// CRC-32 and local header offset.
void PtArchive::read_directory() {
  ByteSource& src = *source_;
  std::string tail;
  uint64_t total = 0;
  if (!gzipped()) {
    total = src.bound_bytes();
    const uint64_t n = std::min<uint64_t>(total, kTailBytes);
    tail.resize(n);
    src.seek(total - n);
    src.read_exact(tail.data(), n, "end of the zip archive");
  } else {
    // The directory is at the end of the zip: decompress everything once,
    // keeping the last kTailBytes (and let zlib check the gzip CRC).
    std::string chunk(kTailBytes, '\0');
    while (true) {
      const size_t got = src.read_some(chunk.data(), chunk.size());
      if (got == 0) break;
      tail.append(chunk.data(), got);
      if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
    }
    total = src.position();
    src.set_size(total);
  }
  const uint64_t tail_at = total - tail.size();
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  // The end record is 22 bytes plus a comment of up to 65535 bytes.
  int64_t end = -1;
  for (int64_t k = static_cast<int64_t>(tail.size()) - 22; k >= 0; --k) {
    if (le<uint32_t>(t + k) == kEndSig && k + 22 + le<uint16_t>(t + k + 20) == tail.size()) {
      end = k;
      break;
    }
    if (tail.size() - k > 22 + 65535) break;
  }
  ES_CHECK(end >= 0, "'{}': no end of central directory record in the last {} bytes: not a zip "
           "archive, or truncated", path_, tail.size());
  uint64_t count = le<uint16_t>(t + end + 10), cd_size = le<uint32_t>(t + end + 12),
           cd_offset = le<uint32_t>(t + end + 16);
  if (end >= 20 && le<uint32_t>(t + end - 20) == kZip64LocatorSig) {
    const uint64_t record_at = le<uint64_t>(t + end - 20 + 8);
    // Subtracted, not added: a locator near 2^64 must not wrap into the tail.
    ES_CHECK(record_at >= tail_at && end >= 20 + 56 &&
                 record_at - tail_at <= static_cast<uint64_t>(end) - 20 - 56 &&
                 le<uint32_t>(t + (record_at - tail_at)) == kZip64EndSig,
             "'{}': ZIP64 end of central directory locator points to byte {}, where there is "
             "no ZIP64 end record", path_, record_at);
    const unsigned char* r = t + (record_at - tail_at);
    count = le<uint64_t>(r + 32);
    cd_size = le<uint64_t>(r + 40);
    cd_offset = le<uint64_t>(r + 48);
  }
  ES_CHECK(cd_offset <= total && cd_size <= total - cd_offset && cd_size <= kMaxPickleBytes &&
               count <= cd_size / 46,
           "'{}': end of central directory record at byte {} is inconsistent: directory of {} "
           "records, {} bytes at byte {}, in an archive of {} bytes", path_, tail_at + end, count,
           cd_size, cd_offset, total);
  std::string cd;
  if (cd_offset >= tail_at) {
    cd = tail.substr(cd_offset - tail_at, cd_size);
  } else {
    cd.resize(cd_size);
    src.seek(cd_offset);
    src.read_exact(cd.data(), cd_size, "central directory");
  }
  parse_central_directory(cd, cd_offset, count);
}

void PtArchive::parse_central_directory(const std::string& cd, uint64_t cd_offset,
                                        uint64_t count) {
  const auto* p = reinterpret_cast<const unsigned char*>(cd.data());
  size_t pos = 0;
  for (uint64_t k = 0; k < count; ++k) {
    const std::string at = fmt::format("'{}': central directory entry {} at byte {}", path_, k,
                                       cd_offset + pos);
    ES_CHECK(cd.size() - pos >= 46 && le<uint32_t>(p + pos) == kCentralSig,
             "{}: missing or bad signature (directory of {} records, {} bytes)", at, count,
             cd.size());
    const unsigned char* h = p + pos;
    const uint16_t method = le<uint16_t>(h + 10), flags = le<uint16_t>(h + 8);
    const size_t name_len = le<uint16_t>(h + 28), extra_len = le<uint16_t>(h + 30),
                 comment_len = le<uint16_t>(h + 32);
    ES_CHECK(cd.size() - pos - 46 >= name_len + extra_len + comment_len,
             "{}: name, extra field and comment overrun the directory", at);
    ZipEntry e;
    e.name.assign(cd.data() + pos + 46, name_len);
    e.crc32 = le<uint32_t>(h + 16);
    uint64_t compressed = le<uint32_t>(h + 20), size = le<uint32_t>(h + 24),
             offset = le<uint32_t>(h + 42);
    const std::string where = fmt::format("{} ('{}')", at, e.name);
    apply_zip64(cd.substr(pos + 46 + name_len, extra_len), {&size, &compressed, &offset}, where);
    ES_CHECK(method == 0, "{}: compression method {}, torch.save stores records uncompressed "
             "(method 0)", where, method);
    ES_CHECK((flags & 0x1) == 0, "{}: encrypted record", where);
    ES_CHECK(compressed == size, "{}: stored record with compressed size {} != size {}", where,
             compressed, size);
    ES_CHECK(offset < cd_offset && size <= cd_offset - offset, "{}: record of {} bytes at byte {} "
             "overlaps the central directory at byte {}", where, size, offset, cd_offset);
    for (const ZipEntry& other : entries_) {
      ES_CHECK(other.name != e.name, "{}: duplicate record name", where);
    }
    e.header_offset = offset;
    e.size_bytes = size;
    entries_.push_back(std::move(e));
    pos += 46 + name_len + extra_len + comment_len;
  }
}

// Reads a record's local header (once) to find where its data starts.
const ZipEntry& PtArchive::locate(const std::string& name) {
  ZipEntry* entry = nullptr;
  for (ZipEntry& e : entries_) {
    if (e.name == name) entry = &e;
  }
  ES_CHECK(entry != nullptr, "'{}': no record '{}' in the archive ({} records)", path_, name,
           entries_.size());
  if (entry->data_offset != 0) return *entry;
  const std::string at = fmt::format("'{}': local header of '{}' at byte {}", path_, name,
                                     entry->header_offset);
  unsigned char h[30];
  source_->seek(entry->header_offset);
  source_->read_exact(h, 30, "local file header of " + name);
  ES_CHECK(le<uint32_t>(h) == kLocalSig, "{}: signature 0x{:08x}, expected 0x{:08x}", at,
           le<uint32_t>(h), kLocalSig);
  std::string local_name(le<uint16_t>(h + 26), '\0');
  source_->read_exact(local_name.data(), local_name.size(), "local file name");
  ES_CHECK(local_name == name, "{}: names the record '{}'", at, local_name);
  const uint64_t data_offset = source_->position() + le<uint16_t>(h + 28);
  ES_CHECK(data_offset <= source_->bound_bytes() &&
               entry->size_bytes <= source_->bound_bytes() - data_offset,
           "{}: record of {} bytes at byte {} runs past the end of the archive", at,
           entry->size_bytes, data_offset);
  entry->data_offset = data_offset;
  return *entry;
}

std::string PtArchive::read_record(const ZipEntry& e) {
  const ZipEntry& entry = locate(e.name);
  std::string bytes(entry.size_bytes, '\0');
  source_->seek(entry.data_offset);
  source_->read_exact(bytes.data(), bytes.size(), "record " + entry.name);
  const uint32_t crc = crc_update(0, bytes.data(), bytes.size());
  ES_CHECK(crc == entry.crc32, "'{}': record '{}' fails its CRC-32 check (stored {:#010x}, "
           "computed {:#010x}): corrupted file", path_, entry.name, entry.crc32, crc);
  return bytes;
}

std::vector<TensorInfo> PtArchive::tuple_of_tensors(size_t arity) const {
  const PyValue& root = *pickle_.root;
  const std::string where = fmt::format("'{}': {}data.pkl", path_, prefix_);
  ES_CHECK(root.is(PyValue::Kind::kTuple) && root.items.size() == arity,
           "{}: expected a tuple of {} tensors, found a {} of {} items: {}", where, arity,
           kind_name(root.kind), root.items.size(), describe(root));
  std::vector<TensorInfo> tensors;
  for (size_t k = 0; k < arity; ++k) {
    tensors.push_back(tensor_from_pickle(*root.items[k], fmt::format("{}: element {}", where, k)));
  }
  return tensors;
}

namespace {

int64_t pickle_int(const PyValue& v, const std::string& what) {
  ES_CHECK(v.is(PyValue::Kind::kInt), "{}: expected an int, found {}", what, describe(v));
  return v.i;
}

std::vector<int64_t> int_tuple(const PyValue& v, const std::string& what) {
  ES_CHECK(v.is(PyValue::Kind::kTuple), "{}: expected a tuple of ints, found {}", what,
           describe(v));
  std::vector<int64_t> out;
  for (const PyValue* item : v.items) out.push_back(pickle_int(*item, what));
  return out;
}

}  // namespace

TensorInfo tensor_from_pickle(const PyValue& v, const std::string& what) {
  using Kind = PyValue::Kind;
  ES_CHECK(v.is(Kind::kCall) && v.items[0]->is(Kind::kGlobal) &&
               v.items[0]->s == "torch._utils._rebuild_tensor_v2",
           "{}: expected a tensor (torch._utils._rebuild_tensor_v2(...)), found {}", what,
           describe(v));
  const PyValue& args = *v.items[1];
  ES_CHECK(args.items.size() >= 4, "{}: _rebuild_tensor_v2 with {} arguments, expected at least "
           "4 (storage, storage_offset, size, stride)", what, args.items.size());
  const PyValue& persid = *args.items[0];
  const PyValue* pid = persid.is(Kind::kPersId) ? persid.items[0] : nullptr;
  ES_CHECK(pid != nullptr && pid->is(Kind::kTuple) && pid->items.size() == 5 &&
               pid->items[0]->is(Kind::kStr) && pid->items[0]->s == "storage" &&
               pid->items[1]->is(Kind::kGlobal) && pid->items[2]->is(Kind::kStr),
           "{}: storage is {}, expected persistent_id(('storage', <storage type>, key, location, "
           "numel))", what, describe(persid));
  TensorInfo t;
  const std::string& type = pid->items[1]->s;
  if (type == "torch.IntStorage") {
    t.dtype = DType::kInt32;
  } else if (type == "torch.LongStorage") {
    t.dtype = DType::kInt64;
  } else {
    ES_THROW("{}: storage type {}: only int32 (torch.IntStorage) and int64 (torch.LongStorage) "
             "tensors are supported", what, type);
  }
  t.storage_key = pid->items[2]->s;
  ES_CHECK(!t.storage_key.empty() && t.storage_key.find('/') == std::string::npos,
           "{}: storage key '{}' is not a record name", what, t.storage_key);
  t.storage_numel = pickle_int(*pid->items[4], what + ": storage numel");
  t.storage_offset = pickle_int(*args.items[1], what + ": storage_offset");
  t.sizes = int_tuple(*args.items[2], what + ": size");
  t.strides = int_tuple(*args.items[3], what + ": stride");
  ES_CHECK(t.sizes.size() == t.strides.size(), "{}: {} sizes but {} strides", what,
           t.sizes.size(), t.strides.size());
  ES_CHECK(t.storage_numel >= 0 && t.storage_offset >= 0, "{}: storage numel {}, offset {}: "
           "must be >= 0", what, t.storage_numel, t.storage_offset);
  int64_t expected_stride = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    ES_CHECK(t.sizes[d] >= 0 && (t.sizes[d] == 0 || expected_stride <= INT64_MAX / t.sizes[d]),
             "{}: size {} of dimension {} is out of range", what, t.sizes[d], d);
    ES_CHECK(t.sizes[d] <= 1 || t.strides[d] == expected_stride, "{}: not contiguous: sizes ({}) "
             "strides ({}); save a .contiguous() tensor", what, fmt::join(t.sizes, ", "),
             fmt::join(t.strides, ", "));
    expected_stride *= std::max<int64_t>(t.sizes[d], 1);
  }
  ES_CHECK(t.numel() <= t.storage_numel - t.storage_offset, "{}: {} elements from offset {} "
           "overrun its storage of {} elements", what, t.numel(), t.storage_offset,
           t.storage_numel);
  return t;
}

std::vector<int64_t> PtArchive::read_tensor(const TensorInfo& tensor, const std::string& what) {
  auto stream = stream_tensor(tensor, what);
  std::vector<int64_t> values(stream->remaining());
  stream->read(values.data(), values.size());
  stream->finish();
  return values;
}

std::unique_ptr<TensorStream> PtArchive::stream_tensor(const TensorInfo& tensor,
                                                       const std::string& what) {
  const ZipEntry& entry = locate(prefix_ + "data/" + tensor.storage_key);
  const uint64_t elem = dtype_bytes(tensor.dtype);
  ES_CHECK(entry.size_bytes % elem == 0 &&
               entry.size_bytes / elem == static_cast<uint64_t>(tensor.storage_numel),
           "'{}': record '{}' ({}) is {} bytes, but its storage holds {} {} elements", path_,
           entry.name, what, entry.size_bytes, tensor.storage_numel, dtype_name(tensor.dtype));
  return std::make_unique<TensorStream>(*this, entry, tensor, what);
}

// ---- tensor streams -----------------------------------------------------------

TensorStream::TensorStream(PtArchive& archive, const ZipEntry& entry, const TensorInfo& tensor,
                           std::string what)
    : archive_(archive), entry_(entry), dtype_(tensor.dtype), what_(std::move(what)),
      numel_(static_cast<uint64_t>(tensor.numel())) {
  skip_to_ = static_cast<uint64_t>(tensor.storage_offset) * dtype_bytes(dtype_);
}

void TensorStream::read_record(void* out, uint64_t bytes) {
  ByteSource& source = *archive_.source_;
  source.seek(entry_.data_offset + record_pos_);
  source.read_exact(out, bytes, fmt::format("record '{}' ({})", entry_.name, what_));
  crc_ = crc_update(crc_, out, bytes);
  record_pos_ += bytes;
}

void TensorStream::skip_record(uint64_t bytes) {
  buffer_.resize(std::min<uint64_t>(bytes, kChunkBytes));
  while (bytes > 0) {
    const uint64_t step = std::min<uint64_t>(bytes, buffer_.size());
    read_record(buffer_.data(), step);
    bytes -= step;
  }
}

void TensorStream::read(int64_t* out, uint64_t count) {
  ES_CHECK(count <= remaining(), "'{}': {}: reading {} elements, only {} left", archive_.path(),
           what_, count, remaining());
  if (record_pos_ < skip_to_) skip_record(skip_to_ - record_pos_);
  const int elem = dtype_bytes(dtype_);
  if (dtype_ == DType::kInt64) {
    // Straight into the output, in chunks so the CRC runs on cached data.
    for (uint64_t k = 0; k < count;) {
      const uint64_t step = std::min<uint64_t>(count - k, kChunkBytes / 8);
      read_record(out + k, step * 8);
      k += step;
    }
  } else {
    buffer_.resize(std::min<uint64_t>(count * elem, kChunkBytes));
    for (uint64_t k = 0; k < count;) {
      const uint64_t step = std::min<uint64_t>(count - k, buffer_.size() / 4);
      read_record(buffer_.data(), step * 4);
      const auto* narrow = reinterpret_cast<const int32_t*>(buffer_.data());
      for (uint64_t i = 0; i < step; ++i) out[k + i] = narrow[i];
      k += step;
    }
  }
  done_ += count;
}

void TensorStream::finish() {
  if (record_pos_ < entry_.size_bytes) skip_record(entry_.size_bytes - record_pos_);
  ES_CHECK(crc_ == entry_.crc32, "'{}': record '{}' ({}) fails its CRC-32 check (stored {:#010x}, "
           "computed {:#010x}): corrupted file", archive_.path(), entry_.name, what_,
           entry_.crc32, crc_);
}

}  // namespace embshard::pt
