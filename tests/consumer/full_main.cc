// A C++20 program using everything (tprof::tprof): record, then read the
// trace back and print torch's table, as the README's example does.
#include <cstdint>
#include <iostream>
#include <string>

#include "tprof/tprof.h"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "consumer_full.json";
  // Designated options, later members left out (GCC 12's
  // -Wmissing-field-initializers names any member without an initializer).
  tprof::Profiler prof({.record_shapes = true, .deliver_inline = true});
  if (!prof.start().ok()) return 2;
  for (int i = 0; i < 3; ++i) {
    TPROF_RECORD_FUNCTION("matmul_add");
  }
  if (!prof.stop().ok() || !prof.export_chrome_trace(path).ok()) return 2;
  tprof::Result<std::string> table = prof.key_averages().table({.sort_by = "cpu_time_total", .row_limit = 5});
  if (!table) {
    std::cerr << table.error().to_string() << "\n";
    return 2;
  }
  std::cout << *table;
  tprof::Result<tprof::Trace> back = tprof::read_trace(path);
  if (!back) {
    std::cerr << back.error().to_string() << "\n";
    return 2;
  }
  int scopes = 0;
  for (std::uint32_t e = 0; e < back->events.size(); ++e) scopes += back->name(e) == "matmul_add";
  std::cout << "matmul_add scopes read back: " << scopes << "\n";
  return 0;
}
