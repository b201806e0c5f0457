// Test support: writes torch.save-format files without libtorch, streaming.
//
// The layout is Python torch.save's: "<archive>/data.pkl" first (protocol 2,
// the tensors as torch._utils._rebuild_tensor_v2(persistent_id(('storage',
// torch.LongStorage, key, 'cpu', numel)), 0, size, stride, False,
// OrderedDict())), then "byteorder", the storages "data/<k>", "version".
// Records are stored (method 0), padded to 64 bytes with an "FB" extra field
// like PyTorchStreamWriter, with sizes in a trailing data descriptor (as
// libtorch writes them) or in the local header. With `zip64` every size and
// offset goes through ZIP64 extra fields and end records, as a file of more
// than 4 GiB would. test_pt_reader_torch checks that libtorch loads what this
// writes; test_pt_reader and the embshard_make_pt tool use it.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace embshard::testing {

struct PtTensorSpec {
  std::string storage_type = "LongStorage";  // torch.<storage_type>; IntStorage is int32
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // empty: contiguous
  // Fills out[0..count) with elements begin..begin+count of the tensor.
  std::function<void(uint64_t begin, uint64_t count, int64_t* out)> fill;

  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
    return n;
  }
  int elem_bytes() const { return storage_type == "IntStorage" ? 4 : 8; }
};

struct PtWriteOptions {
  bool zip64 = false;
  bool data_descriptor = true;
  std::string archive = "archive";
  std::string pickle_override;  // if set, written as data.pkl instead
};

namespace pt_detail {

inline void put_u16(std::string& s, uint16_t v) { s.append(reinterpret_cast<char*>(&v), 2); }
inline void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<char*>(&v), 4); }
inline void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<char*>(&v), 8); }

inline void pickle_int(std::string& p, int64_t v) {
  if (v >= 0 && v < 256) {
    p += 'K';
    p += static_cast<char>(v);
  } else if (v >= 0 && v < 65536) {
    p += 'M';
    put_u16(p, static_cast<uint16_t>(v));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    p += 'J';
    put_u32(p, static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    p += '\x8a';
    p += '\x08';
    put_u64(p, static_cast<uint64_t>(v));
  }
}

inline void pickle_str(std::string& p, const std::string& s) {
  p += 'X';
  put_u32(p, static_cast<uint32_t>(s.size()));
  p += s;
}

inline void pickle_int_tuple(std::string& p, const std::vector<int64_t>& v) {
  if (v.empty()) {
    p += ')';
    return;
  }
  if (v.size() > 3) p += '(';
  for (int64_t x : v) pickle_int(p, x);
  p += v.size() == 1 ? '\x85' : v.size() == 2 ? '\x86' : v.size() == 3 ? '\x87' : 't';
}

}  // namespace pt_detail

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// The data.pkl of a tuple of tensors, storages keyed "0", "1", ...
inline std::string pt_tuple_pickle(const std::vector<PtTensorSpec>& tensors) {
  using namespace pt_detail;
  std::string p = "\x80\x02";
  for (size_t k = 0; k < tensors.size(); ++k) {
    const PtTensorSpec& t = tensors[k];
    if (k == 0) {
      p += "ctorch._utils\n_rebuild_tensor_v2\nq";
      p += '\0';
    } else {
      p += "h";
      p += '\0';
    }
    p += "((";
    pickle_str(p, "storage");
    p += "ctorch\n" + t.storage_type + "\n";
    pickle_str(p, std::to_string(k));
    pickle_str(p, "cpu");
    pickle_int(p, static_cast<int64_t>(t.numel()));
    p += "tQ";
    pickle_int(p, 0);
    pickle_int_tuple(p, t.sizes);
    pickle_int_tuple(p, t.strides.empty() ? contiguous_strides(t.sizes) : t.strides);
    p += "\x89" "ccollections\nOrderedDict\n)RtR";
  }
  p += tensors.size() == 3 ? "\x87" : tensors.size() == 2 ? "\x86" : "\x85";
  p += '.';
  return p;
}

