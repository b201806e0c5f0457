// Calibration files: the analytic model's (`embshard calibrate`, models/
// analytic.json) and a model set's all-to-all constants (comm.json), read as
// `--calibration FILE` and a model set read them, then a shard costed.
// fuzz-max-len: 8192
#include <optional>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/cost_model.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace fuzz = embshard::fuzz;

EMBSHARD_FUZZ_TARGET(calibration, nullptr) {
  const std::string path = fuzz::write_scratch("calibration.json", data, size);
  fuzz::expect_clean("load_comm_constants", [&] { embshard::load_comm_constants(path); });
  std::optional<embshard::CostModel> model;
  fuzz::expect_clean("load_calibration", [&] {
    embshard::load_calibration(path);
    embshard::CostModelOptions o;
    o.calibration = path;
    model = embshard::create_cost_model("analytic", o);
  });
  if (model) fuzz::expect_clean_use("cost_a_shard", [&] { fuzz::cost_a_shard(*model); });
}
