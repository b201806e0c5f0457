// The analytic model against a `bench compute` file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/cost/analytic/calibration.h"

namespace embshard {

// The analytic model's predictions for every record of a `bench compute`
// file (at the file's batch), with the measured totals beside them. Records
// whose tables lack a field are an Error naming the file and record.
struct ComputeCheck {
  std::vector<double> predicted_ms, measured_ms;
  int64_t batch_size = 0;
  std::string ground_truth;  // ground_truth_label of the file: raw medians for version 1
};
ComputeCheck predict_compute_file(const Calibration& c, const std::string& path);

}  // namespace embshard
