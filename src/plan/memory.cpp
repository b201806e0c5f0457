// What memory a plan counts: optimizer state by optimizer, and the storage
// reserved for what is not an embedding table (plan.h); the report's lines
// on them (report.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/plan/plan.h"
#include "embshard/plan/report.h"
#include "embshard/util/error.h"
#include "embshard/util/units.h"

namespace embshard {

MemoryModel MemoryModel::of(OptimizerType optimizer) {
  switch (optimizer) {
    case OptimizerType::kSgd:
      return {0, 0};
    case OptimizerType::kRowWiseAdagrad:
      return {4, 0};
    case OptimizerType::kAdam:
      return {0, 8};
  }
  return {};
}

std::string MemoryModel::optimizer_name() const {
  if (optimizer_bytes_per_row == 0 && optimizer_bytes_per_weight == 0) return "SGD";
  if (optimizer_bytes_per_row == 4 && optimizer_bytes_per_weight == 0) return "row-wise Adagrad";
  if (optimizer_bytes_per_row == 0 && optimizer_bytes_per_weight == 8) return "Adam";
  return fmt::format("{} bytes a row and {} a weight", optimizer_bytes_per_row,
                     optimizer_bytes_per_weight);
}

namespace {

// The index of `name` among `names`; Error naming `option`, the value and
// the valid names otherwise.
size_t name_index(const std::vector<std::string>& names, const std::string& name,
                  const std::string& option) {
  const auto it = std::find(names.begin(), names.end(), name);
  ES_CHECK(it != names.end(), "{} is '{}' (valid: {})", option, name, fmt::join(names, ", "));
  return static_cast<size_t>(it - names.begin());
}

}  // namespace

const std::vector<std::string>& step_kind_names() {
  static const std::vector<std::string> names = {"training", "inference"};
  return names;
}

StepKind parse_step_kind(const std::string& name, const std::string& option) {
  return static_cast<StepKind>(name_index(step_kind_names(), name, option));
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "rowwise_adagrad", "adam"};
  return names;
}

OptimizerType parse_optimizer(const std::string& name, const std::string& option) {
  return static_cast<OptimizerType>(name_index(optimizer_names(), name, option));
}

int64_t StorageReserve::of(int64_t capacity) const {
  if (bytes >= 0) return bytes;
  return static_cast<int64_t>(std::llround(share * static_cast<double>(capacity)));
}

std::string StorageReserve::str() const {
  return bytes >= 0 ? format_bytes(static_cast<double>(bytes)) : fmt::format("{:g}%", 100 * share);
}

StorageReserve StorageReserve::parse(const std::string& text, const std::string& option) {
  StorageReserve r;
  const auto share = [&](const std::string& number, double scale) {
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    ES_CHECK(!number.empty() && end == number.c_str() + number.size() && std::isfinite(v) &&
                 v >= 0 && v * scale < 1,
             "{} is '{}': a share of each device's memory under 100% (\"15%\", \"0.15\") or an "
             "amount (\"2GB\", \"0\")",
             option, text);
    r.share = v * scale;
    return r;
  };
  if (!text.empty() && text.back() == '%') return share(text.substr(0, text.size() - 1), 0.01);
  if (text.find('.') != std::string::npos &&
      text.find_first_of("BbKkMmGgTt") == std::string::npos) {
    return share(text, 1.0);
  }
  r.bytes = parse_bytes(text, option);
  return r;
}

namespace {

// What the tables may use of each device, what was reserved, and whose
// optimizer state is counted.
std::string memory_line(const PlanTask& task) {
  const auto [lo, hi] =
      std::minmax_element(task.device_mem_bytes.begin(), task.device_mem_bytes.end());
  const std::string room = *lo == *hi ? format_bytes(static_cast<double>(*lo))
                                      : format_bytes(static_cast<double>(*lo)) + " to " +
                                            format_bytes(static_cast<double>(*hi));
  std::string reserved = "nothing reserved";
  if (!task.reserved_bytes.empty()) {
    const int64_t most = *std::max_element(task.reserved_bytes.begin(), task.reserved_bytes.end());
    reserved = fmt::format("{} reserved for what is not an embedding table",
                           *lo == *hi ? format_bytes(static_cast<double>(most))
                                      : "up to " + format_bytes(static_cast<double>(most)));
  }
  const std::string state = task.step == StepKind::kInference
                                ? "inference: weights only"
                                : "optimizer state of " + task.memory.optimizer_name();
  return fmt::format("memory: {} per device for the tables ({}); {}\n", room, reserved, state);
}

// Where some tables are not fp32: how many of each type.
std::string data_type_line(const PlanTask& task) {
  std::map<DataType, int> count;
  for (const TableSpec& s : task.tables) ++count[s.data_type];
  if (count.size() == 1 && count.begin()->first == DataType::kFp32) return "";
  std::vector<std::string> parts;
  for (const auto& [type, n] : count)
    parts.push_back(fmt::format("{} {}", n, data_type_name(type)));
  return fmt::format("data types: {}; memory and floors count each type's bytes\n",
                     fmt::join(parts, ", "));
}

}  // namespace

std::string memory_lines(const PlanTask& task) { return memory_line(task) + data_type_line(task); }

}  // namespace embshard
