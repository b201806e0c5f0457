#include "embshard/workload/data_type.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "embshard/util/error.h"

namespace embshard {

const std::vector<std::string>& data_type_names() {
  static const std::vector<std::string> names = {"fp32", "fp16", "bf16", "int8", "int4"};
  return names;
}

const std::string& data_type_name(DataType type) {
  return data_type_names()[static_cast<size_t>(type)];
}

DataType parse_data_type(const std::string& name, const std::string& where) {
  std::string key = name;
  if (key.rfind("DataType.", 0) == 0) key = key.substr(9);  // str() of TorchRec's enum
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::vector<std::string>& names = data_type_names();
  const auto it = std::find(names.begin(), names.end(), key);
  ES_CHECK(it != names.end(), "{}: data type '{}' is not supported (valid: {})", where, name,
           fmt::join(names, ", "));
  return static_cast<DataType>(it - names.begin());
}

}  // namespace embshard
