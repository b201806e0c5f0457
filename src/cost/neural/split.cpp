// Seeded train / validation / test splits of cost data (pure C++, no torch).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "embshard/cost/neural/split.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"

namespace embshard {
namespace {

// A table's identity: its file (each file's pool is its own) and its bench
// pool index, or (for files that lack it) its size and pooling, which tell
// the tables of one pool apart.
std::string table_key(const ComputeRecord& r, size_t t) {
  if (r.pool_ids[t] >= 0) return fmt::format("id:{}:{}", r.file, r.pool_ids[t]);
  return fmt::format("rows:{}:{}:pf:{}", r.file, r.tables[t].rows, r.tables[t].pooling_factor);
}

// Shuffles `items` with `seed` and deals them into test, val, train (in that
// order, so that a larger training share never changes the test split).
template <typename T>
void deal(std::vector<T> items, uint64_t seed, double val_share, double test_share,
          std::vector<T>& train, std::vector<T>& val, std::vector<T>& test) {
  std::mt19937_64 rng(seed);
  std::shuffle(items.begin(), items.end(), rng);
  const size_t n = items.size();
  const size_t n_test = static_cast<size_t>(std::llround(test_share * n));
  const size_t n_val = std::min(n - n_test, static_cast<size_t>(std::llround(val_share * n)));
  for (size_t i = 0; i < n; ++i) {
    (i < n_test ? test : i < n_test + n_val ? val : train).push_back(items[i]);
  }
}

void check_shares(double val_share, double test_share) {
  ES_CHECK(val_share > 0 && test_share >= 0 && val_share + test_share < 1,
           "split: validation share {} and test share {} must be > 0, >= 0 and sum below 1",
           val_share, test_share);
}

}  // namespace

ComputeSplit split_compute_records(const ComputeData& data, uint64_t seed, double holdout_tables,
                                   double val_share, double test_share) {
  check_shares(val_share, test_share);
  ES_CHECK(holdout_tables >= 0 && holdout_tables < 1,
           "split: --holdout-tables is {}, must be in [0, 1)", holdout_tables);
  std::map<std::string, bool> held;  // sorted keys: the draw does not depend on record order
  for (const ComputeRecord& r : data.records) {
    for (size_t t = 0; t < r.tables.size(); ++t) held[table_key(r, t)] = false;
  }
  std::vector<std::string> keys;
  for (const auto& [key, unused] : held) keys.push_back(key);
  std::mt19937_64 rng(seed_for(seed, SeedUse::kHeldOutTables));
  std::shuffle(keys.begin(), keys.end(), rng);
  size_t n_held = static_cast<size_t>(std::llround(holdout_tables * keys.size()));
  if (holdout_tables > 0) n_held = std::clamp<size_t>(n_held, 1, keys.size() - 1);
  ComputeSplit split;
  for (size_t i = 0; i < n_held; ++i) {
    held[keys[i]] = true;
    // "id:FILE:POOL": the pool id of the first file's tables (the report's list).
    if (keys[i].rfind("id:0:", 0) == 0)
      split.holdout_pool_ids.push_back(std::stoi(keys[i].substr(5)));
  }
  std::sort(split.holdout_pool_ids.begin(), split.holdout_pool_ids.end());
  std::vector<int> seen;
  for (size_t i = 0; i < data.records.size(); ++i) {
    const ComputeRecord& r = data.records[i];
    size_t n = 0;
    for (size_t t = 0; t < r.tables.size(); ++t) n += held[table_key(r, t)] ? 1 : 0;
    if (n == 0)
      seen.push_back(static_cast<int>(i));
    else if (n == r.tables.size())
      split.unseen.push_back(static_cast<int>(i));
    else
      split.dropped_mixed += 1;
  }
  deal(seen, seed, val_share, test_share, split.train, split.val, split.test);
  ES_CHECK(!split.train.empty() && !split.val.empty(),
           "{}: too few records for a split ({} usable of {}; {} mix held-out tables)", data.path,
           seen.size(), data.records.size(), split.dropped_mixed);
  return split;
}

CommSplit split_comm_records(const std::vector<CommData>& files, uint64_t seed, double val_share,
                             double test_share) {
  check_shares(val_share, test_share);
  CommSplit split;
  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<std::pair<int, int>> items;
    for (size_t r = 0; r < files[f].records.size(); ++r) items.emplace_back(f, r);
    deal(items, seed + 1000003ULL * (f + 1), val_share, test_share, split.train, split.val,
         split.test);
  }
  ES_CHECK(!split.train.empty() && !split.val.empty(), "split: too few comm records ({} files)",
           files.size());
  return split;
}

}  // namespace embshard
