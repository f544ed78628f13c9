// The two gzip paths of src/base/gzip_codec.h (issue 26, item 3): the
// linked one (tprof::gzip: libdeflate and zlib) and the run-time zlib one a
// capture-only program gets. Each reads what the other writes, and both
// salvage the same prefix of a cut stream.
#include <gtest/gtest.h>

#include <string>

#include "src/base/gzip.h"
#include "src/base/gzip_codec.h"

namespace tprof::internal {
namespace {

std::string sample() {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"name\": \"event " + std::to_string(i) + "\"},\n";
  return text;
}

TEST(GzipCodec, LinkedWhenTprofGzipIsLinked) {
  ASSERT_NE(linked_gzip(), nullptr) << "this test links tprof::gzip: the --undefined usage requirement failed";
  ASSERT_NE(runtime_zlib(), nullptr) << "libz.so.1 did not load";
}

TEST(GzipCodec, EachPathReadsTheOther) {
  const std::string text = sample();
  auto linked = gzip(text);
  auto runtime = gzip_with_runtime_zlib(text);
  ASSERT_TRUE(linked && runtime);
  auto a = gunzip_with_runtime_zlib(*linked);
  auto b = gunzip(*runtime);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->bytes(), text);
  EXPECT_EQ(b->bytes(), text);
  auto both = gunzip_with_runtime_zlib(*linked + *runtime);  // concatenated members
  ASSERT_TRUE(both);
  EXPECT_EQ(both->bytes(), text + text);
}

TEST(GzipCodec, BothSalvageTheSamePrefixAndHonourLimits) {
  const std::string text = sample();
  auto gz = gzip(text);
  ASSERT_TRUE(gz);
  const std::string_view half = std::string_view(*gz).substr(0, gz->size() / 2);
  auto a = gunzip(half);
  auto b = gunzip_with_runtime_zlib(half);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->cut && b->cut);
  EXPECT_EQ(a->bytes(), b->bytes());
  GunzipLimits small;
  small.max_output = 4096;
  auto la = gunzip(*gz, small);
  auto lb = gunzip_with_runtime_zlib(*gz, small);
  ASSERT_FALSE(la);
  ASSERT_FALSE(lb);
  EXPECT_EQ(la.error().message(), lb.error().message());
}

}  // namespace
}  // namespace tprof::internal
