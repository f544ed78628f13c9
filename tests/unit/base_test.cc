#include <gtest/gtest.h>

#include <string>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/json_writer.h"
#include "tprof/string_pool.h"

namespace tprof::internal {
namespace {

TEST(StringPool, InternsOnceWithStableIds) {
  StringPool pool;
  EXPECT_EQ(pool.intern(""), kEmptyStr);
  const StrId a = pool.intern("aten::mm");
  const StrId b = pool.intern("aten::add");
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.intern("aten::mm"), a);
  EXPECT_EQ(pool.str(a), "aten::mm");
  EXPECT_EQ(pool.find("aten::add"), b);
  EXPECT_FALSE(pool.find("nope"));
}

TEST(StringPool, ViewsSurviveGrowthAndLongStrings) {
  StringPool pool;
  std::vector<StrId> ids;
  for (int i = 0; i < 50000; ++i) ids.push_back(pool.intern("name_" + std::to_string(i)));
  const std::string big(200000, 'k');
  const StrId big_id = pool.intern(big);
  for (int i = 0; i < 50000; i += 997) EXPECT_EQ(pool.str(ids[i]), "name_" + std::to_string(i));
  EXPECT_EQ(pool.str(big_id), big);
  EXPECT_EQ(pool.size(), 50002u);
}

TEST(JsonWriter, EscapesOnlyWhatJsonRequires) {
  std::string out;
  append_json_string(&out, std::string("a\"b\\c\n\x01\xc3\xa9", 9));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
}

TEST(JsonWriter, MicrosecondsAreExactDecimals) {
  std::string out;
  append_us(&out, 1795319515516244078);
  out += ' ';
  append_us(&out, -1);
  out += ' ';
  append_us(&out, 1000);
  out += ' ';
  append_us(&out, 0);
  EXPECT_EQ(out, "1795319515516244.078 -0.001 1.000 0.000");
}

TEST(JsonWriter, WritesStructurePrettyAndCompact) {
  std::string compact;
  JsonWriter c(&compact);
  c.begin_object();
  c.key("a");
  c.begin_array();
  c.value_int(1);
  c.value_double(0.5);
  c.value_null();
  c.end_array();
  c.key("b");
  c.value_bool(true);
  c.end_object();
  EXPECT_EQ(compact, R"({"a": [1, 0.5, null], "b": true})");

  std::string pretty;
  JsonWriter p(&pretty, JsonWriter::kPretty);
  p.begin_object();
  p.key("a");
  p.begin_array();
  p.value_int(1);
  p.end_array();
  p.key("e");
  p.begin_object();
  p.end_object();
  p.end_object();
  EXPECT_EQ(pretty, "{\n  \"a\": [\n    1\n  ],\n  \"e\": {}\n}");
}

TEST(Gzip, RoundTripsAndSalvagesACutStream) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"name\": \"event " + std::to_string(i) + "\"},\n";
  auto gz = gzip(text);
  ASSERT_TRUE(gz);
  auto back = gunzip(*gz);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->truncated);
  EXPECT_EQ(back->bytes(), text);

  auto cut = gunzip(std::string_view(*gz).substr(0, gz->size() / 2));
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->truncated);
  EXPECT_GT(cut->size, 0u);
  EXPECT_EQ(text.compare(0, cut->size, cut->bytes()), 0);
}

TEST(Gzip, ConcatenatedMembersDecodeWhole) {
  auto a = gzip("hello ");
  auto b = gzip("world");
  ASSERT_TRUE(a && b);
  auto back = gunzip(*a + *b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->bytes(), "hello world");
}

TEST(Gzip, GarbageIsAnErrorWithAnOffset) {
  auto r = gunzip(std::string("\x1f\x8b\x08\x00garbage", 11));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kParse);
  EXPECT_GE(r.error().byte_offset(), 0);
}

TEST(AtomicFileWriter, LeavesNothingBehindWhenNotCommitted) {
  const std::string path = ::testing::TempDir() + "/tprof_atomic_test.txt";
  std::remove(path.c_str());
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->write("partial"));
  }
  EXPECT_FALSE(read_file(path));
  ASSERT_TRUE(write_file_atomic(path, "whole"));
  auto back = read_file(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "whole");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tprof::internal
