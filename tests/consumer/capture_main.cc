// A C++17 program that records with tprof::capture only: the consumer test
// builds it against an installed tprof (find_package, pkg-config) and as a
// FetchContent subproject, then runs it.
#include <cstdio>
#include <string>

#include "tprof/profiler.h"
#include "tprof/record_function.h"

static_assert(__cplusplus == 201703L, "this consumer is built as C++17");

namespace {

int work(int n) {
  TPROF_RECORD_FUNCTION("work");
  int s = 0;
  for (int i = 0; i < n; ++i) s += i % 7;
  return s;
}

tprof::Status run(const std::string& path) {
  tprof::ProfilerOptions options;
  options.schedule = tprof::schedule(tprof::ScheduleOptions{0, 1, 2, 1, 0});
  tprof::Profiler prof(options);
  TPROF_TRY(prof.start());
  for (int step = 0; step < 4; ++step) {
    work(1000 + step);
    TPROF_TRY(prof.step());
  }
  TPROF_TRY(prof.stop());
  return prof.export_chrome_trace(path);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "consumer_trace.json";
  const tprof::Status s = run(path);
  if (!s.ok()) {
    std::fprintf(stderr, "consumer: %s\n", s.error().to_string().c_str());
    return 2;
  }
  std::printf("consumer: wrote %s\n", path.c_str());
  return 0;
}
