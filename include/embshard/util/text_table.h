// A plain-text table for terminal reports: columns sized to their widest cell,
// numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace embshard {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void add_separator() { rows_.emplace_back(); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a separator
};

}  // namespace embshard
