// libFuzzer's entry points around the one target a fuzz_<name> binary holds.
//
// Beyond ASan and UBSan, each input's allocations are held to a budget: at
// no point may the memory a reader holds grow past kBytesPerInputByte times
// the input's size (its gunzipped size where the input is gzip, as some
// readers take it) plus kBaseBytes. A reader that sizes a buffer by a field
// it has not checked against the file runs past it long before libFuzzer's
// -rss_limit_mb. And a reader closes every file it opened, refusing or not.
#include <dirent.h>
#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <string>

#include <fmt/format.h>

#include "fuzz/fuzz_support.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using embshard::fuzz::Target;

constexpr size_t kBytesPerInputByte = 256;
constexpr size_t kBaseBytes = size_t{64} << 20;
constexpr size_t kMaxGunzipBytes = size_t{256} << 20;

// Bytes held now and the most held since the last reset, from ASan's hooks.
std::atomic<int64_t> live_bytes{0}, peak_bytes{0};

void on_malloc(const volatile void*, size_t size) {
  const int64_t now = live_bytes.fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

void on_free(const volatile void* p) {
  if (p == nullptr) return;
  const void* ptr = const_cast<const void*>(p);
  if (__sanitizer_get_ownership(ptr)) {
    live_bytes.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(ptr)));
  }
}

// The file descriptors this process holds (its directory's own included).
int open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n;
}

const Target& the_target() {
  const auto& all = embshard::fuzz::targets();
  if (all.size() != 1) {
    embshard::fuzz::report_finding(
        fmt::format("a fuzz binary holds one target, this one {}", all.size()));
  }
  return all.front();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Readers that fall back on the shipped data find the checkout's.
  setenv("EMBSHARD_DATA_DIR", EMBSHARD_SOURCE_DIR, /*overwrite=*/0);
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  the_target();
  embshard::fuzz::scratch_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Target& target = the_target();
  size_t measured = size;
  if (embshard::fuzz::is_gzip(data, size)) {
    std::string inner;
    embshard::fuzz::gunzip_bounded(data, size, kMaxGunzipBytes, inner);
    measured = std::max(measured, inner.size());
  }
  const int fds_before = open_fds();
  const int64_t before = live_bytes.load();
  peak_bytes.store(before);
  target.run(data, size);
  const int fds_after = open_fds();
  if (fds_after != fds_before) {
    embshard::fuzz::report_finding(fmt::format("{}: {} file descriptors open before the input, "
                                               "{} after",
                                               target.name, fds_before, fds_after));
  }
  const int64_t held = peak_bytes.load() - before;
  const size_t budget = kBytesPerInputByte * measured + kBaseBytes;
  if (held > static_cast<int64_t>(budget)) {
    embshard::fuzz::report_finding(fmt::format(
        "{}: held {} bytes at peak for an input of {} bytes ({} measured), past the budget of "
        "{} bytes",
        target.name, held, size, measured, budget));
  }
  return 0;
}

// libFuzzer's mutations, then the target's fixup (checksums) nine times in
// ten; a gzip input has what it holds mutated and is gzipped again (seven
// times in eight), so that the reader behind the gzip layer is fuzzed too.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  const Target& target = the_target();
  std::minstd_rand rng(seed);
  if (embshard::fuzz::is_gzip(data, size) && rng() % 8 != 0) {
    std::string inner;
    if (embshard::fuzz::gunzip_bounded(data, size, size_t{1} << 20, inner)) {
      const size_t used = inner.size();
      inner.resize(std::max<size_t>(2 * used, 4096));
      size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(inner.data()), used, inner.size());
      if (target.fixup != nullptr && rng() % 10 != 0) {
        n = target.fixup(reinterpret_cast<uint8_t*>(inner.data()), n, inner.size());
      }
      const std::string packed = embshard::fuzz::gzip(std::string_view(inner.data(), n));
      if (packed.size() <= max_size) {
        std::copy(packed.begin(), packed.end(), data);
        return packed.size();
      }
    }
  }
  size = LLVMFuzzerMutate(data, size, max_size);
  if (target.fixup != nullptr && rng() % 10 != 0) size = target.fixup(data, size, max_size);
  return size;
}
