// Options every command spells the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/util/units.h"

namespace embshard::cli {

// "a | b | c", for help texts listing a registry's names.
inline std::string one_of(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, " | "));
}

// A size in bytes, given as bytes or with a unit ("40GB", "512MiB").
inline CLI::Option* add_bytes_option(CLI::App* cmd, const std::string& name, int64_t& bytes,
                                     const std::string& help) {
  const std::string flag = name.substr(name.rfind(',') + 1);
  return cmd
      ->add_option_function<std::string>(
          name, [&bytes, flag](const std::string& text) { bytes = parse_bytes(text, flag); },
          help + " (bytes, or with a unit: 40GB, 512MiB)")
      ->type_name("SIZE");
}

// A list of sizes, comma-separated.
inline CLI::Option* add_bytes_list_option(CLI::App* cmd, const std::string& name,
                                          std::vector<int64_t>& bytes, const std::string& help) {
  const std::string flag = name.substr(name.rfind(',') + 1);
  return cmd
      ->add_option_function<std::vector<std::string>>(
          name,
          [&bytes, flag](const std::vector<std::string>& texts) {
            bytes.clear();
            for (const std::string& t : texts) bytes.push_back(parse_bytes(t, flag));
          },
          help + " (bytes, or with a unit: 40GB, 512MiB)")
      ->delimiter(',')
      ->type_name("SIZE,...");
}

}  // namespace embshard::cli
