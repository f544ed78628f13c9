// The trace as an SQLite database: the model's tables (events, lanes,
// flows, args, ...) and its derived views (steps, kernels with their
// launching op, per-step breakdowns, torch's key_averages), indexed for
// the joins docs/sql.md's queries make. The schema, its units (ns) and the
// example queries are documented in docs/sql.md; kSqliteSchemaVersion
// changes whenever a table or column does.
//
//   Result<SqliteExportStats> s = internal::write_sqlite(trace, "trace.db", {.source = "trace.json"});
//   if (!s) std::cerr << s.error().to_string();
//
// Rows are written straight from the model's columns, in one transaction
// with prepared statements; the indexes are built after the bulk insert.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tprof/read.h"
#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof::internal {

// PRAGMA user_version and meta.schema_version of the databases written.
inline constexpr int kSqliteSchemaVersion = 2;
// PRAGMA application_id: "tprf", so `file(1)`-like tools can tell the file.
inline constexpr std::int32_t kSqliteApplicationId = 0x74707266;

struct SqliteExportOptions {
  // The args table: every event's args object as its JSON text (about half
  // of a trace's bytes). False leaves the table empty.
  bool args = true;
  // The trace's path as the user named it, recorded in meta ("" = none).
  std::string source;
  // Called on the exporting thread as the export goes: `phase` ("events",
  // "args", "derived tables", "indexes"), and how far it is (done of
  // total, in the phase's own units: rows, or 0/1 then 1/1). Empty: none.
  std::function<void(std::string_view phase, std::uint64_t done, std::uint64_t total)> progress;
};

// Rows written, per table in schema order.
struct SqliteExportStats {
  std::vector<std::pair<std::string, std::uint64_t>> rows;
  std::uint64_t total_rows() const;
  std::uint64_t rows_of(const std::string& table) const;  // 0 for a table not written
};

// Writes `trace` as a new SQLite database at `path`, through the one output
// writer (src/base/file.h: a regular file is replaced atomically, a
// descriptor or FIFO written straight through, links, their owners and
// modes as it says). The database is built in the writer's temporary file
// beside the output (for a descriptor or FIFO: in a ScratchFile in
// $TMPDIR, then copied), and then put in place whole. No file is opened
// by a name after it was created: SQLite reaches the files through their
// descriptors (a VFS of tprof's), so another user of the directory cannot
// swap them for a link (issue 36). On any error nothing new is left at
// `path`, an existing file there is unchanged and every scratch file is
// removed (those a killed run leaves are named as the writer names its
// temporaries, and go at the next write into the directory). Errors name
// `path` (I/O, SQLite's own message, a full disk). Not thread-safe for one
// path; the trace is only read.
Result<SqliteExportStats> write_sqlite(const Trace& trace, const std::string& path,
                                       const SqliteExportOptions& options = {});

// Writes the database into `db_path`, which must be a new or empty file
// (tests), opened once without following a link. Nothing else is created.
Result<SqliteExportStats> export_sqlite_file(const Trace& trace, const std::string& db_path,
                                             const SqliteExportOptions& options = {});

// The streamed export (docs/sql.md, "Streaming"): reads the trace at
// `trace_path` batch by batch (internal::read_trace_streamed) and writes
// each batch's rows as it comes, so the trace never has to fit in memory.
// The events' nesting (parent_id, self_ns, flows' slices) is found out of
// core, in a work database: a ScratchFile beside the database, removed with
// it.
// The derived tables (steps, kernels, kernel_names, step_breakdown,
// key_averages) need the whole model: they are written when the read kept
// it (within ReadOptions::max_model_bytes; 0: half the physical memory)
// and left empty otherwise, with meta `derived` = 0. Every table written
// holds the same rows as write_sqlite's, and meta says `stream` = 1. The
// files and errors are write_sqlite's; the trace's errors name the trace.
// `on_read` is called with the model once the read ends (its diagnostics
// name trace-wide event indices).
Result<SqliteExportStats> write_sqlite_streamed(const std::string& trace_path, const ReadOptions& read,
                                                const std::string& path, const SqliteExportOptions& options = {},
                                                const std::function<void(const Trace&)>& on_read = {});

// write_sqlite_streamed into `db_path`, with its work database at
// `work_path` (both new or empty files; tests).
Result<SqliteExportStats> export_sqlite_streamed_file(const std::string& trace_path, const ReadOptions& read,
                                                      const std::string& db_path, const std::string& work_path,
                                                      const SqliteExportOptions& options = {},
                                                      const std::function<void(const Trace&)>& on_read = {});

}  // namespace tprof::internal
