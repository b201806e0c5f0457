// Parser for the locality statistics published with Meta's dlrm_datasets.
//
// A file is a sequence of blocks, one per dataset file:
//   fbgemm_t856_bs65536.pt
//   Locality stats after processing 1 batches of size 65536
//   Avg # of indices: 887017990
//   Avg # of unique cols: 128435723
//   Avg col size: 6.9
//   Histogram of col sizes:
//   (0, 1]: 0.473            <- 17 lines, one per reuse bin
//   [0, 1, 2, ...]           <- bin edges (ignored)
//   ['0.000', '0.473', ...]  <- cumulative shares (ignored)
//   Ratio of index distribution at different column sizes:
//   (0, 1]: 0.069            <- 17 lines
//   [...] / ['...']          <- ignored
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>

#include "embshard/util/data_dir.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/stats.h"

namespace embshard {
namespace {

struct ProfileDef {
  const char* name;
  const char* file;
  const char* block;  // the one block to take; nullptr: the mean over all blocks
};

constexpr ProfileDef kProfiles[] = {
    {"2021", "dlrm_datasets_2021_locality_stats.txt", "fbgemm_t856_bs65536.pt"},
    {"2022", "dlrm_datasets_2022_locality_stats.txt", nullptr},
};

const ProfileDef& find_profile(const std::string& profile) {
  for (const ProfileDef& p : kProfiles) {
    if (profile == p.name) return p;
  }
  ES_THROW("unknown profile '{}' (valid profiles: {})", profile,
           fmt::join(published_profiles(), ", "));
}

struct Block {
  std::string name;
  int line = 0;
  int64_t num_tables = 0, batch_size = 0;
  double avg_indices = 0, avg_unique = 0;
  ReuseHistogram row_reuse{}, lookup_reuse{};
};

// The file's meaningful lines (blank lines and the "[...]" lists dropped),
// with their 1-based line numbers for error messages.
class Lines {
 public:
  Lines(const std::string& path, const std::string& text) : path_(path) {
    std::istringstream in(text);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line.front() == '[') continue;
      lines_.emplace_back(number, line);
    }
  }
  bool done() const { return pos_ >= lines_.size(); }
  int number() const { return done() ? -1 : lines_[pos_].first; }
  const std::string& peek() const { return lines_[pos_].second; }

  // The text after `prefix` on the next line; throws if the line differs.
  std::string expect(const std::string& prefix) {
    ES_CHECK(!done(), "{}: unexpected end of file, expected a line starting with '{}'", path_,
             prefix);
    const auto& [number, line] = lines_[pos_];
    ES_CHECK(line.rfind(prefix, 0) == 0, "{}:{}: expected a line starting with '{}', found '{}'",
             path_, number, prefix, line);
    ++pos_;
    return line.substr(prefix.size());
  }

  double number_after(const std::string& prefix) {
    const int line = number();
    std::string text = expect(prefix);
    while (!text.empty() && text.front() == ' ') text.erase(text.begin());
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    ES_CHECK(ec == std::errc() && end == text.data() + text.size() && std::isfinite(value) &&
                 value >= 0,
             "{}:{}: '{}' is followed by '{}', expected a non-negative number", path_, line,
             prefix, text);
    return value;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::pair<int, std::string>> lines_;
  size_t pos_ = 0;
};

ReuseHistogram parse_histogram(Lines& lines, const std::string& title) {
  lines.expect(title);
  ReuseHistogram h{};
  double sum = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    h[k] = lines.number_after(reuse_bin_label(k) + ":");
    sum += h[k];
  }
  ES_CHECK(std::fabs(sum - 1.0) < 0.02, "{}: '{}' shares sum to {}, expected 1 (line {})",
           lines.path(), title, sum, lines.number());
  return h;
}

