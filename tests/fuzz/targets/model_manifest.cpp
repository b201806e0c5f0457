// Neural cost model directories, the manifest (cost/neural/model_file.h):
// manifest.json fuzzed beside the small model's weight files, read as
// `--model DIR` reads it (networks, reference scale), then a shard costed.
// fuzz-max-len: 16384
#include <array>
#include <memory>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/cost/neural/model.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace {

namespace fuzz = embshard::fuzz;

const std::string& model_dir() {
  static const std::string dir = [] {
    const std::string path = fuzz::scratch_path("model");
    embshard::save_neural_model(fuzz::small_neural_model(), path);
    return path;
  }();
  return dir;
}

// What planning asks of a model: a table's compute and an all-to-all.
void cost_a_shard(const embshard::CostModel& model) {
  embshard::TableFeatures t;
  t.rows = 100000;
  t.dim = 64;
  t.pooling_factor = 12;
  t.row_reuse[0] = t.lookup_reuse[0] = 1;
  const int id = model.compute->add_table(t);
  model.compute->compute_ms(std::array<int, 1>{id});
  const std::array<double, 2> dims = {128, 64}, delays = {0, 0.5};
  std::array<double, 2> fwd{}, bwd{};
  model.comm->comm_ms(dims, delays, fwd, bwd);
}

}  // namespace

EMBSHARD_FUZZ_TARGET(model_manifest, nullptr) {
  const std::string& dir = model_dir();
  fuzz::write_scratch("model/manifest.json", data, size);
  fuzz::expect_clean("load_neural_model", [&] {
    embshard::CostModelOptions o;
    o.model_dir = dir;
    o.batch_size = 1024;
    cost_a_shard(embshard::create_cost_model("neural", o));
  });
  fuzz::expect_clean("model_reference_scale",
                     [&] { embshard::model_reference_scale("neural", dir, "cpu", 2, 1024); });
}
