// Errors: one exception type and one check macro for the whole project.
//
// ES_CHECK(cond, fmt, args...) throws embshard::Error whose message is the
// formatted text (which must name the file, field and value at fault) followed
// by the failed condition and file:line. Hot kernels do not throw: they return
// a status (see kernel/tbe.h).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace embshard {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const char* file, int line, const char* condition,
                              const std::string& message);

}  // namespace embshard

#define ES_CHECK(cond, ...)                                                 \
  do {                                                                      \
    if (!(cond)) {                                                          \
      ::embshard::throw_error(__FILE__, __LINE__, #cond,                    \
                              ::fmt::format(__VA_ARGS__));                  \
    }                                                                       \
  } while (0)

#define ES_THROW(...) \
  ::embshard::throw_error(__FILE__, __LINE__, nullptr, ::fmt::format(__VA_ARGS__))