Block parse_block(Lines& lines) {
  static const std::regex name_re(R"(^\S*_t(\d+)_bs(\d+)(_\d+)?\.pt$)");
  Block b;
  b.line = lines.number();
  b.name = lines.peek();
  std::smatch m;
  ES_CHECK(std::regex_match(b.name, m, name_re),
           "{}:{}: expected a dataset file name like 'fbgemm_t856_bs65536.pt', found '{}'",
           lines.path(), b.line, b.name);
  lines.expect(b.name);
  b.num_tables = std::stoll(m[1].str());
  b.batch_size = std::stoll(m[2].str());
  ES_CHECK(b.num_tables > 0 && b.batch_size > 0, "{}:{}: '{}' names {} tables, batch size {}",
           lines.path(), b.line, b.name, b.num_tables, b.batch_size);
  const int stats_line = lines.number();
  const std::string header = lines.expect("Locality stats after processing ");
  const std::string size_text = header.substr(header.rfind(' ') + 1);
  ES_CHECK(size_text == std::to_string(b.batch_size),
           "{}:{}: batch size '{}' disagrees with the file name '{}'", lines.path(), stats_line,
           size_text, b.name);
  b.avg_indices = lines.number_after("Avg # of indices:");
  b.avg_unique = lines.number_after("Avg # of unique cols:");
  lines.number_after("Avg col size:");
  ES_CHECK(b.avg_indices > 0 && b.avg_unique <= b.avg_indices,
           "{}:{}: block '{}': {} indices and {} unique rows is not plausible", lines.path(),
           b.line, b.name, b.avg_indices, b.avg_unique);
  b.row_reuse = parse_histogram(lines, "Histogram of col sizes:");
  b.lookup_reuse = parse_histogram(lines, "Ratio of index distribution at different column sizes:");
  return b;
}

// The mean of `blocks`, which must all describe the same dataset shape.
PublishedStats average(const std::vector<Block>& blocks, const std::string& path) {
  PublishedStats p;
  p.num_tables = blocks.front().num_tables;
  p.batch_size = blocks.front().batch_size;
  for (const Block& b : blocks) {
    ES_CHECK(b.num_tables == p.num_tables && b.batch_size == p.batch_size,
             "{}:{}: block '{}' has {} tables x batch {}, the first block {} x {}", path, b.line,
             b.name, b.num_tables, b.batch_size, p.num_tables, p.batch_size);
    p.avg_indices += b.avg_indices / blocks.size();
    p.avg_unique += b.avg_unique / blocks.size();
    for (int k = 0; k < kReuseBins; ++k) {
      p.row_reuse[k] += b.row_reuse[k] / blocks.size();
      p.lookup_reuse[k] += b.lookup_reuse[k] / blocks.size();
    }
  }
  p.num_blocks = static_cast<int>(blocks.size());
  p.dataset = blocks.size() == 1 ? blocks.front().name
                                 : fmt::format("{} .. {} ({} blocks)", blocks.front().name,
                                               blocks.back().name, blocks.size());
  p.avg_pooling_factor = p.avg_indices / (static_cast<double>(p.num_tables) * p.batch_size);
  p.unique_ratio = p.avg_unique / p.avg_indices;
  return p;
}

}  // namespace

const std::vector<std::string>& published_profiles() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const ProfileDef& p : kProfiles) v.emplace_back(p.name);
    return v;
  }();
  return names;
}

namespace {

// The statistics file of a profile inside `dir` (throws listing valid profiles).
std::string published_stats_file(const std::string& dir, const std::string& profile) {
  return (std::filesystem::path(dir) / find_profile(profile).file).string();
}

}  // namespace

std::string default_published_stats_dir() { return data_root() + "/data/published"; }

PublishedStats load_published_stats(const std::string& path, const std::string& profile) {
  const ProfileDef& def = find_profile(profile);
  ES_CHECK(file_exists(path), "published statistics file '{}' not found (profile {})", path,
           profile);
  Lines lines(path, read_file(path));
  std::vector<Block> blocks;
  while (!lines.done()) blocks.push_back(parse_block(lines));
  ES_CHECK(!blocks.empty(), "{}: no statistics blocks found", path);
  if (def.block != nullptr) {
    std::vector<Block> chosen;
    for (const Block& b : blocks) {
      if (b.name == def.block) chosen.push_back(b);
    }
    ES_CHECK(chosen.size() == 1, "{}: profile {} needs exactly one block '{}', found {}", path,
             profile, def.block, chosen.size());
    blocks = chosen;
  }
  PublishedStats p = average(blocks, path);
  p.profile = profile;
  p.file = path;
  return p;
}

PublishedStats load_published_profile(const std::string& profile, const std::string& dir) {
  const std::string base = dir.empty() ? default_published_stats_dir() : dir;
  return load_published_stats(published_stats_file(base, profile), profile);
}

}  // namespace embshard
