// Placement policy directories, the manifest (search/policy.h): manifest.json
// fuzzed beside the weight files of a small policy of each kind, read as
// `--policy DIR` reads it.
// fuzz-max-len: 16384
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace {

namespace fuzz = embshard::fuzz;
using embshard::PolicyKind;

std::string policy_dir(PolicyKind kind) {
  static bool made = false;
  const std::string auto_dir = fuzz::scratch_path("policy_autoshard");
  const std::string dream_dir = fuzz::scratch_path("policy_dreamshard");
  if (!made) {
    embshard::save_policy(fuzz::small_policy(PolicyKind::kAutoShard), auto_dir);
    embshard::save_policy(fuzz::small_policy(PolicyKind::kDreamShard), dream_dir);
    made = true;
  }
  return kind == PolicyKind::kAutoShard ? auto_dir : dream_dir;
}

}  // namespace

EMBSHARD_FUZZ_TARGET(policy_manifest, nullptr) {
  // A manifest may name either kind: each directory holds one kind's files.
  for (const PolicyKind kind : {PolicyKind::kAutoShard, PolicyKind::kDreamShard}) {
    const std::string dir = policy_dir(kind);
    fuzz::write_scratch("policy_" + embshard::policy_kind_name(kind) + "/manifest.json", data,
                        size);
    fuzz::expect_clean("load_policy", [&] { embshard::load_policy(dir); });
  }
}
