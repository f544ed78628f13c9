#include "src/trace/json_cursor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "src/trace/json_value.h"

namespace tprof::internal {
namespace {

JsonCursor cursor(const std::string& s) { return JsonCursor(s.data(), s.data() + s.size(), s.data()); }

TEST(JsonCursor, ReadsPlainAndEscapedStrings) {
  std::string text = R"(  "abc", "a\"b\\c\u00e9")";
  JsonCursor c = cursor(text);
  JsonCursor::Str s;
  ASSERT_TRUE(c.read_string(&s));
  EXPECT_EQ(s.raw, "abc");
  EXPECT_FALSE(s.escaped);
  ASSERT_TRUE(c.eat(','));
  ASSERT_TRUE(c.read_string(&s));
  EXPECT_TRUE(s.escaped);
  EXPECT_FALSE(s.lenient);
  std::string out;
  unescape_json(s.raw, &out);
  EXPECT_EQ(out, "a\"b\\c\xc3\xa9");
}

TEST(JsonCursor, LongStringsCrossTheVectorWidth) {
  std::string body(100, 'x');
  body[37] = '\\';
  body[38] = 'n';
  std::string text = "\"" + body + "\"";
  JsonCursor c = cursor(text);
  JsonCursor::Str s;
  ASSERT_TRUE(c.read_string(&s));
  EXPECT_EQ(s.raw.size(), 100u);
  EXPECT_TRUE(s.escaped);
}

TEST(JsonCursor, UnescapedQuoteInsideANameIsReadLeniently) {
  // libkineto before 2023 wrote record_function names raw.
  std::string text = R"({"name": "say "hi" now", "ph": "X"})";
  JsonCursor c = cursor(text);
  ASSERT_TRUE(c.eat('{'));
  JsonCursor::Str key, value;
  ASSERT_TRUE(c.read_string(&key));
  ASSERT_TRUE(c.expect(':', "':'"));
  ASSERT_TRUE(c.read_string(&value));
  EXPECT_EQ(value.raw, "say \"hi\" now");
  EXPECT_TRUE(value.lenient);
  EXPECT_TRUE(c.eat(','));
}

TEST(JsonCursor, InvalidEscapeKeepsTheBackslash) {
  std::string text = R"("C:\path\x")";
  JsonCursor c = cursor(text);
  JsonCursor::Str s;
  ASSERT_TRUE(c.read_string(&s));
  EXPECT_TRUE(s.lenient);
  std::string out;
  unescape_json(s.raw, &out);
  EXPECT_EQ(out, "C:\\path\\x");
}

TEST(JsonCursor, SurrogatePairsDecodeToOneCodePoint) {
  std::string out;
  unescape_json(R"(\ud83d\ude00 \udc00)", &out);
  EXPECT_EQ(out, "\xf0\x9f\x98\x80 \xef\xbf\xbd");
}

TEST(JsonCursor, EofInsideAStringIsTruncationAtTheEnd) {
  std::string text = R"("abc)";
  JsonCursor c = cursor(text);
  JsonCursor::Str s;
  EXPECT_FALSE(c.read_string(&s));
  EXPECT_EQ(c.failure(), CursorFailure::kEof);
  EXPECT_EQ(c.failure_offset(), 4);
}

TEST(JsonCursor, SyntaxErrorNamesOffsetAndExpectation) {
  std::string text = R"({"a": [1, 2,, 3]})";
  JsonCursor c = cursor(text);
  EXPECT_FALSE(c.skip_value());
  EXPECT_EQ(c.failure(), CursorFailure::kSyntax);
  EXPECT_EQ(c.failure_offset(), 12);
  EXPECT_EQ(c.error().message(), "expected a value, found ','");
}

TEST(JsonCursor, SkipValueValidatesNestedStructure) {
  for (const char* ok : {R"({"a": {"b": [1, -2.5e3, "x", true, false, null, {}]}})", "[]", "{}", "\"s\"", "0"}) {
    std::string text = ok;
    JsonCursor c = cursor(text);
    EXPECT_TRUE(c.skip_value()) << ok;
    EXPECT_TRUE(c.at_end()) << ok;
  }
  for (const char* bad : {R"({"a" 1})", "[1 2]", "{1: 2}", "tru", "[", "01", "-", "1.", "1e"}) {
    std::string text = bad;
    JsonCursor c = cursor(text);
    bool ok = c.skip_value() && c.at_end();
    EXPECT_FALSE(ok) << bad;
  }
}

TEST(JsonCursor, DeepNestingFailsInsteadOfOverflowing) {
  std::string text(100000, '[');
  JsonCursor c = cursor(text);
  EXPECT_FALSE(c.skip_value());
  EXPECT_EQ(c.failure(), CursorFailure::kSyntax);
}

