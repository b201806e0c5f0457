// embshard._embshard: the compiled half of the Python package embshard.
//
// Thin on purpose: tables go in as table-spec JSON text (or a path), the
// plan comes back as the plan JSON (plan/report.h) with the report and
// explanation texts beside it; the Python layer (python/embshard/) builds its
// objects from those. What the CLI's `plan` command checks before planning is
// checked here too, so that both refuse the same requests with the same
// messages.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/plan/explain.h"
#include "embshard/plan/report.h"
#include "embshard/search/planner.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/units.h"
#include "embshard/workload/table_specs.h"
#include "embshard/workload/workload.h"

namespace py = pybind11;

namespace embshard::python {
namespace {

// Notes and progress to a Python callable log(kind, text), kind "note" or
// "progress" (the package hands them to logging.getLogger("embshard")).
// Planning runs without the GIL, maybe on several threads: each call takes
// the GIL, and a failing callback is reported as unraisable, never thrown
// into the library.
class PythonReporter : public Reporter {
 public:
  explicit PythonReporter(py::object log) : log_(std::move(log)) {}

  void note(const std::string& text) override { send("note", text); }
  void progress(const ProgressEvent& e) override {
    send("progress", e.label + ": " + progress_text(e));
  }
  double progress_interval_s() const override { return 1.0; }

 private:
  void send(const char* kind, const std::string& text) {
    py::gil_scoped_acquire gil;
    if (log_.is_none()) return;
    try {
      log_(kind, text);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("embshard: the log callback");
    }
  }

  py::object log_;
};

// PlannerOptions by field name, so that Python passes only what it sets and
// a misspelt name is an error listing the valid ones.
using OptionSetter = std::function<void(PlannerOptions&, const py::handle&)>;

template <typename T>
OptionSetter setter(T PlannerOptions::*field) {
  return [field](PlannerOptions& o, const py::handle& value) { o.*field = value.cast<T>(); };
}

template <typename T>
OptionSetter setter(T SearchBudget::*field) {
  return [field](PlannerOptions& o, const py::handle& value) { o.budget.*field = value.cast<T>(); };
}

void set_planner_option(PlannerOptions& p, const std::string& name, const py::handle& value) {
  static const std::map<std::string, OptionSetter> setters = {
      {"seed", setter(&PlannerOptions::seed)},
      {"beam_width", setter(&SearchBudget::beam_width)},
      {"max_steps", setter(&SearchBudget::max_steps)},
      {"candidates", setter(&SearchBudget::candidates)},
      {"grid_steps", setter(&SearchBudget::grid_steps)},
      {"scan_patience", setter(&SearchBudget::scan_patience)},
      {"screen_keep", setter(&SearchBudget::screen_keep)},
      {"step_patience", setter(&SearchBudget::step_patience)},
      {"uncertainty", setter(&PlannerOptions::uncertainty)},
      {"threads", setter(&PlannerOptions::threads)},
      {"policy", setter(&PlannerOptions::policy_dir)},
  };
  const auto it = setters.find(name);
  if (it == setters.end()) {
    std::vector<std::string> names;
    for (const auto& [known, set] : setters) names.push_back(known);
    ES_THROW("unknown planner option '{}' (valid: {})", name, fmt::join(names, ", "));
  }
  try {
    it->second(p, value);
  } catch (const py::cast_error&) {
    ES_THROW("planner option '{}' is {}, of the wrong type", name,
             py::repr(value).cast<std::string>());
  }
}

struct Tables {
  std::optional<std::string> json;  // table-spec JSON text
  std::optional<std::string> path;  // a table-spec file or a workload folder
  std::string source;               // names the JSON text in errors
  std::string profile = "2021";
  int64_t batch_size = 0;           // > 0: stands in for the specs' own
};

Workload read_tables(const Tables& t) {
  ES_CHECK(!(t.json && t.path), "give tables as JSON text or a path, not both");
  if (t.json) return parse_table_specs(*t.json, t.source, t.profile, t.batch_size);
  if (t.path && std::filesystem::is_directory(*t.path)) {
    ES_CHECK(t.batch_size == 0,
             "{}: batch_size {} given for a workload folder, whose batch is its trace's",
             *t.path, t.batch_size);
    Workload w = load_workload(*t.path);
    w.source = *t.path;
    return w;
  }
  if (t.path) return load_table_specs(*t.path, t.profile, t.batch_size);
  return default_workload();
}

struct PlanTexts {
  std::string plan_json, report, report_per_table, explain;
};

PlanTexts plan(const Tables& tables, PlanRequest request, py::object log) {
  for (int d : request.constraints.split.allowed) {
    ES_CHECK(d > 0 && d % 4 == 0, "split_dims value {} is not a positive multiple of 4", d);
  }
  PythonReporter reporter(std::move(log));
  PlanTexts out;
  {
    py::gil_scoped_release unlocked;
    request.workload = read_tables(tables);
    const PlanOutcome p = plan_workload(request, reporter);
    out.plan_json = plan_to_json(p.task, p.result).dump(1) + "\n";
    // The report without the explanation: Plan.explain() shows it apart.
    PlanResult r = p.result;
    r.explanation.clear();
    out.report = plan_report(p.task, r, false);
    out.report_per_table = plan_report(p.task, r, true);
    if (!p.result.explanation.empty()) out.explain = explain_report(p.task, p.result.explanation);
  }
  return out;
}

py::tuple plan_binding(std::optional<std::string> tables_json,
                       std::optional<std::string> tables_path, const std::string& source,
                       const std::string& profile, int64_t batch_size, int devices,
                       int64_t mem_per_device_bytes, std::vector<int64_t> mem_bytes,
                       const std::string& algo, const std::string& cost_model,
                       const std::string& model_dir, const std::string& calibration,
                       const std::vector<std::pair<std::string, int>>& pins,
                       std::vector<std::string> no_split, const std::string& sharding_types,
                       std::vector<int> split_dims, const py::dict& planner, bool explain,
                       const std::string& replan_from, int max_moves, const std::string& reserve,
                       const std::string& optimizer, const std::string& task, int devices_per_host,
                       double inter_host_gbps, double inter_host_latency_us, py::object log) {
  Tables tables{std::move(tables_json), std::move(tables_path), source, profile, batch_size};
  PlanRequest r;
  r.devices = devices;
  r.mem_per_device_bytes = mem_per_device_bytes;
  r.mem_bytes = std::move(mem_bytes);
  r.algo = algo;
  r.cost_model = cost_model;
  r.model.model_dir = model_dir;
  r.model.calibration = calibration;
  for (const auto& [table, device] : pins) r.constraints.pins.push_back({table, device});
  r.constraints.no_split = std::move(no_split);
  if (!sharding_types.empty()) {
    r.constraints.types = ShardingTypes::parse(sharding_types, "sharding_types");
  }
  r.constraints.split.allowed = std::move(split_dims);
  for (const auto& [name, value] : planner) {
    set_planner_option(r.planner, name.cast<std::string>(), value);
  }
  r.explain = explain;
  r.replan_from = replan_from;
  r.max_moves = max_moves;
  r.reserve = StorageReserve::parse(reserve, "reserve");
  set_step(r, task, optimizer, "task", "optimizer");
  r.topology = Topology{devices_per_host, inter_host_gbps, inter_host_latency_us};
  const PlanTexts t = plan(tables, std::move(r), std::move(log));
  return py::make_tuple(t.plan_json, t.report, t.report_per_table, t.explain);
}

// embshard::Error -> embshard.EmbshardError (python/embshard/_errors.py), with
// the library's message; ValueError should that class be out of reach.
void translate_errors(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    py::object cls = py::reinterpret_borrow<py::object>(PyExc_ValueError);
    try {
      cls = py::module_::import("embshard._errors").attr("EmbshardError");
    } catch (py::error_already_set&) {
    }
    PyErr_SetString(cls.ptr(), e.what());
  }
}

}  // namespace
}  // namespace embshard::python

