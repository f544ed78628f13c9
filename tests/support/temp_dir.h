// A fresh directory under the system's temp directory for one test,
// removed with everything in it when the object goes.
//
//   const testing::TempDir dir("tprof_sql");   // /tmp/tprof_sql_XXXXXX
//   write(dir.path() + "/t.db"); EXPECT_EQ(dir.files(), ...);
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace tprof::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tprof_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }
  // The names of what is in it, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

}  // namespace tprof::testing
