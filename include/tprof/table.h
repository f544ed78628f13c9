// tprof/table.h — torch's key_averages().table() text, byte for byte.
//
//   tprof::Result<std::string> text = tprof::format_table(events.key_averages(),
//                                                        {.sort_by = "cpu_time_total", .row_limit = 15});
//
// Layout rules (widths from all rows, right-aligned cells, truncation and
// padding by Unicode code points as Python does) are in
// docs/torch-table-semantics.md.
#pragma once

#include <string>
#include <vector>

#include "tprof/key_averages.h"
#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof {

// table() arguments, with torch's defaults.
struct TableOptions {
  std::string sort_by{};  // "" = no sorting (first appearance); any StatRow attribute torch knows
  int row_limit = 100;  // negative = no limit
  int max_name_column_width = 55;
  int max_src_column_width = 75;
  int max_shapes_column_width = 80;
  std::string header{};      // printed above the table when has_header
  bool has_header = false;
  bool top_level_events_only = false;
  bool profile_memory = false;  // adds CPU Mem / Self CPU Mem (+ CUDA Mem when any)
  // Events a tprof capture dropped (full buffers): stated under the table
  // when non-zero (torch's own traces never have any).
  std::uint64_t dropped_events = 0;
  // torch's use_device, upper-cased, in the device columns: "Self CUDA",
  // "Self MTIA". device_name_of() picks it from a trace.
  std::string device_name = "CUDA";
};

// The device columns' name for a trace: "MTIA" when its device activity is
// MTIA's (mtia_ccp_events), else "CUDA" (torch says CUDA on ROCm too).
std::string device_name_of(const Trace& trace);

// Returns the sort keys table() accepts (cpu_time_total, self_cuda_time_total, count, ...).
const std::vector<std::string>& table_sort_keys();

// Formats rows exactly as torch's _build_table. Errors: kInvalidArgument for
// an unknown sort_by key (the message lists the valid ones).
Result<std::string> format_table(const std::vector<StatRow>& rows, const TableOptions& options);

// The rows the table shows, in its order: sorted by options.sort_by,
// top_level_events_only and row_limit applied (the same selection as
// format_table). Same errors.
Result<std::vector<const StatRow*>> select_table_rows(const std::vector<StatRow>& rows, const TableOptions& options);

// The selected rows for programs: JSON ({"rows": [...]}, times in integer ns,
// memory in bytes, the table's columns by snake_case key) or CSV (one header
// line, RFC 4180 quoting). Full names, never cut to a column width.
Result<std::string> format_table_json(const std::vector<StatRow>& rows, const TableOptions& options);
Result<std::string> format_table_csv(const std::vector<StatRow>& rows, const TableOptions& options);

}  // namespace tprof
