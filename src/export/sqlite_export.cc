// tprof export --sqlite (docs/sql.md): the model's columns and the derived
// views as SQLite tables.
//
//   Trace ──┬─ this thread: nesting per lane (parent_id, self_ns, flow ends)
//           │   ── strings, processes, lanes, events, args, flows, memory,
//           │      diagnostics (rows straight from the columns)
//           └─ a second thread: DiagnoseContext (steps, device activity ──
//               launch call), torch's key_averages (a third), the plugin's
//               step breakdown, launching ops, kernel short names, the
//               causal model's critical path per step
//       ── derived tables ── COMMIT ── indexes ── ANALYZE
//
//   --stream: read_trace_streamed ── per batch: work.raw_events, args, memory
//       ── B/E durations ── sweep_nesting (SQLite's sort, one stack pass per
//       lane: work.nest, work.next_slice) ── events (raw ⋈ nest, ts shifted)
//       ── flows ── the model's tables ── the derived tables when the model
//       was kept whole ── indexes ── COMMIT ── ANALYZE (the work database is
//       removed with its file)
//
// One transaction, prepared statements, no journal (the scratch file is
// thrown away on any error, so nothing needs rolling back), the indexes
// built after the rows (one sort each instead of a B-tree insert per row).
#include "src/export/sqlite_export.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string_view>

#include "src/analyze/breakdowns.h"
#include "src/analyze/diagnose_context.h"
#include "src/analyze/nesting.h"
#include "src/trace/id_index.h"
#include "src/base/file.h"
#include "src/base/json_writer.h"
#include "src/base/radix_sort.h"
#include "src/base/saturate.h"
#include "src/report/kernel_names.h"
#include "src/trace/event_stream.h"
#include "tprof/causal.h"
#include "tprof/info.h"
#include "tprof/key_averages.h"
#include "tprof/memory.h"

namespace tprof::internal {

std::uint64_t SqliteExportStats::total_rows() const {
  std::uint64_t n = 0;
  for (const auto& row : rows) n += row.second;
  return n;
}

std::uint64_t SqliteExportStats::rows_of(const std::string& table) const {
  for (const auto& [name, n] : rows) {
    if (name == table) return n;
  }
  return 0;
}

namespace {

// The schema (docs/sql.md documents every table and column; a test checks
// that it does). Times are int64 ns, absolute as in the model; ids are the
// model's indices (events.id is the event's index in file order, lanes.id
// the lane's, strings.id the interned string's).
constexpr const char* kSchema = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value);
CREATE TABLE top_level (id INTEGER PRIMARY KEY, key TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE processes (pid NOT NULL, name_id INTEGER NOT NULL, labels_id INTEGER NOT NULL, sort_index INTEGER);
CREATE TABLE lanes (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, pid NOT NULL, tid NOT NULL, device INTEGER,
  stream INTEGER, thread_name_id INTEGER NOT NULL, sort_index INTEGER);
CREATE TABLE events (id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL, cat_id INTEGER NOT NULL, lane_id INTEGER NOT NULL, phase TEXT NOT NULL,
  kind TEXT NOT NULL, flags INTEGER NOT NULL, external_id INTEGER, correlation INTEGER, flow_id INTEGER,
  parent_id INTEGER, self_ns INTEGER, src_offset INTEGER NOT NULL);
CREATE TABLE args (event_id INTEGER PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE flows (id INTEGER PRIMARY KEY, flow_id INTEGER NOT NULL, cat_id INTEGER NOT NULL,
  start_event INTEGER, end_event INTEGER, from_event INTEGER, to_event INTEGER);
CREATE TABLE memory (event_id INTEGER PRIMARY KEY, bytes INTEGER NOT NULL, total_allocated INTEGER,
  total_reserved INTEGER, addr INTEGER, device_type INTEGER NOT NULL,
  device_id INTEGER NOT NULL);
CREATE TABLE diagnostics (id INTEGER PRIMARY KEY, code TEXT NOT NULL, severity TEXT NOT NULL, event_id INTEGER,
  byte_offset INTEGER, message TEXT NOT NULL);
CREATE TABLE diagnostic_counts (code TEXT PRIMARY KEY, count INTEGER NOT NULL);
CREATE TABLE steps (event_id INTEGER PRIMARY KEY, step INTEGER NOT NULL, numbered INTEGER NOT NULL,
  lane_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, cpu_busy_ns INTEGER NOT NULL,
  gpu_busy_ns INTEGER NOT NULL, gpu_idle_pct REAL, launches INTEGER NOT NULL, first_kernel_id INTEGER,
  first_launch_id INTEGER, first_kernel_offset_ns INTEGER);
CREATE TABLE kernels (event_id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL, category TEXT NOT NULL,
  class TEXT NOT NULL, device INTEGER NOT NULL, stream INTEGER NOT NULL, lane_id INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, step INTEGER, launch_id INTEGER, op_id INTEGER,
  launch_delay_ns INTEGER);
CREATE TABLE kernel_names (name_id INTEGER PRIMARY KEY, short_name TEXT NOT NULL);
CREATE TABLE step_breakdown (step INTEGER, kernel_ns INTEGER NOT NULL, communication_ns INTEGER NOT NULL,
  memcpy_ns INTEGER NOT NULL, memset_ns INTEGER NOT NULL, runtime_ns INTEGER NOT NULL,
  dataloader_ns INTEGER NOT NULL, cpu_exec_ns INTEGER NOT NULL, other_ns INTEGER NOT NULL);
CREATE TABLE key_averages (id INTEGER PRIMARY KEY, name TEXT NOT NULL, count INTEGER NOT NULL,
  cpu_total_ns INTEGER NOT NULL, self_cpu_ns INTEGER NOT NULL, device_total_ns INTEGER NOT NULL,
  self_device_ns INTEGER NOT NULL, cpu_memory_bytes INTEGER NOT NULL, self_cpu_memory_bytes INTEGER NOT NULL,
  device_memory_bytes INTEGER NOT NULL, self_device_memory_bytes INTEGER NOT NULL, is_device INTEGER NOT NULL,
  is_user_annotation INTEGER NOT NULL);
CREATE TABLE critical_path (step INTEGER, seq INTEGER NOT NULL, event_id INTEGER, name TEXT,
  edge_type TEXT NOT NULL, bound_type TEXT NOT NULL, start_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL);
CREATE TABLE critical_path_shares (step INTEGER, bound_type TEXT NOT NULL, ns INTEGER NOT NULL, share REAL);
CREATE TABLE memory_timeline (event_id INTEGER PRIMARY KEY, device_type INTEGER NOT NULL, device_id INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL, bytes INTEGER NOT NULL, allocated INTEGER NOT NULL, allocated_recorded INTEGER NOT NULL,
  reserved INTEGER, step INTEGER, op TEXT NOT NULL, caller TEXT NOT NULL, stack TEXT NOT NULL);
CREATE VIEW event_view AS
  SELECT e.id, e.ts_ns, e.dur_ns, e.ts_ns + e.dur_ns AS end_ns, n.text AS name, c.text AS cat, e.lane_id,
         e.phase, e.kind, e.external_id, e.correlation, e.flow_id, e.parent_id, e.self_ns
  FROM events e JOIN strings n ON n.id = e.name_id JOIN strings c ON c.id = e.cat_id;
CREATE VIEW kernel_view AS
  SELECT k.event_id, k.step, n.text AS name, kn.short_name, k.category, k.class, k.device, k.stream, k.ts_ns,
         k.dur_ns, k.launch_id, ln.text AS launch_name, k.launch_delay_ns, k.op_id, opn.text AS op_name
  FROM kernels k JOIN strings n ON n.id = k.name_id
  LEFT JOIN kernel_names kn ON kn.name_id = k.name_id
  LEFT JOIN events l ON l.id = k.launch_id LEFT JOIN strings ln ON ln.id = l.name_id
  LEFT JOIN events o ON o.id = k.op_id LEFT JOIN strings opn ON opn.id = o.name_id;
)sql";

// Built once the rows are in: a sort each, rather than a B-tree insert per
// row. Partial where most rows have no value (NULL). Correlation and
// External id get none: kernels.launch_id and kernels.op_id hold those
// links resolved, and an ad hoc join on them gets SQLite's automatic index.
constexpr const char* kIndexes = R"sql(
CREATE INDEX events_name ON events(name_id);
CREATE INDEX events_lane_ts ON events(lane_id, ts_ns);
CREATE INDEX events_parent ON events(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX flows_start ON flows(start_event);
CREATE INDEX flows_end ON flows(end_event);
CREATE INDEX steps_step ON steps(step);
CREATE INDEX kernels_step_name ON kernels(step, name_id);
CREATE INDEX kernels_name ON kernels(name_id);
CREATE INDEX kernels_op ON kernels(op_id) WHERE op_id IS NOT NULL;
CREATE INDEX kernels_launch ON kernels(launch_id) WHERE launch_id IS NOT NULL;
CREATE INDEX step_breakdown_step ON step_breakdown(step);
CREATE INDEX critical_path_step ON critical_path(step, seq);
CREATE INDEX critical_path_event ON critical_path(event_id) WHERE event_id IS NOT NULL;
)sql";

// ---- SQLite, checked ----------------------------------------------------------

class Db;

// A prepared statement bound column by column, then stepped (and reset).
// Text is bound SQLITE_STATIC: every view comes from the Trace or from a
// string that outlives the step (text made valid UTF-8 is copied).
class Stmt {
 public:
  Stmt(Db* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_), col_(o.col_), bind_rc_(o.bind_rc_) { o.s_ = nullptr; }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() {
    if (s_ != nullptr) sqlite3_finalize(s_);
  }

  Stmt& i64(std::int64_t v) {
    bind_rc_ |= sqlite3_bind_int64(s_, ++col_, v);
    return *this;
  }
  Stmt& null() {
    bind_rc_ |= sqlite3_bind_null(s_, ++col_);
    return *this;
  }
  // v, or NULL when !present.
  Stmt& opt(std::int64_t v, bool present) { return present ? i64(v) : null(); }
  // An index into the model, NULL for kNoIndex.
  Stmt& ref(std::uint32_t v) { return v == kNoIndex ? null() : i64(v); }
  Stmt& real(double v) {
    bind_rc_ |= sqlite3_bind_double(s_, ++col_, v);
    return *this;
  }
  // Every TEXT value goes through here, so every one is valid UTF-8: a
  // byte that is not (a trace's name, args, metadata, a path) becomes
  // U+FFFD, as the JSON writer writes it. SQLite stores TEXT as given, and
  // what reads it as text (Python's sqlite3, pandas.read_sql) fails on
  // invalid UTF-8 (issue 36).
  Stmt& text(std::string_view v) {
    if (!is_valid_utf8(v)) {
      const std::string valid = replace_invalid_utf8(v);
      bind_rc_ |= sqlite3_bind_text64(s_, ++col_, valid.data(), valid.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      return *this;
    }
    // A null data pointer would bind NULL, not "".
    bind_rc_ |= sqlite3_bind_text64(s_, ++col_, v.data() != nullptr ? v.data() : "", v.size(), SQLITE_STATIC,
                                    SQLITE_UTF8);
    return *this;
  }
  // A pid or tid as the file wrote it: an integer, or text.
  Stmt& id(const Trace& t, const TraceId& v) { return v.is_str ? text(t.str(v.str)) : i64(v.num); }

  Status step();
  // A query's next row: true with one, false at the end (then reset).
  Result<bool> row();
  std::int64_t col(int i) const { return sqlite3_column_int64(s_, i); }
  bool is_null(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }

 private:
  // Runs the statement once: SQLite's result code (SQLITE_ROW, SQLITE_DONE,
  // an error); a failed bind is an error before it runs.
  Result<int> advance();

  Db* db_;
  sqlite3_stmt* s_;
  int col_ = 0;
  int bind_rc_ = SQLITE_OK;
};

// The name under which fd_vfs() opens the descriptor `fd`.
std::string fd_name(int fd);
// The VFS that opens fd_name()s (see "files" below).
const char* fd_vfs();

// A database on a descriptor tprof holds; errors name `path` (the output).
class Db {
 public:
  explicit Db(std::string path) : path_(std::move(path)) {}
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    if (db_ != nullptr) sqlite3_close_v2(db_);
  }

  // Opens the database in `fd` (an empty file: a new database), never by a
  // name (see fd_vfs()).
  Status open(int fd) {
    const int rc = sqlite3_open_v2(fd_name(fd).c_str(), &db_,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, fd_vfs());
    if (rc != SQLITE_OK) return error("cannot open the database");
    sqlite3_extended_result_codes(db_, 1);
    return {};
  }

  Status exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) == SQLITE_OK) return {};
    std::string what = msg != nullptr ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    return Error(ErrorCode::kIo, "cannot write the database: " + what + os_reason(), path_);
  }

  Result<Stmt> prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      return error("cannot prepare a statement");
    }
    return Stmt(this, s);
  }

  // Closes the database, checked (its last pages are written here).
  Status close() {
    sqlite3* d = db_;
    db_ = nullptr;
    if (d != nullptr && sqlite3_close(d) != SQLITE_OK) {
      db_ = d;
      return error("cannot close the database");
    }
    return {};
  }

  Error error(std::string_view what) const {
    return Error(ErrorCode::kIo, std::string(what) + ": " + sqlite3_errmsg(db_) + os_reason(), path_);
  }

 private:
  // The system's reason behind an I/O failure ("No space left on device"),
  // when SQLite kept one.
  std::string os_reason() const {
    const int err = db_ != nullptr ? sqlite3_system_errno(db_) : 0;
    return err != 0 ? std::string(" (") + std::strerror(err) + ")" : std::string();
  }

  std::string path_;
  sqlite3* db_ = nullptr;
};

