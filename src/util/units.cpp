#include "embshard/util/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "embshard/util/error.h"

namespace embshard {
namespace {

struct Unit {
  const char* name;
  double bytes;
};

constexpr Unit kUnits[] = {{"b", 1},        {"kb", 1e3},       {"mb", 1e6},
                           {"gb", 1e9},     {"tb", 1e12},      {"kib", 1024.0},
                           {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};

}  // namespace

int64_t parse_bytes(const std::string& text, const std::string& what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  ES_CHECK(end != begin && std::isfinite(number),
           "{}: '{}' is not a size (expected bytes or a number with a unit: 40GB, 512MiB)", what,
           text);
  std::string unit(end);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }),
             unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  double scale = unit.empty() ? 1.0 : 0.0;
  for (const Unit& u : kUnits) {
    if (unit == u.name) scale = u.bytes;
  }
  ES_CHECK(scale > 0, "{}: '{}' has an unknown unit '{}' (valid: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
           what, text, std::string(end));
  const double bytes = std::round(number * scale);
  ES_CHECK(bytes >= 0 && bytes < 9.2e18, "{}: '{}' is {} bytes, must be in 0..9.2e18", what,
           text, bytes);
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(double bytes) {
  static constexpr const char* kNames[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  double value = bytes;
  while (std::abs(value) >= 999.5 && unit < 5) value /= 1000, ++unit;
  if (unit == 0) return fmt::format("{:.0f} B", value);
  const int decimals = std::abs(value) >= 99.95 ? 0 : std::abs(value) >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f} {}", value, decimals, kNames[unit]);
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, end - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    out.push_back(std::move(name));
    start = end + 1;
  }
  return out;
}

std::string count_of(int64_t n, const std::string& noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  }
  return out;
}

}  // namespace embshard