class PtZipWriter {
 public:
  PtZipWriter(const std::string& path, PtWriteOptions options) : options_(std::move(options)) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw std::runtime_error("cannot create " + path);
  }
  ~PtZipWriter() {
    if (file_) std::fclose(file_);
  }

  // Writes one record; `produce` is called with a sink until it is done.
  void add(const std::string& name,
           const std::function<void(const std::function<void(const void*, size_t)>&)>& produce) {
    using namespace pt_detail;
    Entry e{name, position_, 0, 0};
    const bool dd = options_.data_descriptor, z64 = options_.zip64;
    std::string h;
    put_u32(h, 0x04034b50);
    put_u16(h, z64 ? 45 : 20);
    put_u16(h, dd ? 0x0008 : 0);
    put_u16(h, 0);  // stored
    put_u32(h, 0);  // time, date
    const size_t crc_at = h.size();
    put_u32(h, 0);
    put_u32(h, z64 ? 0xFFFFFFFFu : 0);
    put_u32(h, z64 ? 0xFFFFFFFFu : 0);
    put_u16(h, static_cast<uint16_t>(name.size()));
    std::string extra;
    if (z64) {
      put_u16(extra, 0x0001);
      put_u16(extra, 16);
      put_u64(extra, 0);  // patched below when there is no data descriptor
      put_u64(extra, 0);
    }
    // Pad the data to 64 bytes with an "FB" field, as PyTorchStreamWriter does.
    const size_t unpadded = position_ + h.size() + 2 + name.size() + extra.size() + 4;
    const size_t pad = (64 - unpadded % 64) % 64;
    put_u16(extra, 0x4246);
    put_u16(extra, static_cast<uint16_t>(pad));
    extra.append(pad, 'Z');
    put_u16(h, static_cast<uint16_t>(extra.size()));
    h += name;
    const size_t z64_at = h.size() + 4;
    h += extra;
    write(h.data(), h.size());
    const uint64_t data_at = position_;
    uint32_t crc = 0;
    produce([&](const void* data, size_t size) {
      crc = static_cast<uint32_t>(::crc32(crc, static_cast<const Bytef*>(data),
                                          static_cast<uInt>(size)));
      write(data, size);
    });
    e.size = position_ - data_at;
    e.crc = crc;
    if (dd) {
      std::string d;
      put_u32(d, 0x08074b50);
      put_u32(d, crc);
      if (z64) {
        put_u64(d, e.size);
        put_u64(d, e.size);
      } else {
        put_u32(d, static_cast<uint32_t>(e.size));
        put_u32(d, static_cast<uint32_t>(e.size));
      }
      write(d.data(), d.size());
    } else {
      // Patch the CRC and sizes into the local header.
      std::string sizes;
      put_u32(sizes, crc);
      if (!z64) {
        put_u32(sizes, static_cast<uint32_t>(e.size));
        put_u32(sizes, static_cast<uint32_t>(e.size));
      }
      patch(e.offset + crc_at, sizes);
      if (z64) {
        std::string big;
        put_u64(big, e.size);
        put_u64(big, e.size);
        patch(e.offset + z64_at, big);
      }
    }
    entries_.push_back(e);
  }

  void add_bytes(const std::string& name, const std::string& content) {
    add(name, [&](const auto& sink) { sink(content.data(), content.size()); });
  }

  void finish() {
    using namespace pt_detail;
    const bool z64 = options_.zip64;
    const uint64_t cd_at = position_;
    for (const Entry& e : entries_) {
      std::string c;
      put_u32(c, 0x02014b50);
      put_u16(c, z64 ? 45 : 20);
      put_u16(c, z64 ? 45 : 20);
      put_u16(c, options_.data_descriptor ? 0x0008 : 0);
      put_u16(c, 0);
      put_u32(c, 0);
      put_u32(c, e.crc);
      put_u32(c, z64 ? 0xFFFFFFFFu : static_cast<uint32_t>(e.size));
      put_u32(c, z64 ? 0xFFFFFFFFu : static_cast<uint32_t>(e.size));
      put_u16(c, static_cast<uint16_t>(e.name.size()));
      put_u16(c, z64 ? 28 : 0);
      put_u16(c, 0);
      put_u16(c, 0);
      put_u16(c, 0);
      put_u32(c, 0);
      put_u32(c, z64 ? 0xFFFFFFFFu : static_cast<uint32_t>(e.offset));
      c += e.name;
      if (z64) {
        put_u16(c, 0x0001);
        put_u16(c, 24);
        put_u64(c, e.size);
        put_u64(c, e.size);
        put_u64(c, e.offset);
      }
      write(c.data(), c.size());
    }
    const uint64_t cd_size = position_ - cd_at;
    std::string end;
    if (z64) {
      const uint64_t record_at = position_;
      put_u32(end, 0x06064b50);
      put_u64(end, 44);
      put_u16(end, 45);
      put_u16(end, 45);
      put_u32(end, 0);
      put_u32(end, 0);
      put_u64(end, entries_.size());
      put_u64(end, entries_.size());
      put_u64(end, cd_size);
      put_u64(end, cd_at);
      put_u32(end, 0x07064b50);
      put_u32(end, 0);
      put_u64(end, record_at);
      put_u32(end, 1);
    }
    put_u32(end, 0x06054b50);
    put_u32(end, 0);
    put_u16(end, z64 ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
    put_u16(end, z64 ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
    put_u32(end, z64 ? 0xFFFFFFFFu : static_cast<uint32_t>(cd_size));
    put_u32(end, z64 ? 0xFFFFFFFFu : static_cast<uint32_t>(cd_at));
    put_u16(end, 0);
    write(end.data(), end.size());
    if (std::fclose(file_) != 0) throw std::runtime_error("cannot write the zip (disk full?)");
    file_ = nullptr;
  }

 private:
  struct Entry {
    std::string name;
    uint64_t offset, size;
    uint32_t crc;
  };
  void write(const void* data, size_t size) {
    if (std::fwrite(data, 1, size, file_) != size) throw std::runtime_error("write failed");
    position_ += size;
  }
  void patch(uint64_t at, const std::string& bytes) {
    std::fflush(file_);
    fseeko(file_, static_cast<off_t>(at), SEEK_SET);
    std::fwrite(bytes.data(), 1, bytes.size(), file_);
    fseeko(file_, 0, SEEK_END);
  }

  PtWriteOptions options_;
  std::FILE* file_ = nullptr;
  uint64_t position_ = 0;
  std::vector<Entry> entries_;
};

// Writes a torch.save-format file holding a tuple of the given tensors.
inline void write_pt_tuple(const std::string& path, const std::vector<PtTensorSpec>& tensors,
                           const PtWriteOptions& options = {}) {
  PtZipWriter zip(path, options);
  const std::string prefix = options.archive + "/";
  zip.add_bytes(prefix + "data.pkl", options.pickle_override.empty()
                                         ? pt_tuple_pickle(tensors)
                                         : options.pickle_override);
  zip.add_bytes(prefix + "byteorder", "little");
  for (size_t k = 0; k < tensors.size(); ++k) {
    const PtTensorSpec& t = tensors[k];
    zip.add(prefix + "data/" + std::to_string(k), [&](const auto& sink) {
      std::vector<int64_t> wide(1 << 16);
      std::vector<int32_t> narrow(wide.size());
      for (uint64_t begin = 0; begin < t.numel(); begin += wide.size()) {
        const uint64_t count = std::min<uint64_t>(wide.size(), t.numel() - begin);
        t.fill(begin, count, wide.data());
        if (t.elem_bytes() == 8) {
          sink(wide.data(), count * 8);
        } else {
          for (uint64_t i = 0; i < count; ++i) narrow[i] = static_cast<int32_t>(wide[i]);
          sink(narrow.data(), count * 4);
        }
      }
    });
  }
  zip.add_bytes(prefix + "version", "3\n");
  zip.finish();
}

// gzip-compresses `from` into `to` (zlib gzopen "wb").
inline void gzip_file(const std::string& from, const std::string& to) {
  std::FILE* in = std::fopen(from.c_str(), "rb");
  gzFile out = gzopen(to.c_str(), "wb");
  if (!in || !out) throw std::runtime_error("gzip_file: cannot open " + from + " or " + to);
  std::vector<char> buf(1 << 20);
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
    gzwrite(out, buf.data(), static_cast<unsigned>(got));
  }
  std::fclose(in);
  if (gzclose(out) != Z_OK) throw std::runtime_error("gzip_file: cannot write " + to);
}

}  // namespace embshard::testing
