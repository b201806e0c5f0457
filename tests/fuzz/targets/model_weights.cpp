// Neural cost model directories, the weight files (cost/neural/model_file.h):
// the input stands in for each of the small model's weight files in turn,
// its manifest taking any intact file (an old manifest's CRC), and the model
// read is asked for a cost.
// fuzz-max-len: 4096
#include <cstring>
#include <optional>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace {

namespace fuzz = embshard::fuzz;

// One directory per weight file, that file the fuzzed one.
std::string slot_dir(size_t slot) {
  const std::string dir = fuzz::scratch_path("weights" + std::to_string(slot));
  static std::vector<bool> made(fuzz::neural_weight_files().size());
  if (!made[slot]) {
    embshard::save_neural_model(fuzz::small_neural_model(), dir);
    fuzz::rewrite_manifest_accepting_any_weights(dir);
    made[slot] = true;
  }
  return dir;
}

// The weight format's trailer: the CRC-32 of every byte before it.
size_t fix_weights(uint8_t* data, size_t size, size_t) {
  if (size < 20) return size;
  const uint32_t crc = fuzz::crc32_of(data, size - 4);
  std::memcpy(data + size - 4, &crc, 4);
  return size;
}

}  // namespace

EMBSHARD_FUZZ_TARGET(model_weights, fix_weights) {
  for (size_t slot = 0; slot < fuzz::neural_weight_files().size(); ++slot) {
    const std::string dir = slot_dir(slot);
    fuzz::write_scratch("weights" + std::to_string(slot) + "/" + fuzz::neural_weight_files()[slot],
                        data, size);
    std::optional<embshard::CostModel> model;
    fuzz::expect_clean("load_neural_model", [&] {
      embshard::CostModelOptions o;
      o.model_dir = dir;
      o.batch_size = 1024;
      model = embshard::create_cost_model("neural", o);
    });
    if (model) fuzz::expect_clean_use("cost_a_shard", [&] { fuzz::cost_a_shard(*model); });
  }
}
