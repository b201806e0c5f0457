#include "embshard/util/error.h"

#include <cstring>

namespace embshard {

void throw_error(const char* file, int line, const char* condition,
                 const std::string& message) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string text = message;
  if (condition != nullptr) {
    text += fmt::format(" [check failed: {} at {}:{}]", condition, base, line);
  } else {
    text += fmt::format(" [at {}:{}]", base, line);
  }
  throw Error(text);
}

}  // namespace embshard
