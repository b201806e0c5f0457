#include "embshard/util/json_field.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embshard/util/error.h"
#include "embshard/util/file.h"

namespace embshard {

namespace {

using nlohmann::json;

const char* expected(JsonKind kind) {
  switch (kind) {
    case JsonKind::kObject: return "an object";
    case JsonKind::kArray: return "an array";
    case JsonKind::kString: return "a string";
    case JsonKind::kNumber: return "a number";
    case JsonKind::kInteger: return "a whole number";
    case JsonKind::kCount: return "a whole number >= 0";
    case JsonKind::kNumbers: return "an array of numbers";
    case JsonKind::kCounts: return "an array of whole numbers >= 0";
    case JsonKind::kStrings: return "an array of strings";
  }
  return "?";
}

}  // namespace

std::string json_shown(const json& v, size_t max_bytes) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes < 3 ? 0 : max_bytes - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

bool json_is(const json& v, JsonKind kind) {
  // A count built in memory from a signed integer is stored as signed; one
  // parsed from text as unsigned.
  const auto count = [](const json& x) {
    return x.is_number_unsigned() || (x.is_number_integer() && x.get<int64_t>() >= 0);
  };
  const auto all = [&](auto pred) { return v.is_array() && std::all_of(v.begin(), v.end(), pred); };
  switch (kind) {
    case JsonKind::kObject: return v.is_object();
    case JsonKind::kArray: return v.is_array();
    case JsonKind::kString: return v.is_string();
    case JsonKind::kNumber: return v.is_number();
    case JsonKind::kInteger: return v.is_number_integer();
    case JsonKind::kCount: return count(v);
    case JsonKind::kNumbers: return all([](const json& x) { return x.is_number(); });
    case JsonKind::kCounts: return all(count);
    case JsonKind::kStrings: return all([](const json& x) { return x.is_string(); });
  }
  return false;
}

namespace {

// Thrown as it is: the file:line of ES_CHECK would point here, not at the
// reader, and a record reader's caller adds the file and line.
[[noreturn]] void fail(std::string_view where, std::string_view pointer, const std::string& what) {
  throw Error(fmt::format("{}{}{} {}", where, where.empty() ? "" : ": ",
                          pointer.empty() ? std::string("the top level")
                                          : fmt::format("field '{}'", pointer),
                          what));
}

// Down the pointer's keys (an array's by index): nullptr at the first
// missing one; one that is not an object or array where the path goes on
// is the error.
const json* walk(const json& root, std::string_view pointer, std::string_view where) {
  ES_CHECK(pointer.empty() || pointer[0] == '/', "JSON pointer '{}' does not start with '/'",
           pointer);
  const json* v = &root;
  for (size_t at = 1, end; at <= pointer.size(); at = end + 1) {
    end = std::min(pointer.find('/', at), pointer.size());
    const std::string key(pointer.substr(at, end - at));
    if (v->is_array() && !key.empty() &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t i = std::stoul(key);
      if (i >= v->size()) return nullptr;
      v = &(*v)[i];
      continue;
    }
    if (!v->is_object()) {
      fail(where, pointer.substr(0, at - 1),
           fmt::format("is {}, expected an object", json_shown(*v)));
    }
    const auto it = v->find(key);
    if (it == v->end()) return nullptr;
    v = &*it;
  }
  return v;
}

}  // namespace

const json* json_optional(const json& root, std::string_view pointer, JsonKind kind,
                          std::string_view where) {
  const json* v = walk(root, pointer, where);
  if (v != nullptr && !json_is(*v, kind)) {
    fail(where, pointer, fmt::format("is {}, expected {}", json_shown(*v), expected(kind)));
  }
  return v;
}

const json& json_field(const json& root, std::string_view pointer, JsonKind kind,
                       std::string_view where) {
  const json* v = json_optional(root, pointer, kind, where);
  if (v == nullptr) {
    // Name the first key that is missing, not the whole path.
    size_t end = pointer.size();
    for (size_t at = pointer.find('/', 1); at != std::string_view::npos;
         at = pointer.find('/', at + 1)) {
      if (walk(root, pointer.substr(0, at), where) == nullptr) {
        end = at;
        break;
      }
    }
    fail(where, pointer.substr(0, end), "is missing");
  }
  return *v;
}

bool json_nests_deeper_than(std::string_view text, int depth) {
  int open = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++open > depth) return true;
    } else if (c == ']' || c == '}') {
      --open;
    }
  }
  return false;
}

json parse_json_document(const std::string& text, std::string_view where) {
  ES_CHECK(!json_nests_deeper_than(text, kMaxJsonDepth),
           "{}: objects and arrays nested deeper than {} levels (no file embshard reads nests "
           "more than a few)",
           where, kMaxJsonDepth);
  // The objects and arrays open at the parser's position: an object's keys
  // so far and its last one.
  struct Level {
    bool object;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Level> levels;
  std::string repeated;  // the first repeated key's path
  const json::parser_callback_t watch = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        levels.push_back({event == json::parse_event_t::object_start, "", {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!levels.empty()) levels.pop_back();
        break;
      case json::parse_event_t::key: {
        Level& level = levels.back();
        level.key = parsed.get<std::string>();
        if (!level.keys.insert(level.key).second && repeated.empty()) {
          for (const Level& l : levels) {
            repeated += l.object ? (repeated.empty() ? "" : ".") + l.key : "[]";
          }
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, watch);
  } catch (const json::exception& e) {
    ES_THROW("{}: not valid JSON: {}", where, e.what());
  }
  ES_CHECK(repeated.empty(), "{}: key '{}' appears twice in one object", where, repeated);
  return j;
}

json read_manifest(const std::string& dir, const std::string& what, const std::string& maker,
                   const std::string& format, int version) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  ES_CHECK(file_exists(path), "{}: {} manifest missing (is '{}' a {} directory made by `{}`?)",
           path, what, dir, what, maker);
  json manifest = parse_json_document(read_file(path), path);
  ES_CHECK(manifest.is_object(), "{}: not a JSON object", path);
  const json found_format = manifest.value("format", json());
  const json found_version = manifest.value("version", json());
  ES_CHECK(found_format == format, "{}: format is {}, expected '{}'", path, found_format.dump(),
           format);
  ES_CHECK(found_version == version, "{}: {} manifest version {}, this embshard reads version {}",
           path, what, found_version.dump(), version);
  return manifest;
}

}  // namespace embshard
