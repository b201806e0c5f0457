// Reading a JSON field by its path, with an error that names it.
//
// nlohmann's own type errors ("type must be number, but is string") do not
// say which field; its JSON_DIAGNOSTICS mode does, but brings hundreds of
// false -Warray-bounds warnings with GCC 12. Readers of files a person may
// edit or a crash may cut short ask for their fields here instead.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace embshard {

enum class JsonKind {
  kObject,
  kArray,
  kString,
  kNumber,
  kInteger,  // a whole number, negative allowed
  kCount,    // a whole number >= 0
  kNumbers,  // an array of numbers
  kCounts,   // an array of whole numbers >= 0
  kStrings,  // an array of strings
};

// `v` as an error message shows it: its JSON text up to `max_bytes` (cut at
// a character's start, "..." added), invalid UTF-8 replaced, never throwing.
std::string json_shown(const nlohmann::json& v, size_t max_bytes = 80);

// Whether `v` is of `kind`.
bool json_is(const nlohmann::json& v, JsonKind kind);

// The value at `pointer` ("/probe/reference_ms", "/tables/3/rows": keys and
// array indices below `root`, starting with '/', no escapes) when it is of
// `kind`. Otherwise throws Error "<where>: field '/probe/reference_ms' is
// missing" (the first key missing), "... is "x", expected an array of
// numbers", or, for a key on the way that is not an object, "field '/probe'
// is 3, expected an object" ("the top level is 3, ..." for `root` itself).
// Values are shown up to 80 bytes. Without `where` the message starts at
// "field".
const nlohmann::json& json_field(const nlohmann::json& root, std::string_view pointer,
                                 JsonKind kind, std::string_view where = {});

// The same for a field that may be absent: nullptr when it (or a key on the
// way) is missing; a present field of another kind is the error above.
const nlohmann::json* json_optional(const nlohmann::json& root, std::string_view pointer,
                                    JsonKind kind, std::string_view where = {});

// Objects and arrays nested deeper than this are refused before parsing: the
// files embshard reads nest a few levels, and printing or copying a JSON value
// recurses once per level, so a file nested a hundred thousand deep would end
// the process on a stack overflow instead of an error.
constexpr int kMaxJsonDepth = 128;

// Whether `text` (JSON or not; strings skipped) opens more than `depth`
// objects and arrays at once.
bool json_nests_deeper_than(std::string_view text, int depth);

// A file a person may edit, parsed: Error "<where>: not valid JSON: ..." on
// a syntax error, and "<where>: key 'tables[].rows' appears twice in one
// object" where a key repeats (nlohmann would keep the last one silently),
// and "... nested deeper than 128 levels" past kMaxJsonDepth.
nlohmann::json parse_json_document(const std::string& text, std::string_view where);

// A directory's manifest file, `dir`/manifest.json, parsed: Error "<path>:
// <what> manifest missing (is '<dir>' a <what> directory made by `<maker>`?)"
// where there is none, and naming the field where it is no JSON object or
// its "format" is not `format` or its "version" not `version`.
nlohmann::json read_manifest(const std::string& dir, const std::string& what,
                             const std::string& maker, const std::string& format, int version);

}  // namespace embshard