Result<int> Stmt::advance() {
  col_ = 0;
  if (bind_rc_ != SQLITE_OK) {
    bind_rc_ = SQLITE_OK;
    sqlite3_reset(s_);
    return db_->error("cannot bind a value");
  }
  return sqlite3_step(s_);
}

Status Stmt::step() {
  TPROF_TRY_ASSIGN(const int rc, advance());
  sqlite3_reset(s_);
  if (rc != SQLITE_DONE) return db_->error("cannot insert a row");
  return {};
}

Result<bool> Stmt::row() {
  TPROF_TRY_ASSIGN(const int rc, advance());
  if (rc == SQLITE_ROW) return true;
  sqlite3_reset(s_);
  if (rc != SQLITE_DONE) return db_->error("cannot read a row");
  return false;
}

// ---- nesting -------------------------------------------------------------------

// The tree of each lane (parent_id, self_ns, flow ends) is build_nesting's
// (src/analyze/nesting.h), the one the Python module's Trace.events(derived=True)
// shows.

// ---- derived views (computed on a second thread) ---------------------------

struct Derived {
  std::unique_ptr<DiagnoseContext> context;
  // Per context->device entry: the op that launched it, or kNoIndex.
  std::vector<std::uint32_t> op_of;
  std::vector<TbPluginStep> breakdown;
  // (name id, short name) of every device activity name, by name id.
  std::vector<std::pair<StrId, std::string>> short_names;
  // The causal model (docs/critical-path.md): each step's critical path.
  std::optional<CausalResult> causal;
  // tprof memory's samples per device (docs/memory.md).
  MemoryInput memory;
};

// The launching op of each device activity, as the efficiency view finds it
// (src/analyze/efficiency.cc): the cpu_op with the activity's own External
// id, else its launch call's (tprof's captures put it on the launch only);
// where several ops share an id, the innermost (the shortest) one.
std::vector<std::uint32_t> launching_ops(const DiagnoseContext& c) {
  const EventColumns& ev = c.trace.events;
  std::vector<std::uint32_t> ops;
  for (std::uint32_t e : c.host_ops) {
    if (ev.kind[e] == EventKind::kCpuOp && ev.external_id[e] >= 0) ops.push_back(e);
  }
  // Shortest first (stable: then by time), so that IdIndex's first pair per id wins.
  std::stable_sort(ops.begin(), ops.end(), [&](std::uint32_t a, std::uint32_t b) { return ev.dur_ns[a] < ev.dur_ns[b]; });
  std::vector<std::pair<std::int64_t, std::uint32_t>> pairs;
  pairs.reserve(ops.size());
  for (std::uint32_t e : ops) pairs.emplace_back(ev.external_id[e], e);
  const IdIndex by_id(std::move(pairs));
  std::vector<std::uint32_t> out;
  out.reserve(c.device.size());
  for (const DeviceOp& op : c.device) {
    std::int64_t id = ev.external_id[op.event];
    if (id < 0 && op.launch != kNoIndex) id = ev.external_id[op.launch];
    out.push_back(id >= 0 ? by_id.find(id) : kNoIndex);
  }
  return out;
}

Derived derive(const Trace& t) {
  Derived d;
  // with_averages: torch's key_averages on a thread of its own meanwhile.
  d.context = std::make_unique<DiagnoseContext>(t, true);
  d.op_of = launching_ops(*d.context);
  d.breakdown = compute_breakdowns(*d.context).tb_plugin_steps;
  const KernelNames names(t);
  std::vector<std::uint8_t> seen(t.strings.size(), 0);
  for (const DeviceOp& op : d.context->device) {
    const StrId name = t.events.name[op.event];
    if (seen[name]) continue;
    seen[name] = 1;
    d.short_names.emplace_back(name, names.get(t.str(name)));
  }
  std::sort(d.short_names.begin(), d.short_names.end());
  // Without edits analyze_causal does not fail; were it to, the critical
  // path tables stay empty.
  d.memory = memory_input(t, d.context->steps);
  Result<CausalResult> causal = analyze_causal(t);
  if (causal) d.causal.emplace(std::move(*causal));
  return d;
}

// ---- writing -------------------------------------------------------------------

std::string_view phase_text(Phase p) {
  switch (p) {
    case Phase::kComplete: return "X";
    case Phase::kInstant: return "i";
    case Phase::kCounter: return "C";
    case Phase::kFlowStart: return "s";
    case Phase::kFlowStep: return "t";
    case Phase::kFlowEnd: return "f";
    case Phase::kMetadata: return "M";
  }
  return "?";
}

