// What the fuzz targets share: their registry, a scratch directory for the
// files a reader is handed, and the rule that tells a clean refusal from a
// finding.
//
// A target (targets/<name>.cpp) is one entry function taking an input's
// bytes. The same function runs under libFuzzer (libfuzzer_main.cpp, one
// target per binary, clang, ASan+UBSan) and in test_fuzz_regressions (every
// target over its seeds and kept findings, in any build).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace embshard::fuzz {

using TargetFn = void (*)(const uint8_t* data, size_t size);
// Repairs, in place, what a mutation cannot guess (checksums), so that the
// fuzzer reaches the parsing behind them; returns the new size (<= max_size).
// Only libFuzzer's custom mutator calls it: an input is always read as it is.
using FixupFn = size_t (*)(uint8_t* data, size_t size, size_t max_size);

struct Target {
  std::string name;
  TargetFn run = nullptr;
  FixupFn fixup = nullptr;
};

bool register_target(const char* name, TargetFn run, FixupFn fixup);
const std::vector<Target>& targets();

// This process's scratch directory (under /dev/shm where there is one, else
// the system's temporary directory), created on first use and removed at
// exit; the directories of processes that no longer run are removed too.
const std::string& scratch_dir();
// `relative` inside the scratch directory (its parent directories created).
std::string scratch_path(const std::string& relative);
// Writes `bytes` to scratch_path(relative), replacing what was there.
std::string write_scratch(const std::string& relative, std::string_view bytes);
inline std::string write_scratch(const std::string& relative, const uint8_t* data, size_t size) {
  return write_scratch(relative, std::string_view(reinterpret_cast<const char*>(data), size));
}

// A finding: printed, then the process aborts (libFuzzer keeps the input as
// a crash); test_fuzz_regressions throws Finding instead.
struct Finding : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void set_finding_handler(void (*handler)(const std::string& message));
[[noreturn]] void report_finding(const std::string& message);

// Runs one reader call. Returning, or throwing an embshard::Error whose
// message names a file of the scratch directory, is a clean refusal; any
// other exception (a library's own, std::out_of_range, a json type error)
// or an Error that names no file is a finding, named by `what`.
void expect_clean(const char* what, const std::function<void()>& body);
// The same for a use of what a reader accepted (a model asked for a cost):
// any embshard::Error is clean there, as the use's inputs may be at fault
// (a network whose weights overflow a float on them) rather than a file.
void expect_clean_use(const char* what, const std::function<void()>& body);

// The input as text.
inline std::string_view text_of(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// zlib helpers for the fixups and the mutator: gzip's magic bytes, a gunzip
// bounded by `max_bytes` (false when the stream is bad or larger), a gzip.
bool is_gzip(const uint8_t* data, size_t size);
bool gunzip_bounded(const uint8_t* data, size_t size, size_t max_bytes, std::string& out);
std::string gzip(std::string_view bytes);
uint32_t crc32_of(const void* data, size_t size);

}  // namespace embshard::fuzz

// Defines and registers target `name`: EMBSHARD_FUZZ_TARGET(trace, fix_trace) { ... }
// with `data` and `size` in scope (fixup: a FixupFn, or nullptr).
#define EMBSHARD_FUZZ_TARGET(name, fixup)                                                     \
  static void embshard_fuzz_##name(const uint8_t* data, size_t size);                        \
  [[maybe_unused]] static const bool embshard_fuzz_registered_##name =                       \
      ::embshard::fuzz::register_target(#name, embshard_fuzz_##name, fixup);                 \
  static void embshard_fuzz_##name(const uint8_t* data, size_t size)
