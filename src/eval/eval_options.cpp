// What an eval runs: its --algos items (their sharding types and settings)
// and the checks of its options, made before anything is measured.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embshard/eval/eval.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/units.h"

namespace embshard {

std::string verified_base(const std::string& name) {
  const size_t at = name.size() >= kVerifySuffix.size()
                        ? name.size() - kVerifySuffix.size()
                        : std::string::npos;
  return at != std::string::npos && name.compare(at, std::string::npos, kVerifySuffix) == 0
             ? name.substr(0, at)
             : "";
}

AlgoSpec parse_algo_spec(const std::string& spec, const EvalOptions& run) {
  AlgoSpec out{spec, run.types, run.planner, run.verify};
  if (const size_t at = spec.find('@'); at != std::string::npos) {
    std::string list = spec.substr(at + 1);
    std::replace(list.begin(), list.end(), '+', ',');
    out.types = ShardingTypes::parse(list, "--algos " + spec + ":");
    out.name = spec.substr(0, at);
  }
  if (const size_t colon = out.name.find(':'); colon != std::string::npos) {
    const std::string base = out.name.substr(0, colon);
    const bool verified = !verified_base(base).empty();
    std::string options = out.name.substr(colon + 1);
    std::replace(options.begin(), options.end(), ':', ',');
    for (const std::string& option : split_names(options)) {
      const size_t eq = option.find('=');
      const std::string key = option.substr(0, eq);
      const bool verify_option =
          key == "verify-tables" || key == "candidates" || key == "rounds" || key == "leaders";
      ES_CHECK(key == "uncertainty" || key == "flat" || verify_option,
               "--algos {}: '{}' is not an option (they are: uncertainty=U, flat, and on a "
               "+verify item verify-tables, candidates=N, rounds=N and leaders=N)",
               spec, option);
      if (key == "flat") {
        ES_CHECK(eq == std::string::npos, "--algos {}: flat takes no value", spec);
        out.flat = true;
        continue;
      }
      ES_CHECK(!verify_option || verified, "--algos {}: {} is an option of the +verify algorithms",
               spec, key);
      if (key == "verify-tables") {
        ES_CHECK(eq == std::string::npos, "--algos {}: verify-tables takes no value", spec);
        out.verify.measure_tables = true;
        continue;
      }
      const std::string value = eq == std::string::npos ? "" : option.substr(eq + 1);
      double v = 0;
      size_t used = 0;
      try {
        v = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      ES_CHECK(used > 0 && used == value.size() && v >= 0,
               "--algos {}: '{}' needs a number >= 0 after '='", spec, option);
      if (key == "uncertainty") {
        out.planner.uncertainty = v;
        continue;
      }
      const int min = key == "leaders" ? 0 : 1;
      ES_CHECK(v == std::floor(v) && v >= min && v <= 100,
               "--algos {}: '{}' needs a whole number in {}..100", spec, option, min);
      int& count = key == "candidates" ? out.verify.candidates
                   : key == "rounds"   ? out.verify.rounds
                                       : out.verify.leaders;
      count = static_cast<int>(v);
    }
    out.name = base;
  }
  if (verified_base(out.name).empty()) out.verify.measure_tables = false;
  return out;
}

bool launched_with_several_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {  // Open MPI, MPICH
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1) return true;
  }
  return false;
}

void check_no_repeated_algos(const std::vector<std::string>& algos, const std::string& tool) {
  for (size_t i = 0; i < algos.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      ES_CHECK(algos[i] != algos[j], "{}: --algos names '{}' twice", tool, algos[i]);
    }
  }
}

bool check_eval_options(const EvalOptions& o, bool comm_measured) {
  ES_CHECK(!o.algos.empty(), "eval: --algos is empty");
  check_no_repeated_algos(o.algos, "eval");
  ES_CHECK(o.devices >= 1, "eval: --devices is {}, must be at least 1", o.devices);
  check_topology(o.topology, o.devices);
  bool verified = false;
  for (const std::string& spec : o.algos) {  // unknown names fail now
    const AlgoSpec algo = parse_algo_spec(spec, o);
    const std::string base = verified_base(algo.name);
    create_planner(base.empty() ? algo.name : base, algo.planner);
    verified = verified || !base.empty();
    ES_CHECK(base.empty() || algo.verify.rounds == 1 || o.cost_model != "measured",
             "eval: {} verifies in {} rounds, but the measured cost model has nothing to "
             "correct (use 1)",
             spec, algo.verify.rounds);
  }
  ES_CHECK(o.measure.comm_passes >= 1 && o.measure.comm_passes <= 20 &&
               o.measure.comm_pass_pause_s >= 0 && o.measure.comm_pass_pause_s <= 600,
           "eval: --comm-passes {} / --comm-pass-pause-s {}: need 1..20 and 0..600",
           o.measure.comm_passes, o.measure.comm_pass_pause_s);
  ES_CHECK(o.measure.comm_passes == 1 || comm_measured,
           "eval: --comm-passes {} measures the all-to-alls again, which needs mpirun (one "
           "process takes its communication from the cost model)",
           o.measure.comm_passes);
  ES_CHECK(o.measure.compute_passes >= 1 && o.measure.compute_passes <= 9,
           "eval: --compute-passes {}: need 1..9", o.measure.compute_passes);
  ES_CHECK(o.measure.compute_passes == 1 || !o.predict_only,
           "eval: --compute-passes {} measures compute again, and --predict-only measures nothing",
           o.measure.compute_passes);
  ES_CHECK(o.measure.executor == "cpu" || !comm_measured,
           "eval: --executor {} under mpirun: every rank would measure on the one {}. Run it "
           "without mpirun: one process measures each device's compute on it in turn and takes "
           "the all-to-alls from the cost model",
           o.measure.executor, o.measure.executor);
  ES_CHECK(!o.measure.raw_clock || comm_measured,
           "eval: --raw-clock measures the all-to-alls on the raw clock, which needs mpirun (one "
           "process takes its communication from the cost model, whose scale is normalized)");
  ES_CHECK(!o.verify.measure_tables || verified,
           "eval: --expert verify-tables needs a +verify algorithm");
  ES_CHECK(!verified || o.verify.candidates >= 1, "eval: --verify-candidates is {}, must be >= 1",
           o.verify.candidates);
  ES_CHECK(!verified || o.verify.rounds >= 1, "eval: --verify-rounds is {}, must be >= 1",
           o.verify.rounds);
  ES_CHECK(!verified || o.verify.leaders >= 0, "eval: --verify-leaders is {}, must be >= 0",
           o.verify.leaders);
  check_verify_rivals(o.verify.rivals, "eval: --verify-rivals");
  ES_CHECK(!verified || !o.predict_only,
           "eval: --predict-only measures nothing, so it cannot run a verified algorithm ({})",
           kVerifySuffix);
  return verified;
}

}  // namespace embshard
