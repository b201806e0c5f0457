// Options every command spells the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/cost/topology.h"
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

// --devices-per-host, --inter-host-gbps, --inter-host-latency-us: the
// devices' hosts (cost/topology.h); checked against the device count by
// check_topology.
inline void add_topology_options(CLI::App* cmd, Topology& t) {
  cmd->add_option("--devices-per-host", t.devices_per_host,
                  "Devices on each host, in order (0: all on one host)")
      ->capture_default_str();
  cmd->add_option("--inter-host-gbps", t.inter_host_gbps,
                  "Each host's link to the others, GB/s each way (needed with hosts)");
  cmd->add_option("--inter-host-latency-us", t.inter_host_latency_us,
                  "Latency of an exchange that crosses hosts, us")
      ->capture_default_str();
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

// One --expert setting: KEY=VALUE sets a field. `set` is an Error naming the
// key and value when the value is not of the field's type or fails its check.
struct ExpertSetting {
  std::string key;
  std::string default_text;
  std::function<void(const std::string& value)> set;
};

// A number in min..max.
template <typename T>
ExpertSetting expert_setting(const std::string& key, T& field, T min,
                             T max = std::numeric_limits<T>::max()) {
  return {key, fmt::format("{}", field), [key, &field, min, max](const std::string& value) {
            T parsed;
            ES_CHECK(CLI::detail::lexical_cast(value, parsed), "--expert {}={}: not {}", key, value,
                     std::is_integral_v<T> ? "an integer" : "a number");
            ES_CHECK(parsed >= min && parsed <= max, "--expert {}={}: must be {}", key, value,
                     max == std::numeric_limits<T>::max() ? fmt::format("at least {}", min)
                                                          : fmt::format("{}..{}", min, max));
            field = parsed;
          }};
}

// A switch: KEY alone or KEY=true|false.
inline ExpertSetting expert_switch(const std::string& key, bool& field) {
  return {key, field ? "true" : "false", [key, &field](const std::string& value) {
            ES_CHECK(value.empty() || value == "true" || value == "false",
                     "--expert {}={}: true or false", key, value);
            field = value != "false";
          }};
}

// --expert KEY=VALUE[,KEY=VALUE...] (repeatable): the settings whose defaults
// every documented run uses, kept for experiments in one place. An empty
// item, an unknown key or a bad value is an error naming it.
inline CLI::Option* add_expert_option(CLI::App* cmd, std::vector<ExpertSetting> settings) {
  std::vector<std::string> keys;
  for (const ExpertSetting& s : settings) keys.push_back(s.key + "=" + s.default_text);
  auto known = std::make_shared<std::vector<ExpertSetting>>(std::move(settings));
  return cmd
      ->add_option_function<std::vector<std::string>>(
          "--expert",
          [known, keys](const std::vector<std::string>& texts) {
            for (const std::string& text : texts) {
              for (const std::string& item : split_names(text)) {
                ES_CHECK(!item.empty(), "--expert: an empty item in '{}'", text);
                const size_t eq = item.find('=');
                const std::string key = item.substr(0, eq);
                auto it = std::find_if(known->begin(), known->end(),
                                       [&](const ExpertSetting& s) { return s.key == key; });
                ES_CHECK(it != known->end(), "--expert: unknown setting '{}' (settings: {})", key,
                         fmt::join(keys, ", "));
                it->set(eq == std::string::npos ? "" : item.substr(eq + 1));
              }
            }
          },
          "Expert settings, KEY=VALUE comma-separated, whose defaults every documented run uses "
          "(docs/cli.md, \"Expert settings\"): " +
              fmt::format("{}", fmt::join(keys, ", ")))
      ->type_name("KEY=VALUE,...");
}

// neuroshard's search budget and rating (plan, bench plan, eval).
inline std::vector<ExpertSetting> search_settings(PlannerOptions& p) {
  SearchBudget& b = p.budget;
  return {expert_setting("beam-width", b.beam_width, 1),
          expert_setting("max-steps", b.max_steps, 0),
          expert_setting("candidates", b.candidates, 0),
          expert_setting("grid-steps", b.grid_steps, 1),
          expert_setting("scan-patience", b.scan_patience, 0),
          expert_setting("step-patience", b.step_patience, 0),
          expert_setting("screen-keep", b.screen_keep, 0),
          expert_setting("uncertainty", p.uncertainty, 0.0, 1.0)};
}

// --threads: neuroshard's search threads (plan, bench plan).
inline CLI::Option* add_search_threads_option(CLI::App* cmd, int& threads) {
  return cmd
      ->add_option("--threads", threads,
                   "neuroshard search threads (0: one per hardware thread; "
                   "the plan is the same for any count)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace embshard::cli
