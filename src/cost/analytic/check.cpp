// Runs the analytic model over a `bench compute` data file, for its accuracy.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/check.h"
#include "embshard/cost/analytic/model.h"
#include "embshard/util/error.h"
#include "embshard/cost/cost_data.h"

namespace embshard {

ComputeCheck predict_compute_file(const Calibration& c, const std::string& path) {
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  const ComputeData data = load_compute_data(path, strict);
  ComputeCheck check;
  check.batch_size = data.batch_size;
  check.ground_truth = ground_truth_label(data.normalized);
  const std::shared_ptr<ComputeModel> model = make_analytic_compute_model(c, check.batch_size);
  for (const ComputeRecord& r : data.records) {
    std::vector<int> ids;
    for (const TableFeatures& t : r.tables) ids.push_back(model->add_table(t));
    check.predicted_ms.push_back(model->compute_ms(ids));
    check.measured_ms.push_back(r.ms);
  }
  return check;
}

}  // namespace embshard
