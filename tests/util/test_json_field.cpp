#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "embshard/util/json_field.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;

const json kDoc = json::parse(R"({
  "batch": 2048, "offset": -3, "ratio": 0.5, "name": "cpu",
  "probe": {"reference_ms": [1.5, 2], "ranks": [0, 1], "hosts": ["a", "b"]},
  "tables": [{"rows": 10}, {"rows": "many"}], "empty": [], "none": null
})");

TEST(JsonField, ReturnsFieldsOfTheirKind) {
  EXPECT_EQ(json_field(kDoc, "/batch", JsonKind::kCount), 2048);
  EXPECT_EQ(json_field(kDoc, "/offset", JsonKind::kInteger), -3);
  EXPECT_EQ(json_field(kDoc, "/batch", JsonKind::kNumber), 2048);
  EXPECT_EQ(json_field(kDoc, "/ratio", JsonKind::kNumber), 0.5);
  EXPECT_EQ(json_field(kDoc, "/name", JsonKind::kString), "cpu");
  EXPECT_EQ(json_field(kDoc, "/probe", JsonKind::kObject).size(), 3u);
  EXPECT_EQ(json_field(kDoc, "/probe/reference_ms", JsonKind::kNumbers).size(), 2u);
  EXPECT_EQ(json_field(kDoc, "/probe/ranks", JsonKind::kCounts).size(), 2u);
  EXPECT_EQ(json_field(kDoc, "/probe/hosts", JsonKind::kStrings).size(), 2u);
  EXPECT_EQ(json_field(kDoc, "/tables/0/rows", JsonKind::kCount), 10);
  EXPECT_TRUE(json_field(kDoc, "/empty", JsonKind::kNumbers).empty());  // vacuously numbers
  EXPECT_EQ(json_optional(kDoc, "/missing", JsonKind::kNumber), nullptr);
  EXPECT_EQ(json_optional(kDoc, "/probe/missing/deeper", JsonKind::kNumber), nullptr);
  EXPECT_EQ(json_optional(kDoc, "/tables/2/rows", JsonKind::kCount), nullptr);
  EXPECT_NE(json_optional(kDoc, "/ratio", JsonKind::kNumber), nullptr);
  // Counts built in memory are signed integers; parsed ones unsigned.
  const json built = {{"n", int64_t{512}}, {"ns", std::vector<int>{0, 3}}, {"neg", -1}};
  EXPECT_EQ(json_field(built, "/n", JsonKind::kCount), 512);
  EXPECT_EQ(json_field(built, "/ns", JsonKind::kCounts).size(), 2u);
  EXPECT_THROW(json_field(built, "/neg", JsonKind::kCount), Error);
}

