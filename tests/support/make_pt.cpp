// embshard_make_pt: writes a big dlrm_datasets-style file (a torch.save'd
// tuple (indices, offsets, lengths), Python's layout) without libtorch and
// without holding it in memory, to measure import's peak memory on files of
// many GiB. Deterministic: every value derives from --seed.
//
//   embshard_make_pt OUT.pt --tables T --batch B --pooling P [--int32] [--seed S]
//
// Bag lengths are uniform in 0..2P (mean P); table t's rows are drawn from a
// skewed distribution over 1000 * (t + 1) rows.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "embshard/util/random.h"
#include "support/pt_writer.h"

namespace {

// Random access to a deterministic stream.
uint64_t mix(uint64_t x) { return embshard::splitmix64(x); }

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  int64_t tables = 8, batch = 65536, pooling = 20;
  uint64_t seed = 1;
  bool int32 = false;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto next = [&] { return k + 1 < argc ? std::strtoll(argv[++k], nullptr, 10) : 0LL; };
    if (a == "--tables") tables = next();
    else if (a == "--batch") batch = next();
    else if (a == "--pooling") pooling = next();
    else if (a == "--seed") seed = static_cast<uint64_t>(next());
    else if (a == "--int32") int32 = true;
    else if (!a.empty() && a[0] != '-') out = a;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (out.empty() || tables < 1 || batch < 1 || pooling < 0) {
    std::fprintf(stderr, "usage: embshard_make_pt OUT.pt --tables T --batch B --pooling P "
                         "[--int32] [--seed S]\n");
    return 2;
  }
  // Lengths are a pure function of the bag; offsets are their prefix sums.
  std::vector<int64_t> offsets(tables * batch + 1, 0);
  for (int64_t i = 0; i < tables * batch; ++i) {
    offsets[i + 1] = offsets[i] + static_cast<int64_t>(mix(seed * 1000003 + i) % (2 * pooling + 1));
  }
  const int64_t total = offsets.back();
  using embshard::testing::PtTensorSpec;
  PtTensorSpec indices, offs, lengths;
  indices.storage_type = int32 ? "IntStorage" : "LongStorage";
  indices.sizes = {total};
  indices.fill = [&](uint64_t begin, uint64_t count, int64_t* o) {
    // The table of element i: found by walking the offsets (fills run in order).
    static int64_t table = 0;
    for (uint64_t k = 0; k < count; ++k) {
      const int64_t i = static_cast<int64_t>(begin + k);
      while (offsets[(table + 1) * batch] <= i) ++table;
      const uint64_t rows = 1000 * static_cast<uint64_t>(table + 1);
      const uint64_t r = mix(seed ^ (uint64_t(i) * 0x9e3779b97f4a7c15ULL));
      o[k] = static_cast<int64_t>(((r % rows) * ((r >> 32) % rows)) / rows);
    }
  };
  offs.sizes = {tables * batch + 1};
  offs.fill = [&](uint64_t begin, uint64_t count, int64_t* o) {
    std::memcpy(o, offsets.data() + begin, count * 8);
  };
  lengths.sizes = {tables, batch};
  lengths.fill = [&](uint64_t begin, uint64_t count, int64_t* o) {
    for (uint64_t k = 0; k < count; ++k) o[k] = offsets[begin + k + 1] - offsets[begin + k];
  };
  embshard::testing::PtWriteOptions options;
  options.archive = "dlrm_big";
  // Like torch.save, switch to ZIP64 records when sizes or offsets may pass 4 GiB.
  const uint64_t approx_bytes = (uint64_t(total) * (int32 ? 4 : 8)) + uint64_t(tables * batch) * 16;
  options.zip64 = approx_bytes >= (uint64_t{1} << 32) - (uint64_t{1} << 20);
  embshard::testing::write_pt_tuple(out, {indices, offs, lengths}, options);
  std::printf("wrote %s: %lld tables x batch %lld, %lld indices (%s)\n", out.c_str(),
              static_cast<long long>(tables), static_cast<long long>(batch),
              static_cast<long long>(total), int32 ? "int32" : "int64");
  return 0;
}
