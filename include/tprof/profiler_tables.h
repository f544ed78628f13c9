// tprof/profiler_tables.h — torch's prof.key_averages().table() for a
// tprof::Profiler.
//
//   TPROF_TRY(prof.stop());
//   tprof::Result<std::string> table = prof.key_averages().table({.sort_by = "cpu_time_total", .row_limit = 15});
//   if (!table) return fail(table.error());  // an unknown sort key
//   std::cout << *table;
//
// This is the layer above capture and report (docs/architecture.md): the
// capture library (tprof::capture) records and writes traces and knows
// nothing of tables; this header's functions live in tprof::profiler_tables
// (pkg-config tprof-tables), which links capture, analyze and report, and
// compiles as C++17 like the capture headers. tprof::tprof includes it.
#pragma once

#if !defined(TPROF_HAS_TABLES)
#error "tprof/profiler_tables.h: prof.key_averages().table() lives in tprof::profiler_tables, not tprof::capture: link tprof::profiler_tables or tprof::tprof (CMake), or use pkg-config tprof-tables (C++17) / tprof"
#endif

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tprof/key_averages.h"
#include "tprof/profiler.h"
#include "tprof/status.h"
#include "tprof/table.h"

namespace tprof {

// key_averages() / events(): rows and their table, as torch prints it.
class KeyAverages {
 public:
  KeyAverages(std::vector<StatRow> rows, bool profile_memory, std::uint64_t dropped_events)
      : rows_(std::move(rows)), profile_memory_(profile_memory), dropped_events_(dropped_events) {}

  const std::vector<StatRow>& rows() const { return rows_; }
  // Returns torch's table() text; profile_memory and the dropped-event note
  // come from the profiler. Errors: kInvalidArgument for an unknown sort_by
  // key (the message lists the valid ones).
  Result<std::string> table(TableOptions options = {}) const;

 private:
  std::vector<StatRow> rows_;
  bool profile_memory_;
  std::uint64_t dropped_events_;
};

}  // namespace tprof
