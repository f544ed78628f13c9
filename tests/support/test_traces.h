// The JSON files of tests/data that tests run over by the dozen, and the
// size rule that keeps them affordable under a sanitizer.
//
//   for (const std::string& p : testing::test_traces({"gpu", "public"})) ...
//   if (testing::too_large_when_sanitized(path)) GTEST_SKIP() << ...;
//
// Paths are absolute and sorted. `test_traces` lists trace files only (not
// the manifests, expected outputs and side-cars tests/data/PROVENANCE.md
// names); `test_json_files` lists every .json and .json.gz.
//
// Under a sanitizer (kSanitized: make test's ASan and TSan runs, several
// times slower) both leave out the traces above kSanitizedTraceBytes of JSON
// text: the four largest public traces, 17-31 MB each and two thirds of the
// bytes in tests/data. The release run reads every one; the sanitizers see
// the same reader and rules on the others.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/sanitizers.h"

namespace tprof::testing {

inline constexpr std::uintmax_t kSanitizedTraceBytes = 10u << 20;

// The size of a file's JSON text: a gzip file's ISIZE trailer (its last
// member's size mod 2^32: the fixtures here are one member under 4 GiB),
// otherwise the file's size. 0 when it cannot be read.
inline std::uintmax_t json_text_bytes(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return 0;
  if (!path.ends_with(".gz") || size < 18) return size;
  std::ifstream in(path, std::ios::binary);
  in.seekg(-4, std::ios::end);
  unsigned char b[4] = {};
  if (!in.read(reinterpret_cast<char*>(b), 4)) return size;
  return std::uintmax_t{b[0]} | std::uintmax_t{b[1]} << 8 | std::uintmax_t{b[2]} << 16 | std::uintmax_t{b[3]} << 24;
}

// Whether a sanitized run leaves this trace out (always false in release).
inline bool too_large_when_sanitized(const std::string& path) {
  return kSanitized && json_text_bytes(path) > kSanitizedTraceBytes;
}

// A trace, not a manifest (tables.json), an expected output, an execution
// trace (*_et.json.gz) or a side-car (execution_details.json).
inline bool is_trace_file(const std::string& p) {
  const bool json = p.ends_with(".json") || p.ends_with(".json.gz");
  return json && p.find("/expected") == std::string::npos && !p.ends_with("tables.json") &&
         !p.ends_with("_et.json.gz") && !p.ends_with("execution_details.json");
}

namespace detail {
inline std::vector<std::string> list_json(std::initializer_list<std::string_view> dirs, bool traces_only) {
  std::vector<std::string> out;
  for (std::string_view dir : dirs) {
    const std::filesystem::path root = std::filesystem::path(TPROF_TEST_DATA) / dir;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      const std::string p = e.path().string();
      if (!e.is_regular_file() || !(p.ends_with(".json") || p.ends_with(".json.gz"))) continue;
      if (traces_only && !is_trace_file(p)) continue;
      if (too_large_when_sanitized(p)) continue;
      out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace detail

// The traces under these folders of tests/data ("" is all of it).
inline std::vector<std::string> test_traces(std::initializer_list<std::string_view> dirs = {""}) {
  return detail::list_json(dirs, true);
}

// Every .json and .json.gz under these folders of tests/data.
inline std::vector<std::string> test_json_files(std::initializer_list<std::string_view> dirs = {""}) {
  return detail::list_json(dirs, false);
}

}  // namespace tprof::testing
