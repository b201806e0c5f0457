#include "embshard/util/data_dir.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embshard/util/error.h"

namespace embshard {
namespace fs = std::filesystem;

namespace {

// An absolute, normalised path without a trailing separator.
fs::path normal_dir(const fs::path& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

bool holds_models(const fs::path& root) {
  std::error_code ec;
  return fs::is_directory(root / "models", ec);
}

// The first line of `file` without surrounding whitespace.
std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  const auto begin = line.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const auto end = line.find_last_not_of(" \t\r\n");
  return line.substr(begin, end - begin + 1);
}

// Why `root` is no data root ("" when it is one).
std::string why_not_root(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return "no such folder";
  if (!fs::is_directory(root, ec)) return "not a folder";
  if (!holds_models(root)) return "holds no models/ folder";
  return "";
}

// The root named by the file beside the binary in `anchor`, when that file
// exists and names a root; otherwise what went wrong joins `tried`.
std::optional<fs::path> root_from_file(const fs::path& anchor, std::vector<std::string>& tried) {
  const fs::path file = anchor / kDataDirFile;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    tried.push_back(fmt::format("{}: no such file", file.string()));
    return std::nullopt;
  }
  const std::string line = first_line(file);
  if (line.empty()) {
    tried.push_back(fmt::format("{}: empty", file.string()));
    return std::nullopt;
  }
  const fs::path root = normal_dir(fs::path(line).is_absolute() ? fs::path(line) : anchor / line);
  const std::string why = why_not_root(root);
  if (why.empty()) return root;
  tried.push_back(fmt::format("{} names {}: {}", file.string(), root.string(), why));
  return std::nullopt;
}

}  // namespace

std::string resolve_data_root(const std::string& env_value, const std::string& anchor_dir) {
  // An explicit choice that is wrong is an error, not a reason to look further:
  // planning against other models than the ones named would mislead.
  if (!env_value.empty()) {
    const fs::path root = normal_dir(env_value);
    const std::string why = why_not_root(root);
    ES_CHECK(why.empty(),
             "{}='{}' names no embshard data root ({}: {}); set it to a folder holding "
             "models/ and data/published/ (a source checkout or an install's "
             "<prefix>/share/embshard), or unset it",
             kDataDirEnv, env_value, root.string(), why);
    return root.string();
  }
  std::vector<std::string> tried = {fmt::format("{}: not set", kDataDirEnv)};
  if (anchor_dir.empty()) {
    tried.push_back("the folder of the binary holding the library: unknown on this system");
  } else {
    const fs::path anchor = normal_dir(anchor_dir);
    if (const auto root = root_from_file(anchor, tried)) return root->string();
    const fs::path share = normal_dir(anchor / ".." / "share" / "embshard");
    const std::string why = why_not_root(share);
    if (why.empty()) return share.string();
    tried.push_back(fmt::format("{}: {}", share.string(), why));
  }
  std::string list;
  for (const std::string& t : tried) list += "\n  " + t;
  ES_THROW("found no embshard data root (the folder holding models/ and data/published/); "
           "tried:{}\nSet {} to a source checkout or an install's <prefix>/share/embshard, "
           "or keep the binary in its install (<prefix>/bin beside <prefix>/share/embshard); "
           "a cost model of your own plans without them (--model DIR, --calibration FILE), "
           "tables that leave no field to the published statistics too",
           list, kDataDirEnv);
}

std::string library_dir() {
  // The address of this very function lies in whichever binary holds the
  // library's code: a program linked with the static library, or a shared
  // object (the Python extension) that holds it.
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&library_dir), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0) {
    return "";
  }
  fs::path file;
  std::error_code ec;
  if (map != nullptr && map->l_name != nullptr && map->l_name[0] != '\0') {
    file = map->l_name;
  } else {
    // The main program: dladdr would give argv[0], which may be relative to a
    // folder long left or a name found on PATH.
    file = fs::read_symlink("/proc/self/exe", ec);
    if (ec && info.dli_fname != nullptr) file = info.dli_fname;
  }
  if (file.empty()) return "";
  const fs::path resolved = fs::canonical(file, ec);
  return (ec ? fs::absolute(file) : resolved).parent_path().string();
}

std::string data_root() {
  const char* env = std::getenv(kDataDirEnv);
  return resolve_data_root(env != nullptr ? env : "", library_dir());
}

}  // namespace embshard