TEST(JsonField, NamesTheFieldTheValueAndTheKindExpected) {
  const auto error = [](const char* pointer, JsonKind kind, const char* where = "") {
    return testing::error_of([&] { json_field(kDoc, pointer, kind, where); });
  };
  EXPECT_EQ(error("/tables/1/rows", JsonKind::kCount, "f.json"),
            "f.json: field '/tables/1/rows' is \"many\", expected a whole number >= 0");
  EXPECT_EQ(error("/offset", JsonKind::kCount),
            "field '/offset' is -3, expected a whole number >= 0");
  EXPECT_EQ(error("/ratio", JsonKind::kInteger), "field '/ratio' is 0.5, expected a whole number");
  EXPECT_EQ(error("/none", JsonKind::kNumber), "field '/none' is null, expected a number");
  EXPECT_EQ(error("/name", JsonKind::kStrings),
            "field '/name' is \"cpu\", expected an array of strings");
  EXPECT_EQ(error("/probe/hosts", JsonKind::kNumbers),
            "field '/probe/hosts' is [\"a\",\"b\"], expected an array of numbers");
  EXPECT_EQ(error("/probe/reference_ms", JsonKind::kCounts),
            "field '/probe/reference_ms' is [1.5,2], expected an array of whole numbers >= 0");
  // The first key missing is named, not the whole path.
  EXPECT_EQ(error("/probe/missing/deeper", JsonKind::kNumber), "field '/probe/missing' is missing");
  EXPECT_EQ(error("/tables/5/rows", JsonKind::kCount), "field '/tables/5' is missing");
  // A key on the way that holds no object.
  EXPECT_EQ(error("/name/first", JsonKind::kString),
            "field '/name' is \"cpu\", expected an object");
  EXPECT_EQ(testing::error_of([] { json_optional(kDoc, "/batch/x", JsonKind::kCount, "f.json"); }),
            "f.json: field '/batch' is 2048, expected an object");
  EXPECT_EQ(testing::error_of([] { json_field(json(3), "/sample", JsonKind::kCount, "r"); }),
            "r: the top level is 3, expected an object");
  // Present and of another kind: an error even where the field is optional.
  EXPECT_EQ(testing::error_of([] { json_optional(kDoc, "/name", JsonKind::kNumber); }),
            "field '/name' is \"cpu\", expected a number");
  // Long values are cut short in the message, at a character's start, so
  // that the message is valid UTF-8 (it may go into a JSON report).
  const json long_doc = {{"v", std::string(500, 'x')}, {"w", "\"" + std::string(50, 'x') + [] {
                           std::string s;
                           for (int i = 0; i < 100; ++i) s += "\xc3\xa9";  // e acute
                           return s;
                         }()}};
  EXPECT_LT(testing::error_of([&] { json_field(long_doc, "/v", JsonKind::kNumber); }).size(), 150u);
  for (const size_t shift : {0, 2}) {  // the cut at a character's start, then inside one
    json doc = long_doc;
    doc["w"] = doc["w"].get<std::string>().substr(shift);
    const std::string e = testing::error_of([&] { json_field(doc, "/w", JsonKind::kNumber); });
    EXPECT_NE(e.find("..., expected a number"), std::string::npos) << e;
    EXPECT_NO_THROW(json(e).dump()) << "a character cut in half";
  }
  EXPECT_EQ(json_shown(json("abc")), "\"abc\"");
  EXPECT_EQ(json_shown(json("abcdefghijklmnop"), 10), "\"abcdef...");
  EXPECT_EQ(json_shown(json("ab\xc3\xa9\xc3\xa9xyz"), 7), "\"ab...");  // not half an e acute
  EXPECT_EQ(json_shown(json("ab\xc3\xa9\xc3\xa9xyz"), 8), "\"ab\xc3\xa9...");
  EXPECT_EQ(json_shown(json("\xff")), "\"\xef\xbf\xbd\"");  // invalid UTF-8 replaced, no throw
}

// A repeated key is an error naming it and where it sits; the same key in
// two objects is not; a syntax error names the file.
TEST(JsonField, ParsesADocumentRefusingRepeatedKeys) {
  const json j = parse_json_document(R"({"tables": [{"rows": 1}, {"rows": 2}], "v": [[1]]})",
                                     "t.json");
  EXPECT_EQ(j["tables"][1]["rows"], 2);
  // The message, less the source location the error ends with.
  const auto error = [](const char* text) {
    const std::string e = testing::error_of([&] { parse_json_document(text, "t.json"); });
    return e.substr(0, e.find(" ["));
  };
  EXPECT_EQ(error(R"({"a": 1, "b": 2, "a": 3})"), "t.json: key 'a' appears twice in one object");
  EXPECT_EQ(error(R"({"tables": [{"rows": 1}, {"dim": 4, "rows": 2, "rows": 3}]})"),
            "t.json: key 'tables[].rows' appears twice in one object");
  EXPECT_EQ(error(R"([{"x": {"y": 1, "y": 1}}])"),
            "t.json: key '[].x.y' appears twice in one object");
  EXPECT_NE(error("{\"a\": ").find("t.json: not valid JSON:"), std::string::npos);
}

}  // namespace
}  // namespace embshard
