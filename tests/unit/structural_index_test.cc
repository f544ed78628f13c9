// The structural indexer's SIMD levels (SSE2, AVX2, AVX-512) find the same
// tokens as a plain byte loop, across block and window boundaries.
#include "src/trace/structural_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "tests/support/test_traces.h"

namespace tprof::internal {
namespace {

// Tokens by the definition: structurals and backslashes outside strings, and
// quotes not escaped (a quote after an odd run of backslashes, anywhere).
std::vector<std::uint32_t> reference(const std::string& s) {
  std::vector<std::uint32_t> out;
  bool in_string = false;
  bool escaped = false;  // the previous byte is an escaping backslash
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool this_escaped = escaped;
    escaped = c == '\\' && !this_escaped;
    if (c == '"' && !this_escaped) {
      in_string = !in_string;
      out.push_back(static_cast<std::uint32_t>(i));
    } else if (!in_string && (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',' || c == '\\')) {
      out.push_back(static_cast<std::uint32_t>(i));
    }
  }
  return out;
}

std::vector<std::uint32_t> indexed(const std::string& s, StructuralIndexer::Level level, std::size_t window) {
  StructuralIndexer ix(level);
  std::vector<std::uint32_t> out;
  std::vector<std::uint32_t> buf(window + 72);
  for (std::size_t at = 0; at < s.size(); at += window) {
    const std::size_t len = std::min(window, s.size() - at);
    const std::size_t n = ix.index(s.data() + at, s.data() + at + len, s.data(), buf.data());
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return out;
}

std::vector<StructuralIndexer::Level> levels() {
  std::vector<StructuralIndexer::Level> out = {StructuralIndexer::kSse2};
  if (StructuralIndexer::best_level() >= StructuralIndexer::kAvx2) out.push_back(StructuralIndexer::kAvx2);
  if (StructuralIndexer::best_level() >= StructuralIndexer::kAvx512) out.push_back(StructuralIndexer::kAvx512);
  return out;
}

TEST(StructuralIndex, EveryLevelMatchesTheDefinitionOnRandomJsonish) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]:,\"\\ ab01\n";
  for (int round = 0; round < 300; ++round) {
    std::string s(1 + rng() % 700, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    const auto want = reference(s);
    for (auto level : levels()) {
      // Windows are whole 64-byte blocks except the last (the Tokens contract).
      for (std::size_t window : {64u, 128u, 4096u}) {
        ASSERT_EQ(indexed(s, level, window), want) << "level " << level << " window " << window << " round " << round;
      }
    }
  }
}

TEST(StructuralIndex, EveryLevelMatchesOnRealTraces) {
  int files = 0;
  for (const std::string& path : testing::test_traces({"public"})) {
    if (!path.ends_with(".json.gz")) continue;
    auto bytes = read_file(path);
    ASSERT_TRUE(bytes);
    auto text = gunzip(*bytes);
    ASSERT_TRUE(text);
    const std::string s(text->bytes());
    const auto want = reference(s);
    for (auto level : levels()) EXPECT_EQ(indexed(s, level, 1 << 14), want) << path << " level " << level;
    ++files;
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace tprof::internal
