// Options every command spells the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/kernel/executor.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/units.h"

namespace embshard::cli {

// "a | b | c", for help texts listing a registry's names.
inline std::string one_of(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, " | "));
}

// The planners --algo/--algos accept: embshard's (torchrec being embshard's
// reading of TorchRec's heuristics), then TorchRec's own planner, run through
// TorchRec's code.
inline std::string planner_choices() {
  std::vector<std::string> names = planner_names();
  for (std::string& name : names) {
    if (name == "torchrec") name += " (embshard's reading of TorchRec's heuristics)";
  }
  return one_of(names) + " | torchrec_planner (TorchRec's own planner, through the Python " +
         "scripts/install_torchrec.sh makes)";
}

// --executor: one of this build's executors, refused before any work runs.
inline CLI::Option* add_executor_option(CLI::App* cmd, std::string& executor,
                                        const std::string& help) {
  return cmd->add_option("--executor", executor, help + one_of(executor_names()))
      ->check(CLI::IsMember(executor_names()))
      ->capture_default_str();
}

// --seed: a non-negative number (a negative one would wrap to 2^64 - 1).
template <typename T>
CLI::Option* add_seed_option(CLI::App* cmd, T& seed, const std::string& help) {
  const CLI::Validator non_negative(
      [](std::string& text) {
        return text.find('-') == std::string::npos
                   ? std::string()
                   : "is " + text + ", must be a non-negative integer";
      },
      "");
  return cmd->add_option("--seed", seed, help)->check(non_negative)->capture_default_str();
}

// --thread-cpu-time: the CPU executor times steps by the thread's CPU time
// (ExecutorOptions::thread_cpu_time).
inline CLI::Option* add_thread_cpu_time_flag(CLI::App* cmd, bool& on) {
  return cmd->add_flag("--thread-cpu-time", on,
                       "cpu: time steps by the thread's CPU time, not the wall clock (waits for a "
                       "core not counted; 1 thread)");
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
            // Split here, not by CLI11's delimiter, which drops an empty item
            // ("1GB,,2GB"): parse_bytes refuses it, naming the option.
            for (const std::string& text : texts) {
              for (const std::string& t : split_names(text)) bytes.push_back(parse_bytes(t, flag));
            }
          },
          help + " (bytes, or with a unit: 40GB, 512MiB)")
      ->type_name("SIZE,...");
}

// A comma-separated list (or several: --dims 8,16 --dims 32), split here, not
// by CLI11's delimiter, which drops an empty item ("8,,16"): an empty item,
// or one that is not a T or fails `check`, is an error naming the option.
// The help shows the values it holds now as the default.
template <typename T>
CLI::Option* add_list_option(CLI::App* cmd, const std::string& name, std::vector<T>& values,
                             const std::string& help, CLI::Validator check = {}) {
  const std::string flag = name.substr(name.rfind(',') + 1);
  return cmd
      ->add_option_function<std::vector<std::string>>(
          name,
          [&values, flag, check](const std::vector<std::string>& texts) {
            values.clear();
            for (const std::string& text : texts) {
              for (std::string item : split_names(text)) {
                ES_CHECK(!item.empty(), "{}: an empty item in '{}'", flag, text);
                T value;
                ES_CHECK(CLI::detail::lexical_cast(item, value), "{}: '{}' in '{}' is not a {}",
                         flag, item, text, CLI::detail::type_name<T>());
                const std::string why = check(item);
                ES_CHECK(why.empty(), "{}: '{}': {}", flag, item, why);
                values.push_back(std::move(value));
              }
            }
          },
          help)
      ->type_name(std::string(CLI::detail::type_name<T>()) + ",...")
      ->default_str(fmt::format("{}", fmt::join(values, ",")));
}

// neuroshard's shortcuts over NeuroShard's own search (plan, bench plan, eval).
inline void add_shortcut_options(CLI::App* cmd, PlannerOptions& p) {
  cmd->add_option("--scan-patience", p.scan_patience, "neuroshard: stop a piece's device "
                  "scan after N costed devices in a row beat nothing (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--step-patience", p.step_patience, "neuroshard: stop the beam after N "
                  "steps in a row find no cheaper plan (0: every one of the beam's steps)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--screen-keep", p.screen_keep, "neuroshard: rate a beam step's "
                  "candidates on their parent's best cap first and only the N x beam-width "
                  "best on the whole grid (0: all on the whole grid)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--uncertainty", p.uncertainty, "neuroshard: rate each device at its "
                  "predicted compute plus U x the root of its pieces' summed squared costs "
                  "alone (each piece's relative error; 0: the model's figure alone)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

// neuroshard's search options (plan, bench plan).
inline void add_search_options(CLI::App* cmd, PlannerOptions& p) {
  cmd->add_option("--beam-width", p.beam_width, "neuroshard beam width")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-steps", p.max_steps, "neuroshard beam steps")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--candidates", p.candidates, "neuroshard: top-k pieces by size and by cost to "
                  "try splitting")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--grid-steps", p.grid_steps, "neuroshard dim-sum caps (1.0..1.5 x mean)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_shortcut_options(cmd, p);
  cmd->add_option("--threads", p.threads, "neuroshard search threads (0: one per hardware "
                  "thread; the plan is the same for any count)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace embshard::cli
