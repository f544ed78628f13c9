// torch's prof.key_averages().table() from a C++17 program that links
// tprof::profiler_tables (pkg-config tprof-tables): built by
// tests/consumer/consumer_test.sh with the strict flags. Without that
// target the header stops the build with a message instead of a link error.
#include <cstdio>
#include <string>

#include "tprof/profiler.h"
#include "tprof/profiler_tables.h"
#include "tprof/record_function.h"

static_assert(__cplusplus == 201703L, "this consumer is built as C++17");

int main() {
  tprof::Profiler prof;
  if (!prof.start().ok()) return 2;
  for (int i = 0; i < 3; ++i) {
    TPROF_RECORD_FUNCTION("tables17 work");
  }
  if (!prof.stop().ok()) return 2;
  tprof::TableOptions options;
  options.sort_by = "cpu_time_total";
  options.row_limit = 15;
  const tprof::Result<std::string> table = prof.key_averages().table(options);
  if (!table.has_value()) return 2;
  std::printf("%s", table->c_str());
  return 0;
}
