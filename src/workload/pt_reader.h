// A streaming reader for torch.save'd files, without libtorch.
//
// torch.save writes a zip archive (PyTorchStreamWriter): every record stored
// uncompressed (method 0), named "<archive>/data.pkl" (the pickled object),
// "<archive>/data/<key>" (one per storage), "<archive>/version",
// "<archive>/byteorder", ...; ZIP64 extra fields and end records past 4 GiB.
// The file may be gzip'd as a whole (detected by its magic bytes, not its name).
//
// libtorch's writer (1.13) puts sizes and CRC-32 in a data descriptor after
// each record, not in its local header, so PtArchive reads the central
// directory at the end of the archive first, then seeks to the records it
// needs. A gzip'd
// file has no cheap seek: finding the directory decompresses it once (zlib
// checks the gzip CRC), and each backward seek decompresses again from the
// start. Every record read is checked against its CRC-32 (a streamed one when
// it is finished).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "workload/pt_pickle.h"

namespace embshard::pt {

enum class DType { kInt32, kInt64 };
int dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);

// One tensor of data.pkl: torch._utils._rebuild_tensor_v2(storage, offset,
// sizes, strides, ...), contiguous.
struct TensorInfo {
  DType dtype = DType::kInt64;
  std::string storage_key;       // "<archive>/data/<storage_key>"
  int64_t storage_numel = 0;
  int64_t storage_offset = 0;    // in elements
  std::vector<int64_t> sizes, strides;
  int64_t numel() const;
};

// Interprets one value of data.pkl as a tensor; `what` names it for errors.
TensorInfo tensor_from_pickle(const PyValue& value, const std::string& what);

struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;  // local header, in the (uncompressed) zip stream
  uint64_t data_offset = 0;    // 0 until its local header has been read
  uint64_t size_bytes = 0;
  uint32_t crc32 = 0;
};

// Called with the number of (uncompressed) bytes processed so far: read, or
// skipped in a gzip stream (which decompresses them).
using ProgressFn = std::function<void(uint64_t bytes_done)>;

class ByteSource;
class TensorStream;

class PtArchive {
 public:
  // Opens `path`, reads the central directory and parses data.pkl (and, in a
  // plain file, checks the CRC of every small record). Throws Error naming
  // the file on anything malformed.
  explicit PtArchive(std::string path, ProgressFn progress = {});
  ~PtArchive();
  PtArchive(const PtArchive&) = delete;
  PtArchive& operator=(const PtArchive&) = delete;

  const std::string& path() const { return path_; }
  bool gzipped() const;
  // Size of the file on disk, and an upper bound of its uncompressed size.
  uint64_t file_bytes() const;
  const PyValue& root() const { return *pickle_.root; }
  // The tensors of a top-level tuple of `arity` tensors; throws naming the
  // element that is not a supported tensor.
  std::vector<TensorInfo> tuple_of_tensors(size_t arity) const;

  // Reads a whole tensor, converted to int64 (checks the record's CRC).
  std::vector<int64_t> read_tensor(const TensorInfo& tensor, const std::string& what);
  // Streams a tensor front to back (see TensorStream).
  std::unique_ptr<TensorStream> stream_tensor(const TensorInfo& tensor, const std::string& what);

  const std::vector<ZipEntry>& entries() const { return entries_; }

 private:
  friend class TensorStream;
  void read_directory();
  void parse_central_directory(const std::string& cd, uint64_t cd_offset, uint64_t count);
  const ZipEntry& locate(const std::string& name);
  std::string read_record(const ZipEntry& entry);

  std::string path_;
  std::unique_ptr<ByteSource> source_;
  std::vector<ZipEntry> entries_;  // in central directory order
  std::string prefix_;             // "<archive>/"
  Pickle pickle_;
};

// Reads a tensor's elements in order, as int64, verifying the record's CRC-32
// when finished.
class TensorStream {
 public:
  TensorStream(PtArchive& archive, const ZipEntry& entry, const TensorInfo& tensor,
               std::string what);
  // Reads the next `count` elements into out (throws past the tensor's end).
  void read(int64_t* out, uint64_t count);
  uint64_t remaining() const { return numel_ - done_; }
  // Reads the rest of the record and checks its CRC-32.
  void finish();

 private:
  void read_record(void* out, uint64_t bytes);
  void skip_record(uint64_t bytes);

  PtArchive& archive_;
  ZipEntry entry_;
  DType dtype_;
  std::string what_;
  uint64_t numel_ = 0, done_ = 0;
  uint64_t skip_to_ = 0;     // the tensor's first byte in the record
  uint64_t record_pos_ = 0;  // bytes of the record consumed
  uint32_t crc_ = 0;
  std::vector<char> buffer_;
};

}  // namespace embshard::pt
