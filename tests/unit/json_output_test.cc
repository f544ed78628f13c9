// The writer's fast paths against their slow references: JsonWriter's
// staging and bit stack, the digit writers against std::to_chars, and
// is_compact_json (args written as they are) against copy_json_value.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/base/json_writer.h"
#include "src/trace/json_copy.h"

namespace tprof::internal {
namespace {

std::string to_chars_text(std::int64_t v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// The µs text by the definition: floor on the magnitude, three decimals.
std::string us_reference(std::int64_t ns) {
  const bool neg = ns < 0;
  const std::uint64_t mag = neg ? 0ull - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char buf[32];
  std::string out = neg ? "-" : "";
  out.append(buf, std::to_chars(buf, buf + sizeof buf, mag / 1000).ptr);
  const std::string frac = std::to_string(1000 + mag % 1000);
  return out + "." + frac.substr(1);
}

TEST(JsonOutput, DigitWritersMatchToChars) {
  std::vector<std::int64_t> values = {0, 1, -1, std::numeric_limits<std::int64_t>::max(),
                                      std::numeric_limits<std::int64_t>::min()};
  for (std::int64_t p = 1;; p *= 10) {  // every power of ten, and its neighbours
    for (std::int64_t v : {p - 1, p, p + 1, -p, -p + 1}) values.push_back(v);
    if (p > std::numeric_limits<std::int64_t>::max() / 10) break;
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) values.push_back(static_cast<std::int64_t>(rng() >> (rng() % 64)));
  for (const std::int64_t v : values) {
    char buf[32];
    ASSERT_EQ(std::string(buf, write_int(buf, v)), to_chars_text(v));
    ASSERT_EQ(std::string(buf, write_us(buf, v)), us_reference(v)) << v;
    const auto u = static_cast<std::uint64_t>(v);
    char ref[32];
    ASSERT_EQ(std::string(buf, write_uint(buf, u)), std::string(ref, std::to_chars(ref, ref + sizeof ref, u).ptr));
  }
}

TEST(JsonOutput, StagedOutputReachesTheStringWhenTheValueIsComplete) {
  std::string out;
  std::string expected = "[";
  {
    JsonWriter w(&out);
    w.begin_array();
    for (int i = 0; i < 20000; ++i) {  // far beyond one 16 KiB stage
      w.value_int(i);
      expected += (i ? ", " : "") + std::to_string(i);
    }
    const std::string big(40000, 'x');  // longer than the stage: written around it
    w.value_string(big);
    w.value_raw("\"" + big + "\"");
    expected += ", \"" + big + "\", \"" + big + "\"]";
    EXPECT_EQ(w.size(), expected.size() - 1);
    w.end_array();
    EXPECT_EQ(out, expected);  // complete before the writer is destroyed
  }
  EXPECT_EQ(out, expected);

  std::string escaped;
  append_json_string(&escaped, std::string(3000, '"') + std::string(3000, '\x01'));
  std::string want = "\"";
  for (int i = 0; i < 3000; ++i) want += "\\\"";
  for (int i = 0; i < 3000; ++i) want += "\\u0001";
  EXPECT_EQ(escaped, want + "\"");
}

TEST(JsonOutput, NestingBeyondSixtyFourLevels) {
  for (const JsonWriter::Style style : {JsonWriter::kCompact, JsonWriter::kPretty}) {
    std::string out;
    JsonWriter w(&out, style);
    for (int i = 0; i < 100; ++i) {
      w.begin_array();
      w.value_int(i);
    }
    for (int i = 0; i < 100; ++i) w.end_array();
    EXPECT_EQ(w.depth(), 0u);
    std::string compact;
    for (int i = 0; i < 100; ++i) {
      compact += '[';
      compact += std::to_string(i);
      compact += ", ";
    }
    compact.resize(compact.size() - 2);
    compact += std::string(100, ']');
    EXPECT_EQ(canonical_json(out), compact);
  }
}

TEST(JsonOutput, MembersRawContinuesAnObject) {
  std::string head;
  {
    JsonWriter w(&head);
    w.begin_object();
    w.key("ph");
    w.value_string("X");
    w.key("name");
    w.value_string("a\"b");
    w.end_object();
  }
  std::string out;
  JsonWriter w(&out);
  w.begin_array();
  w.begin_object();
  w.members_raw(std::string_view(head).substr(1, head.size() - 2));
  static constexpr JsonKey kTs("ts");
  w.key(kTs);
  w.value_us(1500);
  w.end_object();
  w.end_array();
  EXPECT_EQ(out, R"([{"ph": "X", "name": "a\"b", "ts": 1.500}])");
}

TEST(JsonOutput, CompactJsonIsExactlyWhatTheCopyWrites) {
  for (const char* text : {R"({"External id": 1})", R"({})", R"([])", R"("x")", "1", "-0.5e+3", "true", "null",
                           R"({"a": [1, 2.5, -3E-2, true, false, null], "b": {"c": "d\"e\\f\n\t\r\b\f"}})",
                           R"({"u": "\u001f\u0000", "e": "é"})", R"({"Input Dims": [[16, 32], [], [8]]})"}) {
    EXPECT_TRUE(is_compact_json(text)) << text;
    EXPECT_EQ(canonical_json(text), text);
  }
  for (const char* text : {R"({"a":1})", R"({"a": 1 })", R"( {"a": 1})", "{\"a\": 1}\n", R"({"a" : 1})",
                           R"({"a": "\u00e9"})", R"({"a": "\/"})", R"({"a": "\u001F"})", R"({"a": "\u0008"})",
                           "{\"a\": \"x\x01\"}", R"({"a": 01})", R"({"a": 1.})", R"({"a": tru})", R"({"a": "x)",
                           R"({"a": "x"y"})", R"([1,2])", R"([1, 2,])", "", R"({"a": 1}})"}) {
    EXPECT_FALSE(is_compact_json(text)) << text;
  }
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "[";
  deep += "1";
  for (int i = 0; i < 70; ++i) deep += "]";
  EXPECT_FALSE(is_compact_json(deep));  // conservative beyond 64 levels
  EXPECT_EQ(canonical_json(deep), deep);
}

