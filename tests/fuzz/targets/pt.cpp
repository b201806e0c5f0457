// torch.save'd dlrm_datasets files (workload/import.h): a zip archive holding
// a pickle and its tensors' records, gzip'd or not, imported into a workload
// directory as `embshard import` does.
// fuzz-max-len: 16384
#include <cstring>
#include <filesystem>

#include "embshard/workload/import.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fuzz = embshard::fuzz;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A ZIP64 extra field's values for the fields that are 0xFFFFFFFF, in the
// order the format keeps them (size, compressed size, local header offset).
void apply_zip64(const uint8_t* extra, size_t extra_len, uint64_t* fields[3]) {
  for (size_t pos = 0; pos + 4 <= extra_len;) {
    const uint16_t id = load<uint16_t>(extra + pos), len = load<uint16_t>(extra + pos + 2);
    if (pos + 4 + len > extra_len) return;
    if (id == 0x0001) {
      size_t at = pos + 4;
      for (int k = 0; k < 3; ++k) {
        if (*fields[k] != 0xFFFFFFFFu) continue;
        if (at + 8 > pos + 4 + len) return;
        *fields[k] = load<uint64_t>(extra + at);
        at += 8;
      }
      return;
    }
    pos += 4 + len;
  }
}

// Each record's CRC-32, in the central directory and its local header,
// recomputed from the bytes the directory says it holds.
size_t fix_zip(uint8_t* data, size_t size, size_t) {
  if (size < 22) return size;
  size_t end = size;  // the end of central directory record
  for (size_t k = size - 22 + 1; k-- > 0 && size - k <= 22 + 65535;) {
    if (load<uint32_t>(data + k) == 0x06054b50) {
      end = k;
      break;
    }
  }
  if (end == size) return size;
  uint64_t count = load<uint16_t>(data + end + 10), cd_at = load<uint32_t>(data + end + 16);
  if (end >= 20 && load<uint32_t>(data + end - 20) == 0x07064b50) {
    const uint64_t record = load<uint64_t>(data + end - 20 + 8);
    if (record <= size && size - record >= 56 && load<uint32_t>(data + record) == 0x06064b50) {
      count = load<uint64_t>(data + record + 32);
      cd_at = load<uint64_t>(data + record + 48);
    }
  }
  for (uint64_t k = 0, pos = cd_at; k < count && pos <= size && size - pos >= 46; ++k) {
    uint8_t* h = data + pos;
    if (load<uint32_t>(h) != 0x02014b50) break;
    const size_t name_len = load<uint16_t>(h + 28), extra_len = load<uint16_t>(h + 30),
                 comment_len = load<uint16_t>(h + 32);
    if (size - pos - 46 < name_len + extra_len) break;
    uint64_t usize = load<uint32_t>(h + 24), csize = load<uint32_t>(h + 20),
             offset = load<uint32_t>(h + 42);
    uint64_t* fields[3] = {&usize, &csize, &offset};
    apply_zip64(h + 46 + name_len, extra_len, fields);
    if (offset <= size && size - offset >= 30 && load<uint32_t>(data + offset) == 0x04034b50) {
      const uint64_t at = offset + 30 + load<uint16_t>(data + offset + 26) +
                          load<uint16_t>(data + offset + 28);
      if (at <= size && usize <= size - at) {
        const uint32_t crc = fuzz::crc32_of(data + at, usize);
        std::memcpy(h + 16, &crc, 4);
        std::memcpy(data + offset + 14, &crc, 4);
      }
    }
    pos += 46 + name_len + extra_len + comment_len;
  }
  return size;
}

}  // namespace

EMBSHARD_FUZZ_TARGET(pt, fix_zip) {
  const std::string path = fuzz::write_scratch("in.pt", data, size);
  const std::string out = fuzz::scratch_path("pt_out");
  std::error_code ec;
  std::filesystem::remove_all(out, ec);
  fuzz::expect_clean("import_pt", [&] { embshard::import_pt(path, out); });
}