TEST(ParseUsToNs, ExactForEpochMicrosWithThreeDecimals) {
  std::int64_t ns = 0;
  // A double cannot hold this: its ulp at 1.8e15 is 0.25 µs.
  ASSERT_TRUE(parse_us_to_ns("1795319515516244.078", &ns));
  EXPECT_EQ(ns, 1795319515516244078);
  ASSERT_TRUE(parse_us_to_ns("1623212760127829", &ns));
  EXPECT_EQ(ns, 1623212760127829000);
  ASSERT_TRUE(parse_us_to_ns("68.0", &ns));
  EXPECT_EQ(ns, 68000);
  ASSERT_TRUE(parse_us_to_ns("0.5", &ns));
  EXPECT_EQ(ns, 500);
  ASSERT_TRUE(parse_us_to_ns("-1.25", &ns));
  EXPECT_EQ(ns, -1250);
}

TEST(ParseUsToNs, SlowPathHandlesExponentsAndExtraDigits) {
  std::int64_t ns = 0;
  ASSERT_TRUE(parse_us_to_ns("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  ASSERT_TRUE(parse_us_to_ns("2E-3", &ns));
  EXPECT_EQ(ns, 2);
  ASSERT_TRUE(parse_us_to_ns("0.0004", &ns));
  EXPECT_EQ(ns, 0);
  ASSERT_TRUE(parse_us_to_ns("0.0005", &ns));  // half rounds away from zero
  EXPECT_EQ(ns, 1);
  ASSERT_TRUE(parse_us_to_ns("12.34567", &ns));
  EXPECT_EQ(ns, 12346);
  ASSERT_TRUE(parse_us_to_ns("123456789012345.12345", &ns));
  EXPECT_EQ(ns, 123456789012345123);
  EXPECT_FALSE(parse_us_to_ns("12345678901234567.5", &ns));  // 1.2e19 ns does not fit
  EXPECT_FALSE(parse_us_to_ns("1e30", &ns));
  EXPECT_FALSE(parse_us_to_ns("99999999999999999", &ns));
  EXPECT_FALSE(parse_us_to_ns("abc", &ns));
  EXPECT_FALSE(parse_us_to_ns("", &ns));
}

TEST(JsonValue, ParsesAndFindsMembers) {
  auto v = JsonValue::parse(R"({"Input Dims": [[16, 32], []], "n": 7, "s": "x\ty"})");
  ASSERT_TRUE(v);
  const JsonValue* dims = v->find("Input Dims");
  ASSERT_NE(dims, nullptr);
  ASSERT_TRUE(dims->is_array());
  EXPECT_EQ(dims->items().size(), 2u);
  EXPECT_EQ(v->find("n")->int_or(0), 7);
  EXPECT_EQ(v->find("s")->text(), "x\ty");
  EXPECT_EQ(v->find("missing"), nullptr);
}

// Python's json.dump writes them; none has a finite value. Infinity was
// read as the boolean false.
TEST(JsonValue, NanAndInfinitiesAreValuesWithoutANumber) {
  auto v = JsonValue::parse("[NaN, Infinity, -Infinity, true, false, null]");
  ASSERT_TRUE(v);
  ASSERT_EQ(v->items().size(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(v->items()[i].is_null()) << i;
  EXPECT_TRUE(v->items()[3].is_bool() && v->items()[3].as_bool());
  EXPECT_TRUE(v->items()[4].is_bool() && !v->items()[4].as_bool());
  EXPECT_TRUE(v->items()[5].is_null());
}

TEST(JsonValue, ErrorOffsetsIncludeTheBase) {
  auto v = JsonValue::parse("[1, }", 100);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().byte_offset(), 104);
}

// get_int: integers as written, and floats with an integer value inside
// int64's range; beyond it the conversion would be undefined (UBSan's
// float-cast-overflow in clang's build: a diagnose_fuzzer finding).
TEST(JsonValue, GetIntTakesFloatsOnlyInsideInt64sRange) {
  const auto get = [](std::string_view text, std::int64_t* out) {
    const auto v = JsonValue::parse(text);
    return v.has_value() && v->get_int(out);
  };
  std::int64_t i = 7;
  EXPECT_TRUE(get("1e18", &i));
  EXPECT_EQ(i, 1000000000000000000);
  EXPECT_TRUE(get("-9223372036854775808.0", &i));
  EXPECT_EQ(i, std::numeric_limits<std::int64_t>::min());
  for (std::string_view big : {"9.3e18", "9223372036854775808.0", "-9.3e18", "1e400", "-1e400", "2.5"}) {
    EXPECT_FALSE(get(big, &i)) << big;
  }
}

// member_values reads top-level members in place; what it returns must be
// what a whole parse finds (JsonValue::find: the first member of a name).
TEST(MemberValues, TopLevelMembersAsTextLikeAWholeParse) {
  constexpr std::string_view kKeys[] = {"Input Dims", "Input type", "grid"};
  std::string_view v[3];
  const std::string_view args =
      R"( { "External id": 4, "name": "a \"Input Dims\": [9]", "nested": {"grid": [1]},)"
      R"( "Input Dims" :  [[16, 32], [], [2]], "s": "}]\\", "Input type": ["c10::BFloat16", "Scalar"] } )";
  ASSERT_TRUE(member_values(args, kKeys, v));
  EXPECT_EQ(v[0], "[[16, 32], [], [2]]");  // not the one inside a string
  EXPECT_EQ(v[1], R"(["c10::BFloat16", "Scalar"])");
  EXPECT_EQ(v[2], "");  // only inside a nested object
  auto whole = JsonValue::parse(args);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->find("Input Dims")->items().size(), 3u);
  EXPECT_EQ(whole->find("grid"), nullptr);
  // The values are views into the text, at the member's own place.
  EXPECT_EQ(v[0].data(), args.data() + args.find("[[16"));
  constexpr std::string_view kId[] = {"External id"};
  std::string_view id[1];
  ASSERT_TRUE(member_values(args, kId, id));
  EXPECT_EQ(id[0], "4");  // not an array
}

