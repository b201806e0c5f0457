// Calibration files: the analytic model's (`embshard calibrate`, models/
// analytic.json) and a model set's all-to-all constants (comm.json), read as
// `--calibration FILE` and a model set read them, then a shard costed.
// fuzz-max-len: 8192
#include <array>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/cost_model.h"
#include "fuzz/fuzz_support.h"

namespace fuzz = embshard::fuzz;

EMBSHARD_FUZZ_TARGET(calibration, nullptr) {
  const std::string path = fuzz::write_scratch("calibration.json", data, size);
  fuzz::expect_clean("load_comm_constants", [&] { embshard::load_comm_constants(path); });
  fuzz::expect_clean("load_calibration", [&] {
    embshard::load_calibration(path);
    embshard::CostModelOptions o;
    o.calibration = path;
    const embshard::CostModel model = embshard::create_cost_model("analytic", o);
    embshard::TableFeatures t;
    t.rows = 100000;
    t.dim = 48;
    t.pooling_factor = 7;
    t.row_reuse[2] = t.lookup_reuse[2] = 1;
    model.compute->compute_ms(std::array<int, 1>{model.compute->add_table(t)});
    const std::array<double, 3> dims = {48, 96, 0}, delays = {0, 0.2, 1};
    std::array<double, 3> fwd{}, bwd{};
    model.comm->comm_ms(dims, delays, fwd, bwd);
  });
}
