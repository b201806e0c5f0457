// A plain-text table for terminal reports: columns sized to their widest cell,
// numbers right-aligned (except in columns marked left-aligned: lists that
// merely start with a digit, such as "2:16 1:16[0:500]").
#pragma once

#include <string>
#include <vector>

namespace embshard {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void add_separator() { rows_.emplace_back(); }
  void align_left(size_t column) { left_.push_back(column); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<size_t> left_;  // columns always left-aligned
  std::vector<std::vector<std::string>> rows_;  // an empty row is a separator
};

}  // namespace embshard
