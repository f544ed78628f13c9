// A capture-only program (tprof::capture, no tprof::gzip) asked for
// .json.gz where zlib cannot be loaded (TPROF_ZLIB_LIBRARY names nothing):
// export fails with a message naming what to install or link, and plain
// .json still works. With zlib (no environment), the .gz file is written and
// reads back. Run by ctest twice (tests/link/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tprof/profiler.h"
#include "tprof/read.h"
#include "tprof/record_function.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string dir = argv[1];
  const bool expect_zlib = std::string(argv[2]) == "with_zlib";
  tprof::Profiler prof;
  if (!prof.start().ok()) return 1;
  {
    TPROF_RECORD_FUNCTION("gz work");
  }
  if (!prof.stop().ok()) return 1;
  tprof::Status gz = prof.export_chrome_trace(dir + "/t.json.gz");
  if (expect_zlib) {
    if (!gz.ok()) {
      std::fprintf(stderr, "FAIL: .json.gz with zlib: %s\n", gz.error().message().c_str());
      return 1;
    }
    auto back = tprof::read_trace(dir + "/t.json.gz");
    if (!back.has_value()) {
      std::fprintf(stderr, "FAIL: reading it back: %s\n", back.error().message().c_str());
      return 1;
    }
  } else {
    if (gz.ok()) {
      std::fprintf(stderr, "FAIL: .json.gz written without zlib\n");
      return 1;
    }
    const std::string m = gz.error().message();
    if (m.find("needs zlib") == std::string::npos || m.find("tprof::gzip") == std::string::npos) {
      std::fprintf(stderr, "FAIL: unclear message: %s\n", m.c_str());
      return 1;
    }
    std::printf("as expected: %s\n", m.c_str());
  }
  if (!prof.export_chrome_trace(dir + "/t.json").ok()) return 1;
  std::printf("ok\n");
  return 0;
}
