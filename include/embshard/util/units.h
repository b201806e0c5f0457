// Sizes as people write them: "40GB", "512MiB", "1.5 GiB", or plain bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embshard {

// Bytes from "<number>[ ]<unit>": B, KB, MB, GB, TB (powers of 1000), KiB,
// MiB, GiB, TiB (powers of 1024), case-insensitive; a bare number is bytes.
// Error names `what` (the option or field) and the text when it is not a
// size, is negative, or does not fit in 63 bits.
int64_t parse_bytes(const std::string& text, const std::string& what);

// "1.16 GB", "512 MB", "900 B": decimal units (the ones parse_bytes reads
// back), three significant digits.
std::string format_bytes(double bytes);

// "1 device", "4 devices": a count and its noun, plural past one (`noun` + "s").
std::string count_of(int64_t n, const std::string& noun);

// "a,b, c" -> {"a", "b", "c"}: the comma-separated names of an option,
// spaces around each trimmed; an empty name stays (the caller refuses it).
std::vector<std::string> split_names(const std::string& list);

// `s` with <, > and & escaped, for SVG text.
std::string xml_escaped(const std::string& s);

}  // namespace embshard