std::string_view severity_text(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

std::string_view class_text(DeviceClass c) {
  switch (c) {
    case DeviceClass::kCompute: return "compute";
    case DeviceClass::kComm: return "comm";
    case DeviceClass::kMemcpy: return "memcpy";
    case DeviceClass::kMemset: return "memset";
    case DeviceClass::kRange: return "range";
  }
  return "?";
}

// tprof kernels' category of a device activity.
std::string_view category_text(EventKind k) {
  return k == EventKind::kGpuMemcpy ? "memcpy" : k == EventKind::kGpuMemset ? "memset" : "kernel";
}

// µs as the plugin's breakdown keeps them (ns / 1000.0) back to exact ns.
std::int64_t us_to_ns(double us) { return std::llround(us * 1000.0); }

// What the meta table says of the events as a whole (a streamed export's
// model does not hold them all).
struct Totals {
  std::uint64_t events = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // first event start, last event end (not M events)
  bool stream = false, derived = true;
};

class Writer {
 public:
  Writer(const Trace& t, Db* db, const SqliteExportOptions& o) : t_(t), ev_(t.events), db_(db), o_(o) {}

  Status base_tables(const Nesting& nest);
  // The tables that come from the model's side records: meta, top_level,
  // strings, processes, lanes, diagnostics, diagnostic_counts.
  Status model_tables(const Totals& totals);
  Status derived_tables(const Derived& d);
  SqliteExportStats& stats() { return stats_; }
  void count(const char* table, std::uint64_t rows) { stats_.rows.emplace_back(table, rows); }
  // Reports progress every 64k rows of a phase (and at its end).
  void progress(std::string_view phase, std::uint64_t done, std::uint64_t total) const {
    if (o_.progress && (done % 65536 == 0 || done == total)) o_.progress(phase, done, total);
  }

 private:
  Status meta(const Totals& totals);
  Status strings();
  Status lanes();
  Status events(const Nesting& nest);
  Status args();
  Status flows(const Nesting& nest);
  Status memory();
  Status diagnostics();
  Status critical_path(const Derived& d);
  Status memory_timeline(const Derived& d);

  const Trace& t_;
  const EventColumns& ev_;
  Db* db_;
  const SqliteExportOptions& o_;
  SqliteExportStats stats_;
};

Status Writer::base_tables(const Nesting& nest) {
  Totals totals;
  totals.events = ev_.size();
  totals.start_ns = t_.start_ns();
  totals.end_ns = t_.end_ns();
  TPROF_TRY(model_tables(totals));
  TPROF_TRY(events(nest));
  TPROF_TRY(args());
  TPROF_TRY(flows(nest));
  return memory();
}

Status Writer::model_tables(const Totals& totals) {
  TPROF_TRY(meta(totals));
  TPROF_TRY(strings());
  TPROF_TRY(lanes());
  return diagnostics();
}

Status Writer::meta(const Totals& totals) {
  TPROF_TRY_ASSIGN(Stmt s, db_->prepare("INSERT INTO meta (key, value) VALUES (?, ?)"));
  std::uint64_t rows = 0;
  auto put_i = [&](std::string_view k, std::int64_t v) { ++rows; return s.text(k).i64(v).step(); };
  auto put_s = [&](std::string_view k, std::string_view v) { ++rows; return s.text(k).text(v).step(); };
  const TraceMetadata& m = t_.meta;
  TPROF_TRY(put_i("schema_version", kSqliteSchemaVersion));
  TPROF_TRY(put_s("tprof_version", TPROF_VERSION));
  TPROF_TRY(put_s("source", o_.source));
  TPROF_TRY(put_s("format", m.format == TraceFormat::kLegacyArray ? "legacy_array" : "kineto_object"));
  TPROF_TRY(put_s("producer", producer_name(m.producer)));
  TPROF_TRY(put_i("gzip", m.gzip ? 1 : 0));
  if (m.base_time_ns) TPROF_TRY(put_i("base_time_ns", *m.base_time_ns));
  TPROF_TRY(put_i("start_ns", totals.start_ns));
  TPROF_TRY(put_i("end_ns", totals.end_ns));
  TPROF_TRY(put_i("events", static_cast<std::int64_t>(totals.events)));
  TPROF_TRY(put_i("dropped_events", static_cast<std::int64_t>(m.dropped_events)));
  TPROF_TRY(put_i("args", o_.args ? 1 : 0));
  TPROF_TRY(put_i("stream", totals.stream ? 1 : 0));
  TPROF_TRY(put_i("derived", totals.derived ? 1 : 0));
  count("meta", rows);

  TPROF_TRY_ASSIGN(Stmt top, db_->prepare("INSERT INTO top_level (id, key, json) VALUES (?, ?, ?)"));
  std::int64_t id = 0;
  for (const auto& [key, json] : m.top_level) TPROF_TRY(top.i64(id++).text(key).text(json).step());
  count("top_level", static_cast<std::uint64_t>(id));
  return {};
}

Status Writer::strings() {
  TPROF_TRY_ASSIGN(Stmt s, db_->prepare("INSERT INTO strings (id, text) VALUES (?, ?)"));
  for (StrId i = 0; i < t_.strings.size(); ++i) TPROF_TRY(s.i64(i).text(t_.strings.str(i)).step());
  count("strings", t_.strings.size());
  return {};
}

Status Writer::lanes() {
  TPROF_TRY_ASSIGN(Stmt p, db_->prepare("INSERT INTO processes (pid, name_id, labels_id, sort_index) VALUES (?, ?, ?, ?)"));
  for (const Process& pr : t_.processes) {
    TPROF_TRY(p.id(t_, pr.pid).i64(pr.name).i64(pr.labels).opt(pr.sort_index.value_or(0), pr.sort_index.has_value()).step());
  }
  count("processes", t_.processes.size());
  TPROF_TRY_ASSIGN(Stmt l, db_->prepare("INSERT INTO lanes (id, kind, pid, tid, device, stream, thread_name_id, sort_index) "
                                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  for (std::uint32_t i = 0; i < t_.lanes.size(); ++i) {
    const Lane& ln = t_.lanes[i];
    const bool gpu = ln.kind == LaneKind::kGpu;
    TPROF_TRY(l.i64(i)
                  .text(lane_kind_name(ln.kind))
                  .id(t_, ln.pid)
                  .id(t_, ln.tid)
                  .opt(ln.device, gpu)
                  .opt(ln.stream, gpu)
                  .i64(ln.thread_name)
                  .opt(ln.sort_index.value_or(0), ln.sort_index.has_value())
                  .step());
  }
  count("lanes", t_.lanes.size());
  return {};
}

// Rows per INSERT for the big tables (events, args): one statement step
// per kBatch rows instead of per row, about 7% of the export's CPU time on a
// generated 200 MB trace.
constexpr std::uint32_t kBatch = 32;

// "INSERT INTO <head> VALUES (?, ...), (?, ...)": `rows` groups of `columns` placeholders.
std::string insert_sql(const char* head, int columns, std::uint32_t rows) {
  std::string group = "(";
  for (int c = 0; c < columns; ++c) group += c == 0 ? "?" : ", ?";
  group += ")";
  std::string sql = std::string("INSERT INTO ") + head + " VALUES ";
  for (std::uint32_t r = 0; r < rows; ++r) sql += (r == 0 ? "" : ", ") + group;
  return sql;
}

// Inserts rows keyed by an event index: kBatch at a time through one
// statement, the rest one by one at finish().
template <typename Bind>
class BatchInsert {
 public:
  BatchInsert(Stmt one, Stmt many, Bind bind) : one_(std::move(one)), many_(std::move(many)), bind_(bind) {}
  Status add(std::uint32_t e) {
    pending_[n_++] = e;
    if (n_ < kBatch) return {};
    for (std::uint32_t i = 0; i < n_; ++i) bind_(many_, pending_[i]);
    n_ = 0;
    return many_.step();
  }
  Status finish() {
    for (std::uint32_t i = 0; i < n_; ++i) {
      bind_(one_, pending_[i]);
      TPROF_TRY(one_.step());
    }
    n_ = 0;
    return {};
  }

 private:
  Stmt one_, many_;
  Bind bind_;
  std::array<std::uint32_t, kBatch> pending_{};
  std::uint32_t n_ = 0;
};

template <typename Bind>
Result<BatchInsert<Bind>> batch_insert(Db* db, const char* head, int columns, Bind bind) {
  TPROF_TRY_ASSIGN(Stmt one, db->prepare(insert_sql(head, columns, 1).c_str()));
  TPROF_TRY_ASSIGN(Stmt many, db->prepare(insert_sql(head, columns, kBatch).c_str()));
  return BatchInsert<Bind>(std::move(one), std::move(many), bind);
}

Status Writer::events(const Nesting& nest) {
  auto bind = [&](Stmt& s, std::uint32_t e) {
    const Phase ph = ev_.phase[e];
    const bool complete = ph == Phase::kComplete;
    // Instants and flow events: the slice open on their lane at their time.
    const std::uint32_t parent = event_parent(t_, nest, e);
    s.i64(e)
        .i64(ev_.ts_ns[e])
        .i64(ev_.dur_ns[e])
        .i64(ev_.name[e])
        .i64(ev_.cat[e])
        .i64(ev_.lane[e])
        .text(phase_text(ph))
        .text(event_kind_name(ev_.kind[e]))
        .i64(ev_.flags[e])
        .opt(ev_.external_id[e], ev_.external_id[e] >= 0)
        .opt(ev_.correlation[e], ev_.correlation[e] >= 0)
        .opt(ev_.flow_id[e], ev_.flow_id[e] >= 0)
        .ref(parent)
        .opt(sat_sub(ev_.dur_ns[e], nest.child_ns[e]), complete)
        .i64(static_cast<std::int64_t>(ev_.src_offset[e]));
  };
  TPROF_TRY_ASSIGN(auto rows, batch_insert(db_,
                                           "events (id, ts_ns, dur_ns, name_id, cat_id, lane_id, phase, kind, flags, "
                                           "external_id, correlation, flow_id, parent_id, self_ns, src_offset)",
                                           15, bind));
  for (std::uint32_t e = 0; e < ev_.size(); ++e) {
    TPROF_TRY(rows.add(e));
    progress("events", e + 1, ev_.size());
  }
  TPROF_TRY(rows.finish());
  count("events", ev_.size());
  return {};
}

Status Writer::args() {
  std::uint64_t n = 0;
  if (o_.args) {
    // args_json reads the source lazily and keeps at most a few windows of
    // a mapped file resident: the file is read once, in order. The view
    // stays valid until the step (pages dropped are read again).
    auto bind = [&](Stmt& s, std::uint32_t e) { s.i64(e).text(t_.args_json(e)); };
    TPROF_TRY_ASSIGN(auto rows, batch_insert(db_, "args (event_id, json)", 2, bind));
    for (std::uint32_t e = 0; e < ev_.size(); ++e) {
      progress("args", e + 1, ev_.size());
      if (ev_.args_ref[e] == 0 || t_.args_json(e).empty()) continue;
      TPROF_TRY(rows.add(e));
      ++n;
    }
    TPROF_TRY(rows.finish());
  }
  count("args", n);
  return {};
}

// Within one (cat, id) group, the k-th start (in file order) pairs with the
// k-th end: Kineto writes a flow's end, on the device lane, before or after
// its start. A start or an end left over is a row of its own (`none` in
// the other place).
template <typename T, typename Put>
Status pair_flows(const std::vector<T>& starts, const std::vector<T>& ends, const T& none, Put&& put) {
  for (std::size_t k = 0; k < std::max(starts.size(), ends.size()); ++k) {
    TPROF_TRY(put(k < starts.size() ? starts[k] : none, k < ends.size() ? ends[k] : none));
  }
  return {};
}

Status Writer::flows(const Nesting& nest) {
  // Flow events grouped by (cat, id), in file order within a group: three
  // stable radix passes over the indices.
  std::vector<std::uint32_t> fl;
  std::int64_t min_id = INT64_MAX;
  for (std::uint32_t e = 0; e < ev_.size(); ++e) {
    const Phase p = ev_.phase[e];
    if (p != Phase::kFlowStart && p != Phase::kFlowEnd) continue;
    fl.push_back(e);
    min_id = std::min(min_id, ev_.flow_id[e]);
  }
  std::vector<std::uint64_t> keys(fl.size());
  for (std::size_t i = 0; i < fl.size(); ++i) keys[i] = static_cast<std::uint64_t>(ev_.flow_id[fl[i]]) - static_cast<std::uint64_t>(min_id);
  radix_sort(&keys, &fl);
  for (std::size_t i = 0; i < fl.size(); ++i) keys[i] = ev_.cat[fl[i]];
  radix_sort(&keys, &fl);

  TPROF_TRY_ASSIGN(Stmt s, db_->prepare("INSERT INTO flows (id, flow_id, cat_id, start_event, end_event, from_event, "
                                        "to_event) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  std::int64_t row = 0;
  auto put = [&](std::uint32_t start, std::uint32_t end) -> Status {
    const std::uint32_t any = start != kNoIndex ? start : end;
    std::uint32_t from = kNoIndex, to = kNoIndex;
    if (start != kNoIndex) from = enclosing(t_, nest, ev_.lane[start], ev_.ts_ns[start]);
    if (end != kNoIndex) {
      to = (ev_.flags[end] & kFlagBindEnclosing) ? enclosing(t_, nest, ev_.lane[end], ev_.ts_ns[end])
                                                 : next_slice(t_, nest, ev_.lane[end], ev_.ts_ns[end]);
    }
    return s.i64(row++).i64(ev_.flow_id[any]).i64(ev_.cat[any]).ref(start).ref(end).ref(from).ref(to).step();
  };
  std::vector<std::uint32_t> starts, ends;
  for (std::size_t i = 0; i < fl.size();) {
    std::size_t j = i;
    starts.clear();
    ends.clear();
    for (; j < fl.size() && ev_.cat[fl[j]] == ev_.cat[fl[i]] && ev_.flow_id[fl[j]] == ev_.flow_id[fl[i]]; ++j) {
      (ev_.phase[fl[j]] == Phase::kFlowStart ? starts : ends).push_back(fl[j]);
    }
    TPROF_TRY(pair_flows(starts, ends, kNoIndex, put));
    i = j;
  }
  count("flows", static_cast<std::uint64_t>(row));
  return {};
}

constexpr const char* kInsertMemory =
    "INSERT INTO memory (event_id, bytes, total_allocated, total_reserved, addr, device_type, device_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)";

Status insert_memory(Stmt& s, const MemoryRecord& m) {
  return s.i64(m.event)
      .i64(m.bytes)
      .opt(m.total_allocated, m.has_total_allocated)  // NULL, not 0, where the trace has no total
      .opt(m.total_reserved, m.has_total_reserved)
      .opt(static_cast<std::int64_t>(m.addr), m.addr != 0)
      .i64(m.device_type)
      .i64(m.device_id)
      .step();
}

Status Writer::memory() {
  TPROF_TRY_ASSIGN(Stmt s, db_->prepare(kInsertMemory));
  for (const MemoryRecord& m : t_.memory) TPROF_TRY(insert_memory(s, m));
  count("memory", t_.memory.size());
  return {};
}

Status Writer::diagnostics() {
  TPROF_TRY_ASSIGN(Stmt s, db_->prepare("INSERT INTO diagnostics (id, code, severity, event_id, byte_offset, message) "
                                        "VALUES (?, ?, ?, ?, ?, ?)"));
  std::int64_t id = 0;
  for (const Diagnostic& d : t_.diagnostics.items()) {
    TPROF_TRY(s.i64(id++)
                  .text(diagnostic_code_name(d.code))
                  .text(severity_text(d.severity))
                  .ref(d.event)
                  .opt(d.byte_offset, d.byte_offset >= 0)
                  .text(d.message)
                  .step());
  }
  count("diagnostics", static_cast<std::uint64_t>(id));
  TPROF_TRY_ASSIGN(Stmt c, db_->prepare("INSERT INTO diagnostic_counts (code, count) VALUES (?, ?)"));
  std::uint64_t rows = 0;
  for (int i = 0; i < static_cast<int>(DiagnosticCode::kCount_); ++i) {
    const auto code = static_cast<DiagnosticCode>(i);
    const std::uint64_t n = t_.diagnostics.count(code);
    if (n == 0) continue;
    TPROF_TRY(c.text(diagnostic_code_name(code)).i64(static_cast<std::int64_t>(n)).step());
    ++rows;
  }
  count("diagnostic_counts", rows);
  return {};
}

Status Writer::derived_tables(const Derived& d) {
  const DiagnoseContext& c = *d.context;
  TPROF_TRY_ASSIGN(Stmt st, db_->prepare(
                                "INSERT INTO steps (event_id, step, numbered, lane_id, ts_ns, dur_ns, cpu_busy_ns, "
                                "gpu_busy_ns, gpu_idle_pct, launches, first_kernel_id, first_launch_id, "
                                "first_kernel_offset_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (const StepStat& s : c.steps.steps) {
    st.i64(s.event).i64(s.step).i64(s.numbered ? 1 : 0).i64(s.lane).i64(s.start_ns).i64(s.dur_ns);
    st.i64(s.cpu_busy_ns).i64(s.gpu_busy_ns);
    if (c.steps.has_device) {
      st.real(s.gpu_idle_pct);
    } else {
      st.null();
    }
    st.i64(s.launches).ref(s.first_kernel_event).ref(s.first_launch_event);
    TPROF_TRY(st.opt(s.first_kernel_offset_ns.value_or(0), s.first_kernel_offset_ns.has_value()).step());
  }
  count("steps", c.steps.steps.size());

  TPROF_TRY_ASSIGN(Stmt k, db_->prepare(
                               "INSERT INTO kernels (event_id, name_id, category, class, device, stream, lane_id, ts_ns, "
                               "dur_ns, step, launch_id, op_id, launch_delay_ns) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const std::int64_t step = c.step_number(op.step);
    TPROF_TRY(k.i64(op.event)
                  .i64(ev_.name[op.event])
                  .text(category_text(ev_.kind[op.event]))
                  .text(class_text(op.cls))
                  .i64(op.device)
                  .i64(op.stream)
                  .i64(op.lane)
                  .i64(ev_.ts_ns[op.event])
                  .i64(ev_.dur_ns[op.event])
                  .opt(step, op.step >= 0)
                  .ref(op.launch)
                  .ref(d.op_of[i])
                  .opt(op.launch != kNoIndex ? sat_sub(ev_.ts_ns[op.event], ev_.ts_ns[op.launch]) : 0,
                       op.launch != kNoIndex)
                  .step());
  }
  count("kernels", c.device.size());

  TPROF_TRY_ASSIGN(Stmt kn, db_->prepare("INSERT INTO kernel_names (name_id, short_name) VALUES (?, ?)"));
  for (const auto& [name, short_name] : d.short_names) TPROF_TRY(kn.i64(name).text(short_name).step());
  count("kernel_names", d.short_names.size());

  TPROF_TRY_ASSIGN(Stmt b, db_->prepare(
                               "INSERT INTO step_breakdown (step, kernel_ns, communication_ns, memcpy_ns, memset_ns, "
                               "runtime_ns, dataloader_ns, cpu_exec_ns, other_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (const TbPluginStep& s : d.breakdown) {
    TPROF_TRY(b.opt(s.step, s.step >= 0)
                  .i64(us_to_ns(s.kernel_us))
                  .i64(us_to_ns(s.communication_us))
                  .i64(us_to_ns(s.memcpy_us))
                  .i64(us_to_ns(s.memset_us))
                  .i64(us_to_ns(s.runtime_us))
                  .i64(us_to_ns(s.dataloader_us))
                  .i64(us_to_ns(s.cpu_exec_us))
                  .i64(us_to_ns(s.other_us))
                  .step());
  }
  count("step_breakdown", d.breakdown.size());

  TPROF_TRY_ASSIGN(Stmt a, db_->prepare(
                               "INSERT INTO key_averages (id, name, count, cpu_total_ns, self_cpu_ns, device_total_ns, "
                               "self_device_ns, cpu_memory_bytes, self_cpu_memory_bytes, device_memory_bytes, "
                               "self_device_memory_bytes, is_device, is_user_annotation) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  const std::vector<StatRow>& rows = c.averages();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const StatRow& r = rows[i];
    TPROF_TRY(a.i64(static_cast<std::int64_t>(i))
                  .text(r.key)
                  .i64(r.count)
                  .i64(r.cpu_time_total_ns)
                  .i64(r.self_cpu_time_total_ns)
                  .i64(r.device_time_total_ns)
                  .i64(r.self_device_time_total_ns)
                  .i64(r.cpu_memory_usage)
                  .i64(r.self_cpu_memory_usage)
                  .i64(r.device_memory_usage)
                  .i64(r.self_device_memory_usage)
                  .i64(r.is_device ? 1 : 0)
                  .i64(r.is_user_annotation ? 1 : 0)
                  .step());
  }
  count("key_averages", rows.size());
  TPROF_TRY(memory_timeline(d));
  return critical_path(d);
}

// tprof memory's samples (docs/memory.md): per record, allocated after it
// (the trace's total, or a running sum from 0 where it has none: then
// allocated_recorded is 0), reserved where recorded, the step it fell in,
// and the op, caller and Python stack that made it.
Status Writer::memory_timeline(const Derived& d) {
  TPROF_TRY_ASSIGN(Stmt m, db_->prepare("INSERT INTO memory_timeline (event_id, device_type, device_id, ts_ns, bytes, "
                                        "allocated, allocated_recorded, reserved, step, op, caller, stack) "
                                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  const MemoryInput& in = d.memory;
  std::uint64_t rows = 0;
  for (const MemoryDeviceInput& dev : in.devices) {
    const MemorySeries series = memory_series(in, dev);
    for (std::size_t k = 0; k < dev.samples.size(); ++k) {
      const MemorySample& x = dev.samples[k];
      const bool in_step = series.step[k] != kNoIndex;
      static const MemorySite kNone;
      const MemorySite& site = x.site < in.sites.size() ? in.sites[x.site] : kNone;
      TPROF_TRY(m.i64(x.source)
                    .i64(dev.device_type)
                    .i64(dev.device_id)
                    .i64(x.ts_ns)
                    .i64(x.bytes)
                    .i64(series.allocated[k])
                    .i64(series.totals_recorded ? 1 : 0)
                    .opt(x.reserved, x.reserved != kMemoryAbsent)
                    .opt(in_step ? in.steps[series.step[k]].step : 0, in_step)
                    .text(site.op)
                    .text(site.caller)
                    .text(site.stack)
                    .step());
      ++rows;
    }
  }
  count("memory_timeline", rows);
  return {};
}

// The critical path of each step (of the one window of a trace without
// steps: step NULL), segment by segment, and its time by bound type.
Status Writer::critical_path(const Derived& d) {
  std::uint64_t segments = 0, shares = 0;
  if (d.causal) {
    TPROF_TRY_ASSIGN(Stmt seg, db_->prepare(
                                   "INSERT INTO critical_path (step, seq, event_id, name, edge_type, bound_type, "
                                   "start_ns, dur_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    TPROF_TRY_ASSIGN(Stmt sh, db_->prepare(
                                  "INSERT INTO critical_path_shares (step, bound_type, ns, share) VALUES (?, ?, ?, ?)"));
    const CausalResult& r = *d.causal;
    for (const StepTime& st : r.steps) {
      const bool numbered = r.has_steps && st.step >= 0;
      const CriticalPath& p = st.path;
      std::int64_t seq = 0;
      for (const PathSegment& x : p.segments) {
        seg.opt(st.step, numbered).i64(seq++).ref(x.event);
        if (x.event != kNoIndex) {
          seg.text(t_.name(x.event));
        } else {
          seg.null();
        }
        TPROF_TRY(seg.text(edge_type_name(x.type)).text(bound_type_name(x.bound)).i64(x.start_ns).i64(x.dur_ns).step());
        ++segments;
      }
      const std::int64_t length = p.length_ns();
      auto put = [&](std::string_view bound, std::int64_t ns) -> Status {
        if (ns <= 0) return {};
        sh.opt(st.step, numbered).text(bound).i64(ns);
        if (length > 0) {
          sh.real(static_cast<double>(ns) / static_cast<double>(length));
        } else {
          sh.null();
        }
        ++shares;
        return sh.step();
      };
      for (int b = 0; b < static_cast<int>(BoundType::kCount_); ++b) {
        TPROF_TRY(put(bound_type_name(static_cast<BoundType>(b)), p.bound_ns[static_cast<std::size_t>(b)]));
      }
      TPROF_TRY(put("unexplained", p.unexplained_ns));
    }
  }
  count("critical_path", segments);
  count("critical_path_shares", shares);
  return {};
}

// ---- streaming (--stream) --------------------------------------------------------

// The scratch database a streamed export works in, attached as `work`
// beside the output and removed with it: the events as read (the B/E
// pairs' durations filled in after the read, ts as written, a flow's raw
// id), then what the nesting sweep finds for them.
constexpr const char* kWorkSchema = R"sql(
CREATE TABLE work.raw_events (id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL, cat_id INTEGER NOT NULL, lane_id INTEGER NOT NULL, phase TEXT NOT NULL,
  kind TEXT NOT NULL, flags INTEGER NOT NULL, external_id INTEGER, correlation INTEGER, flow_id INTEGER NOT NULL,
  src_offset INTEGER NOT NULL);
CREATE TABLE work.nest (id INTEGER PRIMARY KEY, parent_id INTEGER, self_ns INTEGER);
CREATE TABLE work.next_slice (id INTEGER PRIMARY KEY, event_id INTEGER NOT NULL);
)sql";

// Writes each batch the reader merges: its events to work.raw_events, its
// args and memory records to their tables (ids ascend, so every insert
// appends).
class RowStream : public EventStream {
 public:
  RowStream(Db* db, const SqliteExportOptions& o) : db_(db), o_(o) {}

  Status prepare() {
    auto bind_event = [this](Stmt& s, std::uint32_t e) {
      const EventColumns& ev = b_->trace.events;
      s.i64(static_cast<std::int64_t>(b_->first_id + (e - b_->first)))
          .i64(ev.ts_ns[e])
          .i64(ev.dur_ns[e])
          .i64(ev.name[e])
          .i64(ev.cat[e])
          .i64(ev.lane[e])
          .text(phase_text(ev.phase[e]))
          .text(event_kind_name(ev.kind[e]))
          .i64(ev.flags[e])
          .opt(ev.external_id[e], ev.external_id[e] >= 0)
          .opt(ev.correlation[e], ev.correlation[e] >= 0)
          .i64(ev.flow_id[e])
          .i64(static_cast<std::int64_t>(ev.src_offset[e]));
    };
    TPROF_TRY_ASSIGN(auto events, batch_insert(db_,
                                               "work.raw_events (id, ts_ns, dur_ns, name_id, cat_id, lane_id, phase, "
                                               "kind, flags, external_id, correlation, flow_id, src_offset)",
                                               13, Bind(bind_event)));
    events_.emplace(std::move(events));
    auto bind_args = [this](Stmt& s, std::uint32_t e) {
      s.i64(static_cast<std::int64_t>(b_->first_id + (e - b_->first))).text(b_->args(e));
    };
    TPROF_TRY_ASSIGN(auto args, batch_insert(db_, "args (event_id, json)", 2, Bind(bind_args)));
    args_.emplace(std::move(args));
    TPROF_TRY_ASSIGN(Stmt memory, db_->prepare(kInsertMemory));
    memory_.emplace(std::move(memory));
    return {};
  }

  Status batch(const StreamedBatch& b) override {
    // Every row of the batch is written before it returns: the views it
    // binds (args in a .gz window) are valid during the call only.
    b_ = &b;
    for (std::uint32_t e = b.first; e < b.first + b.count; ++e) TPROF_TRY(events_->add(e));
    TPROF_TRY(events_->finish());
    if (o_.args) {
      for (std::uint32_t e = b.first; e < b.first + b.count; ++e) {
        if (b.args(e).empty()) continue;
        TPROF_TRY(args_->add(e));
        ++args_rows_;
      }
      TPROF_TRY(args_->finish());
    }
    for (const MemoryRecord& m : b.memory) TPROF_TRY(insert_memory(*memory_, m));
    memory_rows_ += b.memory.size();
    b_ = nullptr;
    return {};
  }

  std::uint64_t args_rows() const { return args_rows_; }
  std::uint64_t memory_rows() const { return memory_rows_; }
  // Finalizes the statements (the database closes only without them).
  void finish() {
    events_.reset();
    args_.reset();
    memory_.reset();
  }

 private:
  using Bind = std::function<void(Stmt&, std::uint32_t)>;
  Db* db_;
  const SqliteExportOptions& o_;
  const StreamedBatch* b_ = nullptr;
  std::optional<BatchInsert<Bind>> events_, args_;
  std::optional<Stmt> memory_;
  std::uint64_t args_rows_ = 0, memory_rows_ = 0;
};

// The nesting of every event, out of core: SQLite sorts the events per lane
// by (ts, -end, id), as build_nesting does in memory, and one sweep keeps
// the open complete events of each lane on two stacks (python_function
// events nest among themselves only), so memory holds a lane's open events,
// never the trace. At one ts the complete events come first, then the
// instants and flow events: a slice starting at their ts encloses them.
// Results go to work.nest (parent_id and self_ns of complete events; the
// enclosing slice of instants and flow events) and work.next_slice (the
// next slice of a flow end without "bp": "e": the first complete event
// starting at or after it), both appended to in sweep order and indexed
// once at the end (a B-tree insert per row in lane order would thrash the
// page cache on a large trace).
Status sweep_nesting(Db* db) {
  TPROF_TRY_ASSIGN(Stmt q, db->prepare(R"sql(
SELECT id, lane_id, ts_ns, dur_ns, phase = 'X' AS slice, kind = 'python_function' AS py,
       phase = 'f' AND (flags & 8) = 0 AS to_next
FROM work.raw_events WHERE phase IN ('X', 'i', 's', 't', 'f')
ORDER BY lane_id, ts_ns, phase != 'X', ts_ns + dur_ns DESC, id)sql"));
  TPROF_TRY_ASSIGN(Stmt nest, db->prepare("INSERT INTO work.nest (id, parent_id, self_ns) VALUES (?, ?, ?)"));
  TPROF_TRY_ASSIGN(Stmt next, db->prepare("INSERT INTO work.next_slice (id, event_id) VALUES (?, ?)"));
  struct Open {
    std::int64_t id, end, dur, children, parent;
  };
  std::array<std::vector<Open>, 2> open;  // [0] other complete events, [1] python_function
  std::vector<std::int64_t> waiting;      // flow ends awaiting their next slice
  // The lane's latest complete (not python) event's ts, and the first one
  // to start then: the next slice of a flow end at that ts.
  std::int64_t slice_ts = 0, first_at_ts = -1;
  auto close = [&](const Open& o) {
    return nest.i64(o.id).opt(o.parent, o.parent >= 0).i64(sat_sub(o.dur, o.children)).step();
  };
  auto close_lane = [&]() -> Status {
    for (auto& stack : open) {
      for (; !stack.empty(); stack.pop_back()) TPROF_TRY(close(stack.back()));
    }
    waiting.clear();  // no slice after them: NULL
    first_at_ts = -1;
    return {};
  };
  std::int64_t lane = -1;
  for (;;) {
    TPROF_TRY_ASSIGN(bool more, q.row());
    if (!more) break;
    const std::int64_t id = q.col(0), ts = q.col(2), dur = q.col(3);
    if (q.col(1) != lane) {
      TPROF_TRY(close_lane());
      lane = q.col(1);
    }
    if (q.col(4) != 0) {
      // prof.events()'s tree (EventListBuilder::build_trees): pop what ended
      // before this event starts or ends before it does.
      const bool py = q.col(5) != 0;
      auto& stack = open[py ? 1 : 0];
      const std::int64_t end = ts + dur;
      while (!stack.empty() && !(ts < stack.back().end && end <= stack.back().end)) {
        TPROF_TRY(close(stack.back()));
        stack.pop_back();
      }
      std::int64_t parent = -1;
      if (!stack.empty()) {
        parent = stack.back().id;
        sat_acc(stack.back().children, dur);
      }
      stack.push_back({id, end, dur, 0, parent});
      if (!py) {
        if (first_at_ts < 0 || ts != slice_ts) {
          slice_ts = ts;
          first_at_ts = id;
        }
        for (std::int64_t f : waiting) TPROF_TRY(next.i64(f).i64(id).step());
        waiting.clear();
      }
      continue;
    }
    // The innermost open slice that has not ended before ts: the stack is
    // the last slice's chain of parents.
    std::int64_t parent = -1;
    for (std::size_t i = open[0].size(); i-- > 0;) {
      if (open[0][i].end >= ts) {
        parent = open[0][i].id;
        break;
      }
    }
    TPROF_TRY(nest.i64(id).opt(parent, parent >= 0).null().step());
    if (q.col(6) != 0) {
      if (first_at_ts >= 0 && slice_ts == ts) {
        TPROF_TRY(next.i64(id).i64(first_at_ts).step());
      } else {
        waiting.push_back(id);
      }
    }
  }
  return close_lane();
}

// The flows table from work.raw_events and the sweep's results, grouped by
// (cat, id) in file order as Writer::flows does.
Result<std::uint64_t> stream_flows(Db* db) {
  TPROF_TRY_ASSIGN(Stmt q, db->prepare(R"sql(
SELECT r.id, r.phase = 's', r.cat_id, r.flow_id, (r.flags & 8) != 0, n.parent_id, x.event_id
FROM work.raw_events r LEFT JOIN work.nest n ON n.id = r.id LEFT JOIN work.next_slice x ON x.id = r.id
WHERE r.phase IN ('s', 'f')
ORDER BY r.cat_id, r.flow_id, r.id)sql"));
  TPROF_TRY_ASSIGN(Stmt s, db->prepare("INSERT INTO flows (id, flow_id, cat_id, start_event, end_event, from_event, "
                                       "to_event) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  struct Flow {
    std::int64_t id = -1, bound = -1;  // the event; the slice it binds to
  };
  std::int64_t row = 0, cat = 0, flow_id = 0;
  auto put = [&](const Flow& start, const Flow& end) {
    return s.i64(row++)
        .i64(flow_id)
        .i64(cat)
        .opt(start.id, start.id >= 0)
        .opt(end.id, end.id >= 0)
        .opt(start.bound, start.bound >= 0)
        .opt(end.bound, end.bound >= 0)
        .step();
  };
  std::vector<Flow> starts, ends;
  bool any = false;
  for (;;) {
    TPROF_TRY_ASSIGN(bool more, q.row());
    if (!more || !any || q.col(2) != cat || q.col(3) != flow_id) {
      if (any) TPROF_TRY(pair_flows(starts, ends, Flow{}, put));
      if (!more) break;
      starts.clear();
      ends.clear();
      cat = q.col(2);
      flow_id = q.col(3);
      any = true;
    }
    Flow f;
    f.id = q.col(0);
    const bool start = q.col(1) != 0;
    // A start binds to its enclosing slice, an end with "bp": "e" too, any
    // other end to the next slice.
    const int from = start || q.col(4) != 0 ? 5 : 6;
    f.bound = q.is_null(from) ? -1 : q.col(from);
    (start ? starts : ends).push_back(f);
  }
  return static_cast<std::uint64_t>(row);
}

// The tables in schema order: how SqliteExportStats lists them.
constexpr std::array<const char*, 19> kTableOrder = {
    "meta",        "top_level",         "strings", "processes", "lanes",        "events",         "args",
    "flows",       "memory",            "diagnostics", "diagnostic_counts", "steps", "kernels", "kernel_names",
    "step_breakdown", "key_averages", "critical_path", "critical_path_shares", "memory_timeline"};

void order_stats(SqliteExportStats* stats) {
  auto rank = [](const std::string& table) {
    return std::find(kTableOrder.begin(), kTableOrder.end(), table) - kTableOrder.begin();
  };
  std::stable_sort(stats->rows.begin(), stats->rows.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
}

// ---- files ---------------------------------------------------------------------
//
// SQLite opens its files by name, and a name in a directory that others may
// write can be made to mean another file between two opens: a co-user who
// swapped the scratch database (created O_EXCL, closed, then opened again
// by SQLite) for a link had root's database written into a root-only file,
// or tprof's tables added into a root-owned database (issue 36). So no
// file of the export is ever opened by a name after tprof created it: the
// databases are files tprof holds open (the output writer's temporary file,
// ScratchFiles), and SQLite reaches them through "tprof-fd", a VFS whose
// names are those descriptors ("tprof-fd:<n>", a dup of n). The files are
// this connection's alone, so its locks are no-ops. SQLite's own temporary
// files (the sorts' spill: no name) go to the default VFS, which creates
// them O_EXCL|O_NOFOLLOW under random names and unlinks them at once; a
// journal is never opened (journal_mode = OFF: the name is refused).

constexpr std::string_view kFdPrefix = "tprof-fd:";

std::string fd_name(int fd) { return std::string(kFdPrefix) + std::to_string(fd); }

struct FdFile {
  sqlite3_file base;
  int fd;
};

int fd_of(sqlite3_file* f) { return reinterpret_cast<FdFile*>(f)->fd; }

int fd_close(sqlite3_file* f) {
  ::close(fd_of(f));
  return SQLITE_OK;
}

int fd_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 offset) {
  auto* p = static_cast<char*>(buf);
  int got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_of(f), p + got, static_cast<std::size_t>(n - got), offset + got);
    if (r > 0) {
      got += static_cast<int>(r);
    } else if (r == 0) {
      break;
    } else if (errno != EINTR) {
      return SQLITE_IOERR_READ;
    }
  }
  if (got == n) return SQLITE_OK;
  std::memset(p + got, 0, static_cast<std::size_t>(n - got));  // SQLite requires the rest zeroed
  return SQLITE_IOERR_SHORT_READ;
}

int fd_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 offset) {
  const auto* p = static_cast<const char*>(buf);
  int put = 0;
  while (put < n) {
    const ssize_t w = ::pwrite(fd_of(f), p + put, static_cast<std::size_t>(n - put), offset + put);
    if (w > 0) {
      put += static_cast<int>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      // As SQLite's own VFS: a full disk is SQLITE_FULL; the errno stays
      // for sqlite3_system_errno() (the message's reason).
      if (w == 0) errno = ENOSPC;
      return errno == ENOSPC || errno == EDQUOT ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    }
  }
  return SQLITE_OK;
}

int fd_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return ::ftruncate(fd_of(f), size) == 0 ? SQLITE_OK : SQLITE_IOERR_TRUNCATE;
}

int fd_sync(sqlite3_file* f, int) { return ::fdatasync(fd_of(f)) == 0 ? SQLITE_OK : SQLITE_IOERR_FSYNC; }

int fd_size(sqlite3_file* f, sqlite3_int64* size) {
  struct stat st {};
  if (::fstat(fd_of(f), &st) != 0) return SQLITE_IOERR_FSTAT;
  *size = st.st_size;
  return SQLITE_OK;
}

int fd_lock(sqlite3_file*, int) { return SQLITE_OK; }
int fd_check_reserved(sqlite3_file*, int* out) {
  *out = 0;
  return SQLITE_OK;
}
int fd_file_control(sqlite3_file*, int, void*) { return SQLITE_NOTFOUND; }
int fd_sector_size(sqlite3_file*) { return 4096; }  // SQLite's unix VFS's default
int fd_device_characteristics(sqlite3_file*) { return SQLITE_IOCAP_POWERSAFE_OVERWRITE; }  // and its flag

constexpr sqlite3_io_methods kFdMethods = {
    1,       fd_close,         fd_read,        fd_write, fd_truncate, fd_sync, fd_size, fd_lock, fd_lock,
    fd_check_reserved, fd_file_control, fd_sector_size, fd_device_characteristics,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

sqlite3_vfs* base_vfs(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// The descriptor a "tprof-fd:<n>" name holds, or -1.
int parse_fd_name(const char* name) {
  const std::string_view v(name);
  if (!v.starts_with(kFdPrefix)) return -1;
  const std::string_view digits = v.substr(kFdPrefix.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return -1;
  }
  return std::stoi(std::string(digits));
}

int vfs_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  file->pMethods = nullptr;
  if (name == nullptr) return base_vfs(vfs)->xOpen(base_vfs(vfs), name, file, flags, out_flags);
  // Only databases (main and attached) have names here: a journal, a
  // WAL or a super-journal would be opened by a name, and is refused.
  const int n = parse_fd_name(name);
  if (n < 0 || (flags & SQLITE_OPEN_MAIN_DB) == 0) return SQLITE_CANTOPEN;
  const int fd = ::fcntl(n, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return SQLITE_CANTOPEN;
  auto* f = reinterpret_cast<FdFile*>(file);
  f->fd = fd;
  f->base.pMethods = &kFdMethods;
  if (out_flags != nullptr) *out_flags = flags;
  return SQLITE_OK;
}

// There is nothing by a name to delete, or to find: SQLite asks for hot
// journals and WAL files, which never exist here.
int vfs_delete(sqlite3_vfs*, const char*, int) { return SQLITE_OK; }
int vfs_access(sqlite3_vfs*, const char*, int, int* out) {
  *out = 0;
  return SQLITE_OK;
}
int vfs_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  sqlite3_snprintf(n, out, "%s", name);
  return SQLITE_OK;
}
void* vfs_dlopen(sqlite3_vfs* vfs, const char* name) { return base_vfs(vfs)->xDlOpen(base_vfs(vfs), name); }
void vfs_dlerror(sqlite3_vfs* vfs, int n, char* out) { base_vfs(vfs)->xDlError(base_vfs(vfs), n, out); }
void (*vfs_dlsym(sqlite3_vfs* vfs, void* h, const char* sym))(void) {
  return base_vfs(vfs)->xDlSym(base_vfs(vfs), h, sym);
}
void vfs_dlclose(sqlite3_vfs* vfs, void* h) { base_vfs(vfs)->xDlClose(base_vfs(vfs), h); }
int vfs_randomness(sqlite3_vfs* vfs, int n, char* out) { return base_vfs(vfs)->xRandomness(base_vfs(vfs), n, out); }
int vfs_sleep(sqlite3_vfs* vfs, int us) { return base_vfs(vfs)->xSleep(base_vfs(vfs), us); }
int vfs_current_time(sqlite3_vfs* vfs, double* t) { return base_vfs(vfs)->xCurrentTime(base_vfs(vfs), t); }
int vfs_last_error(sqlite3_vfs* vfs, int n, char* out) {
  return base_vfs(vfs)->xGetLastError(base_vfs(vfs), n, out);
}
int vfs_current_time_int64(sqlite3_vfs* vfs, sqlite3_int64* t) {
  sqlite3_vfs* base = base_vfs(vfs);
  if (base->iVersion >= 2 && base->xCurrentTimeInt64 != nullptr) return base->xCurrentTimeInt64(base, t);
  double days = 0;
  const int rc = base->xCurrentTime(base, &days);
  *t = static_cast<sqlite3_int64>(days * 86400000.0);
  return rc;
}

const char* fd_vfs() {
  static const char* const name = [] {
    sqlite3_initialize();
    static sqlite3_vfs vfs{};
    sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
    vfs.iVersion = 2;
    vfs.szOsFile = std::max(static_cast<int>(sizeof(FdFile)), base->szOsFile);
    vfs.mxPathname = base->mxPathname;
    vfs.zName = "tprof-fd";
    vfs.pAppData = base;
    vfs.xOpen = vfs_open;
    vfs.xDelete = vfs_delete;
    vfs.xAccess = vfs_access;
    vfs.xFullPathname = vfs_full_pathname;
    vfs.xDlOpen = vfs_dlopen;
    vfs.xDlError = vfs_dlerror;
    vfs.xDlSym = vfs_dlsym;
    vfs.xDlClose = vfs_dlclose;
    vfs.xRandomness = vfs_randomness;
    vfs.xSleep = vfs_sleep;
    vfs.xCurrentTime = vfs_current_time;
    vfs.xGetLastError = vfs_last_error;
    vfs.xCurrentTimeInt64 = vfs_current_time_int64;
    sqlite3_vfs_register(&vfs, 0);
    return vfs.zName;
  }();
  return name;
}

// The output's file name ("dir/name" -> "name"), for the scratch files' names.
std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Copies the finished database (from its descriptor) into the output writer.
Status copy_into(int from, AtomicFileWriter* to, const std::string& path) {
  std::unique_ptr<char[]> buf(new char[8u << 20]);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(from, buf.get(), 8u << 20, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(ErrorCode::kIo, std::string("cannot read the finished database: ") + std::strerror(errno), path);
    if (n == 0) return {};
    offset += n;
    TPROF_TRY(to->write(std::string_view(buf.get(), static_cast<std::size_t>(n))));
  }
}

}  // namespace

namespace {

// A new database for a bulk load in the empty file `fd`: large pages and
// no journal (the file is thrown away on any error, so nothing needs
// rolling back), one transaction, the schema; `work_fd` (>= 0) attached as
// the streamed export's work database, with its schema.
Status begin_database(Db* db, int fd, int work_fd = -1) {
  TPROF_TRY(db->open(fd));
  // The page size must be set before the first table.
  TPROF_TRY(db->exec("PRAGMA page_size = 16384; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                     "PRAGMA locking_mode = EXCLUSIVE; PRAGMA temp_store = FILE; PRAGMA cache_size = -16384;"));
  const std::string versions = "PRAGMA application_id = " + std::to_string(kSqliteApplicationId) +
                               "; PRAGMA user_version = " + std::to_string(kSqliteSchemaVersion) + ";";
  TPROF_TRY(db->exec(versions.c_str()));
  if (work_fd >= 0) {
    {
      const std::string work = fd_name(work_fd);
      TPROF_TRY_ASSIGN(Stmt attach, db->prepare("ATTACH ? AS work"));
      TPROF_TRY(attach.text(work).step());
    }
    TPROF_TRY(db->exec("PRAGMA work.page_size = 16384; PRAGMA work.journal_mode = OFF; PRAGMA work.synchronous = OFF;"
                       "PRAGMA work.cache_size = -16384;"));
  }
  TPROF_TRY(db->exec("BEGIN"));
  TPROF_TRY(db->exec(kSchema));
  return work_fd < 0 ? Status() : db->exec(kWorkSchema);
}

// The indexes (after the rows: one sort each), the commit, statistics for
// the query planner over the indexes just built.
Status finish_database(Db* db) {
  TPROF_TRY(db->exec(kIndexes));
  TPROF_TRY(db->exec("COMMIT"));
  TPROF_TRY(db->exec("PRAGMA analysis_limit = 1000; ANALYZE main;"));
  return db->close();
}

// Builds a database through `build(db_fd, work)` and puts it at `path`
// whole, as write_sqlite says. For a file (new or replaced) the database is
// built in the output writer's own temporary file, then committed (renamed
// into place with the replaced file's owner and mode); for a descriptor,
// device or FIFO, in a ScratchFile in $TMPDIR, then copied through the
// writer. `work(name)` makes a scratch file beside the database (the
// streamed export's work database). Every file is removed on any error.
template <typename Build>
Result<SqliteExportStats> write_database(const std::string& path, Build&& build) {
  // The writer first: an output that cannot be written fails before the work.
  TPROF_TRY_ASSIGN(std::unique_ptr<AtomicFileWriter> out, AtomicFileWriter::create(path));
  std::optional<ScratchFile> scratch;  // for an output written straight through
  int db_fd = out->temporary_fd();
  if (db_fd < 0) {
    TPROF_TRY_ASSIGN(ScratchFile s, out->create_scratch("tprof-export.db"));
    scratch.emplace(std::move(s));
    db_fd = scratch->fd();
  }
  const std::string name = db_fd == out->temporary_fd() ? base_name(path) : std::string("tprof-export.db");
  auto work = [&]() { return out->create_scratch(name + ".work"); };
  TPROF_TRY_ASSIGN(SqliteExportStats stats, build(db_fd, work));
  if (scratch) TPROF_TRY(copy_into(scratch->fd(), out.get(), path));
  TPROF_TRY(out->commit());
  return stats;
}

// The database into an empty file `fd` (its errors name `path`).
Result<SqliteExportStats> export_into(const Trace& trace, int fd, const std::string& path,
                                      const SqliteExportOptions& options) {
  // The derived views are computed meanwhile on a second thread; they only
  // read the trace.
  std::future<Derived> derived = std::async(std::launch::async, derive, std::cref(trace));
  // A failure below returns before get(): the future's destructor waits for
  // the thread, so the trace outlives it.
  Db db(path);
  TPROF_TRY(begin_database(&db, fd));
  Writer w(trace, &db, options);
  {
    const Nesting nest = build_nesting(trace);
    TPROF_TRY(w.base_tables(nest));
  }
  w.progress("derived tables", 0, 1);
  TPROF_TRY(w.derived_tables(derived.get()));
  w.progress("derived tables", 1, 1);
  order_stats(&w.stats());
  w.progress("indexes", 0, 1);
  TPROF_TRY(finish_database(&db));
  w.progress("indexes", 1, 1);
  return std::move(w.stats());
}

// An existing file for the test entry points below: opened once, never
// following a link (the export then uses the descriptor only).
Result<int> open_db_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return Error(ErrorCode::kIo, std::string("cannot open the database: ") + std::strerror(errno), path);
  return fd;
}

// The streamed export into the empty files `fd` and `work_fd` (its
// database errors name `path`).
Result<SqliteExportStats> export_streamed_into(const std::string& trace_path, const ReadOptions& read, int fd,
                                               int work_fd, const std::string& path,
                                               const SqliteExportOptions& options,
                                               const std::function<void(const Trace&)>& on_read) {
  Db db(path);
  TPROF_TRY(begin_database(&db, fd, work_fd));
  RowStream rows(&db, options);
  TPROF_TRY(rows.prepare());
  TPROF_TRY_ASSIGN(StreamedTrace read_back, read_trace_streamed(trace_path, read, &rows));
  rows.finish();
  const StreamedTrace& st = read_back;
  if (on_read) on_read(st.trace);
  // The derived views need every event: computed meanwhile on a second
  // thread when the model kept them all (see write_sqlite above).
  std::future<Derived> derived;
  if (st.whole) derived = std::async(std::launch::async, derive, std::cref(st.trace));

  {
    TPROF_TRY_ASSIGN(Stmt joined, db.prepare("UPDATE work.raw_events SET dur_ns = ? WHERE id = ?"));
    for (const auto& [id, dur] : st.joined) TPROF_TRY(joined.i64(dur).i64(id).step());
  }
  // The phases after the read, each a step of its own (SQL statements that
  // report nothing as they go).
  auto phase = [&](std::string_view name, std::uint64_t done) {
    if (options.progress) options.progress(name, done, 1);
  };
  phase("nesting", 0);
  TPROF_TRY(sweep_nesting(&db));
  phase("nesting", 1);
  phase("events", 0);
  {
    TPROF_TRY_ASSIGN(Stmt events, db.prepare(R"sql(
INSERT INTO events (id, ts_ns, dur_ns, name_id, cat_id, lane_id, phase, kind, flags, external_id, correlation,
                    flow_id, parent_id, self_ns, src_offset)
SELECT r.id, r.ts_ns + ?, r.dur_ns, r.name_id, r.cat_id, r.lane_id, r.phase, r.kind, r.flags, r.external_id,
       r.correlation, CASE WHEN r.flow_id >= 0 THEN r.flow_id END, n.parent_id, n.self_ns, r.src_offset
FROM work.raw_events r LEFT JOIN work.nest n ON n.id = r.id
ORDER BY r.id)sql"));
    TPROF_TRY(events.i64(st.ts_shift).step());
  }
  TPROF_TRY_ASSIGN(const std::uint64_t flows, stream_flows(&db));
  phase("events", 1);

  Totals totals;
  totals.events = st.events;
  {
    // The first event start and the last event end (Trace::start_ns and
    // end_ns), in one scan of the events; 0 without events.
    TPROF_TRY_ASSIGN(Stmt span, db.prepare("SELECT min(ts_ns), max(ts_ns + dur_ns) FROM events WHERE phase != 'M'"));
    TPROF_TRY_ASSIGN(const bool row, span.row());
    if (row && !span.is_null(0)) {
      totals.start_ns = span.col(0);
      totals.end_ns = span.col(1);
    }
  }
  totals.stream = true;
  totals.derived = st.whole;
  Writer w(st.trace, &db, options);
  TPROF_TRY(w.model_tables(totals));
  w.count("events", st.events);
  w.count("args", rows.args_rows());
  w.count("flows", flows);
  w.count("memory", rows.memory_rows());
  if (st.whole) {
    phase("derived tables", 0);
    TPROF_TRY(w.derived_tables(derived.get()));
    phase("derived tables", 1);
  } else {
    for (const char* table : {"steps", "kernels", "kernel_names", "step_breakdown", "key_averages", "critical_path",
                              "critical_path_shares", "memory_timeline"}) {
      w.count(table, 0);
    }
  }
  order_stats(&w.stats());
  phase("indexes", 0);
  TPROF_TRY(finish_database(&db));
  phase("indexes", 1);
  return std::move(w.stats());
}

}  // namespace

Result<SqliteExportStats> export_sqlite_file(const Trace& trace, const std::string& db_path,
                                             const SqliteExportOptions& options) {
  TPROF_TRY_ASSIGN(const int fd, open_db_file(db_path));
  Result<SqliteExportStats> stats = export_into(trace, fd, db_path, options);
  ::close(fd);
  return stats;
}

Result<SqliteExportStats> export_sqlite_streamed_file(const std::string& trace_path, const ReadOptions& read,
                                                      const std::string& db_path, const std::string& work_path,
                                                      const SqliteExportOptions& options,
                                                      const std::function<void(const Trace&)>& on_read) {
  TPROF_TRY_ASSIGN(const int fd, open_db_file(db_path));
  Result<int> work = open_db_file(work_path);
  if (!work) {
    ::close(fd);
    return work.error();
  }
  Result<SqliteExportStats> stats = export_streamed_into(trace_path, read, fd, *work, db_path, options, on_read);
  ::close(*work);
  ::close(fd);
  return stats;
}

Result<SqliteExportStats> write_sqlite(const Trace& trace, const std::string& path,
                                       const SqliteExportOptions& options) {
  return write_database(path, [&](int fd, auto&&) { return export_into(trace, fd, path, options); });
}

Result<SqliteExportStats> write_sqlite_streamed(const std::string& trace_path, const ReadOptions& read,
                                                const std::string& path, const SqliteExportOptions& options,
                                                const std::function<void(const Trace&)>& on_read) {
  return write_database(path, [&](int fd, auto&& make_work) -> Result<SqliteExportStats> {
    // The work database beside the database (the same file system, the
    // same clean-up on any error).
    TPROF_TRY_ASSIGN(ScratchFile work, make_work());
    return export_streamed_into(trace_path, read, fd, work.fd(), path, options, on_read);
  });
}

}  // namespace tprof::internal
