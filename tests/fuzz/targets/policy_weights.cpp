// Placement policy directories, the weight files (search/policy.h): the input
// stands in for each weight file of a small policy of each kind in turn, its
// manifest taking any intact file (an old manifest's CRC).
// fuzz-max-len: 4096
#include <cstring>

#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace {

namespace fuzz = embshard::fuzz;
using embshard::PolicyKind;

// One directory per (kind, weight file), that file the fuzzed one.
struct Slot {
  PolicyKind kind;
  std::string file;
  std::string dir;
};

const std::vector<Slot>& slots() {
  static const std::vector<Slot> all = [] {
    std::vector<Slot> out;
    for (const PolicyKind kind : {PolicyKind::kAutoShard, PolicyKind::kDreamShard}) {
      for (const std::string& file : fuzz::policy_weight_files(kind)) {
        const std::string dir = fuzz::scratch_path(
            "policy_weights/" + embshard::policy_kind_name(kind) + "_" + file);
        embshard::save_policy(fuzz::small_policy(kind), dir);
        fuzz::rewrite_manifest_accepting_any_weights(dir);
        out.push_back({kind, file, dir});
      }
    }
    return out;
  }();
  return all;
}

// The weight format's trailer: the CRC-32 of every byte before it.
size_t fix_weights(uint8_t* data, size_t size, size_t) {
  if (size < 20) return size;
  const uint32_t crc = fuzz::crc32_of(data, size - 4);
  std::memcpy(data + size - 4, &crc, 4);
  return size;
}

}  // namespace

EMBSHARD_FUZZ_TARGET(policy_weights, fix_weights) {
  for (const Slot& slot : slots()) {
    fuzz::write_scratch(
        "policy_weights/" + embshard::policy_kind_name(slot.kind) + "_" + slot.file + "/" +
            slot.file,
        data, size);
    fuzz::expect_clean("load_policy", [&] { embshard::load_policy(slot.dir); });
  }
}
