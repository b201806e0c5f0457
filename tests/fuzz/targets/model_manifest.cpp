// Neural cost model directories, the manifest (cost/neural/model_file.h):
// manifest.json fuzzed beside the small model's weight files, read as
// `--model DIR` reads it (networks, reference scale), then a shard costed.
// fuzz-max-len: 16384
#include <optional>

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

}  // namespace

EMBSHARD_FUZZ_TARGET(model_manifest, nullptr) {
  const std::string& dir = model_dir();
  fuzz::write_scratch("model/manifest.json", data, size);
  std::optional<embshard::CostModel> model;
  fuzz::expect_clean("load_neural_model", [&] {
    embshard::CostModelOptions o;
    o.model_dir = dir;
    o.batch_size = 1024;
    model = embshard::create_cost_model("neural", o);
  });
  if (model) fuzz::expect_clean_use("cost_a_shard", [&] { fuzz::cost_a_shard(*model); });
  fuzz::expect_clean("model_reference_scale",
                     [&] { embshard::model_reference_scale("neural", dir, "cpu", 2, 1024); });
}