TEST(MemberValues, TheFirstOfARepeatedNameAndEveryValueKind) {
  constexpr std::string_view kKeys[] = {"a", "b", "c", "d", "e"};
  std::string_view v[5];
  ASSERT_TRUE(member_values(R"({"a": -1.5e3, "b": true, "a": 2, "c": null, "d": {"x": [1, {"y": "]"}]}, "e": "q"})",
                            kKeys, v));
  EXPECT_EQ(v[0], "-1.5e3");
  EXPECT_EQ(v[1], "true");
  EXPECT_EQ(v[2], "null");
  EXPECT_EQ(v[3], R"({"x": [1, {"y": "]"}]})");
  EXPECT_EQ(v[4], R"("q")");
  ASSERT_TRUE(member_values("{}", kKeys, v));
  EXPECT_EQ(v[0], "");
}

TEST(MemberValues, WhatItCannotReadIsLeftToAWholeParse) {
  constexpr std::string_view kKeys[] = {"grid"};
  std::string_view v[1];
  for (std::string_view bad : {"", "[1]", "{\"grid\": [1, 2}", "{\"grid\" [1]}", "{\"x\": 1 \"grid\": [1]}", "{\"grid\": [{]}]}",
                               "{\"grid\": \"unterminated}", "{\"grid\":}", "{\"x\": 1,"}) {
    EXPECT_FALSE(member_values(bad, kKeys, v)) << bad;
  }
  constexpr std::string_view kEscaped[] = {"gr\\u0069d"};
  EXPECT_FALSE(member_values("{\"grid\": [1]}", kEscaped, v));
}

// A member name written with escapes is the name it decodes to, for
// member_values as for JsonValue::find (an args_fuzzer finding: "str\u0065am"
// was not "stream", so diagnose's fast path missed what the whole parse found).
TEST(MemberValues, AMemberNameWrittenWithEscapesIsTheNameItDecodesTo) {
  constexpr std::string_view kKeys[] = {"stream", "grid", "block"};
  std::string_view v[3];
  const std::string_view args = R"({"str\u0065am": 7, "gr\u0069d": [1, 1, 1], "grid": [2], "a\"b": 0, "block": [128]})";
  ASSERT_TRUE(member_values(args, kKeys, v));
  const auto whole = JsonValue::parse(args);
  ASSERT_TRUE(whole);
  EXPECT_EQ(v[0], "7");
  EXPECT_EQ(v[1], "[1, 1, 1]");  // the first member of that name, as find() returns
  EXPECT_EQ(v[2], "[128]");
  EXPECT_EQ(whole->find("stream")->text(), "7");
  EXPECT_EQ(whole->find("grid")->items().size(), 3u);
}

// A raw quote inside a string, which the reader accepts (Kineto wrote them
// unescaped before kineto#754), does not end the value early: member_values
// leaves such an object to a whole parse (an args_fuzzer finding: it
// returned "python3" where JsonValue reads python3"hon3).
TEST(MemberValues, ARawQuoteInsideAStringIsLeftToAWholeParse) {
  constexpr std::string_view kName[] = {"name"};
  std::string_view v[1];
  const std::string_view args = R"({"name": "python3"hon3"})";
  const auto whole = JsonValue::parse(args);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->find("name")->text(), "python3\"hon3");
  EXPECT_FALSE(member_values(args, kName, v));
  constexpr std::string_view kGrid[] = {"grid"};
  EXPECT_FALSE(member_values(R"js({"Call stack": "f("a" b)", "grid": [1]})js", kGrid, v));
  ASSERT_TRUE(member_values(R"({"name": "a \" b", "grid": [1]})", kGrid, v));  // escaped: as before
  EXPECT_EQ(v[0], "[1]");
}

}  // namespace
}  // namespace tprof::internal
