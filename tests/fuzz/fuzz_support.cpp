#include "fuzz/fuzz_support.h"

#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <typeinfo>

#include "embshard/util/error.h"

namespace embshard::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<Target>& registry() {
  static std::vector<Target> targets;
  return targets;
}

void abort_on_finding(const std::string& message) {
  std::fprintf(stderr, "==embshard-fuzz== FINDING: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void (*finding_handler)(const std::string&) = abort_on_finding;

constexpr const char* kScratchPrefix = "embshard-fuzz-";

// Scratch directories of processes that no longer run (a crash under
// libFuzzer skips the removal at exit).
void remove_stale(const fs::path& base) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kScratchPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::char_traits<char>::length(kScratchPrefix),
                                 nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

std::string make_scratch_dir() {
  std::error_code ec;
  fs::path base = "/dev/shm";  // tmpfs: a write per input costs no disk
  if (!fs::is_directory(base, ec) || ::access(base.c_str(), W_OK) != 0) {
    base = fs::temp_directory_path();
  }
  remove_stale(base);
  const fs::path dir = base / (kScratchPrefix + std::to_string(::getpid()));
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace

bool register_target(const char* name, TargetFn run, FixupFn fixup) {
  registry().push_back({name, run, fixup});
  return true;
}

const std::vector<Target>& targets() { return registry(); }

const std::string& scratch_dir() {
  // Never destroyed: the removal at exit may run after static destructors.
  static const std::string* dir = [] {
    const auto* made = new std::string(make_scratch_dir());
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(scratch_dir(), ec);
    });
    return made;
  }();
  return *dir;
}

std::string scratch_path(const std::string& relative) {
  const fs::path path = fs::path(scratch_dir()) / relative;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  return path.string();
}

std::string write_scratch(const std::string& relative, std::string_view bytes) {
  const std::string path = scratch_path(relative);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) report_finding("cannot write the scratch file " + path);
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) report_finding("cannot write the scratch file " + path);
  return path;
}

void set_finding_handler(void (*handler)(const std::string&)) { finding_handler = handler; }

void report_finding(const std::string& message) {
  finding_handler(message);
  std::abort();  // a handler that returns
}

namespace {

void run_clean(const char* what, const std::function<void()>& body, bool names_a_file) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (names_a_file && message.find(scratch_dir()) == std::string::npos) {
      report_finding(std::string(what) + ": an error that names no file: " + message);
    }
  } catch (const std::exception& e) {
    report_finding(std::string(what) + ": an exception other than embshard::Error (" +
                   typeid(e).name() + "): " + e.what());
  } catch (...) {
    report_finding(std::string(what) + ": an exception of an unknown type");
  }
}

}  // namespace

void expect_clean(const char* what, const std::function<void()>& body) {
  run_clean(what, body, /*names_a_file=*/true);
}

void expect_clean_use(const char* what, const std::function<void()>& body) {
  run_clean(what, body, /*names_a_file=*/false);
}

bool is_gzip(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

bool gunzip_bounded(const uint8_t* data, size_t size, size_t max_bytes, std::string& out) {
  out.clear();
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return false;
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  char chunk[1 << 14];
  int rc = Z_OK;
  while (rc == Z_OK && out.size() <= max_bytes) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - z.avail_out);
    if (rc == Z_BUF_ERROR || (z.avail_in == 0 && z.avail_out != 0 && rc == Z_OK)) break;
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END && out.size() <= max_bytes;
}

std::string gzip(std::string_view bytes) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, bytes.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

uint32_t crc32_of(const void* data, size_t size) {
  return static_cast<uint32_t>(
      ::crc32(0L, static_cast<const Bytef*>(data), static_cast<uInt>(size)));
}

}  // namespace embshard::fuzz