TEST(JsonOutput, InvalidUtf8BecomesTheReplacementCharacter) {
  // Names from a trace can hold any bytes; JSON output must stay valid.
  auto json = [](std::string_view s) {
    std::string out;
    append_json_string(&out, s);
    return out;
  };
  EXPECT_EQ(json("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("a\xff"), "\"a\\ufffd\"");
  EXPECT_EQ(json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                  // overlong '/'
  EXPECT_EQ(json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");         // a surrogate
  EXPECT_EQ(json("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
  EXPECT_EQ(json("\xe2\x86"), "\"\\ufffd\\ufffd\"");                  // cut short
  EXPECT_FALSE(needs_json_escape("caf\xc3\xa9"));
  EXPECT_TRUE(needs_json_escape("caf\xc3"));
  // Issue 36: DEL and the C1 controls (U+009B is a terminal's CSI) are
  // escaped too, so JSON output is safe on a terminal as it is.
  EXPECT_EQ(json("d\x7f"), "\"d\\u007f\"");
  EXPECT_EQ(json("c\xc2\x80\xc2\x9b\xc2\x9f\xc2\xa0"), "\"c\\u0080\\u009b\\u009f\xc2\xa0\"");
  EXPECT_TRUE(needs_json_escape("d\x7f"));
  EXPECT_TRUE(needs_json_escape("\xc2\x9b"));
  EXPECT_FALSE(needs_json_escape("\xc2\xa0"));
  for (int c = 0; c < 0x80; ++c) {
    const std::string s = json(std::string(1, static_cast<char>(c)));
    const bool short_form = c == '\n' || c == '\t' || c == '\r' || c == '\b' || c == '\f' || c == '"' || c == '\\';
    EXPECT_EQ(s.size(), short_form ? 4u : c < 0x20 || c == 0x7f ? 8u : 3u) << c;
  }
  // The copy of stored JSON: raw DEL and C1 are not its compact form; the
  // escapes it writes for them are.
  EXPECT_FALSE(is_compact_json("{\"a\": \"\x7f\"}"));
  EXPECT_FALSE(is_compact_json("{\"a\": \"\xc2\x9b\"}"));
  EXPECT_TRUE(is_compact_json("{\"a\": \"\\u007f\\u009b\\u0080\\u001f\"}"));
  EXPECT_FALSE(is_compact_json("{\"a\": \"\\u00a0\"}"));
  EXPECT_FALSE(is_compact_json("{\"a\": \"\\u007F\"}"));
  EXPECT_FALSE(is_compact_json("{\"a\": \"\\u00fg\"}"));
  EXPECT_EQ(canonical_json("{\"a\": \"\x7f\xc2\x9b\"}"), "{\"a\": \"\\u007f\\u009b\"}");
  // A long string is escaped in pieces: no piece may cut a sequence in two.
  std::string long_text;
  for (int i = 0; i < 3001; ++i) long_text += "\xc3\xa9";
  long_text = "x" + long_text;  // odd offset: a piece boundary falls mid-sequence
  EXPECT_EQ(json(long_text), "\"" + long_text + "\"");
  // The copy of a trace's args: invalid bytes are rewritten, UTF-8 kept.
  EXPECT_EQ(canonical_json("{\"a\": \"\xc3\xa9\xff\"}"), "{\"a\": \"\xc3\xa9\\ufffd\"}");
}

// Random texts over JSON's alphabet: whatever is_compact_json accepts, the
// copy reproduces byte for byte.
TEST(JsonOutput, CompactJsonNeverAcceptsWhatTheCopyChanges) {
  static constexpr char kAlphabet[] = "{}[]\",: 01-.eE\\ntfu\x01/a";
  std::mt19937 rng(11);
  int accepted = 0;
  for (int i = 0; i < 300000; ++i) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) text += kAlphabet[rng() % (sizeof kAlphabet - 1)];
    if (i % 3 == 0) text = "{\"" + text + "\": 1}";
    if (!is_compact_json(text)) continue;
    ++accepted;
    ASSERT_EQ(canonical_json(text), text);
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace tprof::internal
