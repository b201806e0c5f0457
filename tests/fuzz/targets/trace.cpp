// Index traces (trace.bin, workload/trace.h): the header and directory, then
// every table as `inspect` reads them, with its statistics.
// fuzz-max-len: 16384
#include <cstring>

#include <fmt/format.h>

#include "embshard/workload/stats.h"
#include "embshard/workload/trace.h"
#include "fuzz/fuzz_support.h"

namespace {

using embshard::fuzz::crc32_of;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// The checksums of the sections the directory names (where they lie inside
// the input), of the directory and of the header, recomputed.
size_t fix_trace(uint8_t* data, size_t size, size_t) {
  constexpr size_t kHeader = 64, kEntry = 24;
  if (size < kHeader || std::memcmp(data, embshard::kTraceMagic, 8) != 0) return size;
  const uint32_t index_bytes = load<uint32_t>(data + 12);
  const uint64_t tables = load<uint64_t>(data + 16), batch = load<uint64_t>(data + 24);
  const uint64_t dir_at = load<uint64_t>(data + 40);
  if (dir_at <= size && tables <= (size - dir_at) / kEntry) {
    uint8_t* dir = data + dir_at;
    for (uint64_t t = 0; t < tables; ++t) {
      uint8_t* e = dir + t * kEntry;
      const uint64_t at = load<uint64_t>(e), n = load<uint64_t>(e + 8);
      if (batch >= size || n >= size || (index_bytes != 4 && index_bytes != 8)) continue;
      const uint64_t bytes = (batch + 1) * 8 + n * index_bytes;
      if (at <= size && bytes <= size - at) store<uint32_t>(e + 16, crc32_of(data + at, bytes));
    }
    store<uint32_t>(data + 48, crc32_of(dir, tables * kEntry));
  }
  store<uint32_t>(data + 52, crc32_of(data, 52));
  return size;
}

}  // namespace

EMBSHARD_FUZZ_TARGET(trace, fix_trace) {
  const std::string path = embshard::fuzz::write_scratch("trace.bin", data, size);
  embshard::fuzz::expect_clean("TraceReader", [&] {
    embshard::TraceReader reader(path);
    for (uint64_t t = 0; t < reader.info().num_tables; ++t) {
      const embshard::TableTrace trace = reader.read_table(t);
      embshard::compute_table_stats(trace, 0, fmt::format("{}: table {}", path, t));
    }
  });
}