PYBIND11_MODULE(_embshard, m) {
  using namespace embshard;
  using namespace embshard::python;
  namespace py = pybind11;
  m.doc() = "embshard's C++ library, as the Python package embshard calls it (see embshard.plan)";
  m.attr("__version__") = EMBSHARD_VERSION;
  py::register_exception_translator(&translate_errors);
  m.def("plan", &plan_binding, py::kw_only(), py::arg("tables_json") = py::none(),
        py::arg("tables_path") = py::none(), py::arg("source") = "tables",
        py::arg("profile") = "2021", py::arg("batch_size") = 0, py::arg("devices"),
        py::arg("mem_per_device_bytes") = 0, py::arg("mem_bytes") = std::vector<int64_t>{},
        py::arg("algo") = "neuroshard", py::arg("cost_model") = "neural", py::arg("model_dir") = "",
        py::arg("calibration") = "", py::arg("pins") = std::vector<std::pair<std::string, int>>{},
        py::arg("no_split") = std::vector<std::string>{}, py::arg("sharding_types") = "",
        py::arg("split_dims") = std::vector<int>{}, py::arg("planner") = py::dict(),
        py::arg("explain") = false, py::arg("replan_from") = "",
        py::arg("max_moves") = std::numeric_limits<int>::max(), py::arg("reserve") = "15%",
        py::arg("optimizer") = "", py::arg("task") = "training", py::arg("devices_per_host") = 0,
        py::arg("inter_host_gbps") = 0.0, py::arg("inter_host_latency_us") = 0.0,
        py::arg("log") = py::none(),
        "Plans tables (table-spec JSON text, a table-spec file or workload folder, or neither: "
        "the built-in default workload) without the GIL; returns (plan JSON, report, report "
        "with a row per table, explanation). log(kind, text) receives notes and progress.");
  m.def("parse_bytes", &parse_bytes, py::arg("text"), py::arg("what"),
        "A size in bytes from '40GB', '512MiB' or a number of bytes; EmbshardError naming "
        "`what` when it is none.");
  m.def("format_bytes", &format_bytes, py::arg("bytes"), "\"1.16 GB\": decimal units.");
  m.def("planner_names", &planner_names, "The planners `algo` takes.");
  m.def("cost_model_names", &cost_model_names, "The cost models `cost_model` takes.");
  m.def("sharding_type_names", &sharding_type_names,
        "TorchRec's sharding types, as `sharding_types` takes them.");
}
