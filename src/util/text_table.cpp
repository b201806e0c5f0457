#include "embshard/util/text_table.h"

#include <algorithm>
#include <cctype>

namespace embshard {
namespace {

bool looks_numeric(const std::string& cell) {
  if (cell.empty()) return false;
  const char c = cell[0];
  return std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.';
}

}  // namespace

std::string TextTable::render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);

  std::string out;
  auto line = [&](const std::vector<std::string>& row, bool header) {
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - cell.size(), ' ');
      const bool right = !header && i > 0 && looks_numeric(cell) &&
                         std::find(left_.begin(), left_.end(), i) == left_.end();
      out += (i > 0 ? "  " : "") + (right ? pad + cell : cell + pad);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  auto rule = [&] {
    size_t total = 0;
    for (size_t w : widths) total += w;
    out += std::string(total + 2 * (widths.size() - 1), '-') + '\n';
  };
  line(header_, true);
  rule();
  for (const auto& row : rows_) {
    if (row.empty()) {
      rule();
    } else {
      line(row, false);
    }
  }
  return out;
}

}  // namespace embshard
