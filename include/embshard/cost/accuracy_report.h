// The accuracy report of a cost model: figures, predicted-vs-measured plots,
// and the report files `embshard train` and `embshard validate` write.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/accuracy.h"

namespace embshard {

nlohmann::json to_json(const AccuracyFigures& figures);

// Predicted vs measured, for one named split of the data.
struct Comparison {
  std::string name;   // "compute_test", "comm_fwd_test", ...
  std::string title;  // for the plot and the report
  std::vector<double> predicted, measured;
  bool plot = true;  // false: a breakdown of another comparison's records, a row without a plot
};

// A predicted-vs-measured scatter plot: log-log axes, the y = x line,
// labelled axes, a title with the MAPE. Plain SVG text.
std::string scatter_svg(const Comparison& comparison);

// Writes report.md, report.json and one <name>.svg per comparison to `dir`
// (atomically); returns the figures as JSON ({name: figures}).
nlohmann::json write_accuracy_report(const std::string& dir, const std::string& heading,
                                     const std::vector<Comparison>& comparisons,
                                     const std::vector<std::string>& notes);

}  // namespace embshard
