// The streamed SQLite export (write_sqlite_streamed, `tprof export --stream`)
// against the in-memory one on every trace tprof reads in tests/data and the
// fuzz corpora, and on a hand-made trace with what only a stream has to
// finish after the read (B/E pairs, "baseTimeNanoseconds" after the events,
// flow ends before their starts, python_function stacks): every table holds
// the same rows. Past the model limit (max_model_bytes) the trace's own
// tables still do, and the derived ones are empty and say so.
#include <gtest/gtest.h>
#include <iconv.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/export/sqlite_export.h"
#include "src/trace/torch_npu.h"
#include "tests/support/temp_dir.h"
#include "tests/support/sanitizers.h"
#include "tests/support/stream_options.h"
#include "tests/support/test_traces.h"
#include "tprof/read.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using TempDir = testing::TempDir;

// Every table's rows, as SQLite quotes them, in rowid order.
std::string dump(const std::string& path, const std::string& table, const std::string& where = "1") {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return out;
  }
  const std::string sql = "SELECT * FROM " + table + " WHERE " + where + " ORDER BY rowid";
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(s) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const auto* v = sqlite3_column_text(s, c);
        out += sqlite3_column_type(s, c) == SQLITE_NULL ? "NULL" : reinterpret_cast<const char*>(v);
        out += c + 1 < sqlite3_column_count(s) ? "|" : "\n";
      }
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

// The trace's own tables (the stream writes them past the model limit too).
const std::vector<std::string> kTraceTables = {"top_level", "strings", "processes", "lanes",
                                               "events",    "args",    "flows",     "memory"};
const std::vector<std::string> kDerivedTables = {"steps",        "kernels",       "kernel_names",
                                                 "step_breakdown", "key_averages", "critical_path",
                                                 "critical_path_shares"};

// Every trace under `dir` (of tests/data, or the fuzz corpora) that reads.
std::vector<std::string> traces(const std::string& dir) {
  std::vector<std::string> out;
  const std::string root =
      dir == "fuzz" ? std::string(TPROF_SOURCE_DIR) + "/tests/fuzz" : std::string(TPROF_TEST_DATA) + "/" + dir;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || testing::too_large_when_sanitized(e.path().string())) continue;
    // Only what reads: the corpora hold damage on purpose.
    if (read_trace(e.path().string()).has_value()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_same_export(const std::string& trace) {
  SCOPED_TRACE(trace);
  TempDir dir;
  const std::string memory = dir.path() + "/memory.db", streamed = dir.path() + "/streamed.db",
                    cut = dir.path() + "/cut.db";
  Result<Trace> t = read_trace(trace);
  ASSERT_TRUE(t.has_value());
  const auto in_memory = internal::write_sqlite(*t, memory, {.source = "t"});
  ASSERT_TRUE(in_memory.has_value());
  const auto whole =
      internal::write_sqlite_streamed(trace, testing::many_small_batches(), streamed, {.source = "t"});
  ASSERT_TRUE(whole.has_value()) << whole.error().to_string();
  EXPECT_EQ(whole->rows, in_memory->rows);
  // torch_npu's layout is mapped onto the model once the whole trace is
  // read (src/trace/torch_npu.h): --stream writes the lanes, events and
  // flows as the file has them (docs/sql.md); every other table agrees.
  const bool npu = internal::is_torch_npu(*t);
  const auto mapped = [&](const std::string& table) {
    return npu && (table == "lanes" || table == "events" || table == "flows");
  };
  for (const std::string& table : kTraceTables) {
    if (!mapped(table)) {
      EXPECT_EQ(dump(streamed, table), dump(memory, table)) << table;
    }
  }
  for (const std::string& table : kDerivedTables) EXPECT_EQ(dump(streamed, table), dump(memory, table)) << table;
  EXPECT_EQ(dump(streamed, "diagnostics"), dump(memory, "diagnostics"));
  EXPECT_EQ(dump(streamed, "diagnostic_counts"), dump(memory, "diagnostic_counts"));
  EXPECT_EQ(dump(streamed, "meta", "key != 'stream'"), dump(memory, "meta", "key != 'stream'"));
  EXPECT_EQ(dump(streamed, "meta", "key IN ('stream', 'derived')"), "stream|1\nderived|1\n");

  // A model limit of one byte: passed at the first batch with an event.
  const auto over = internal::write_sqlite_streamed(trace, testing::many_small_batches(1), cut, {.source = "t"});
  ASSERT_TRUE(over.has_value()) << over.error().to_string();
  for (const std::string& table : kTraceTables) {
    if (!mapped(table)) {
      EXPECT_EQ(dump(cut, table), dump(memory, table)) << table;
    }
  }
  if (t->events.size() == 0) {  // nothing to keep: the model fits
    EXPECT_EQ(dump(cut, "meta"), dump(streamed, "meta"));
    return;
  }
  for (const std::string& table : kDerivedTables) {
    EXPECT_EQ(dump(cut, table), "") << table;
    EXPECT_EQ(over->rows_of(table), 0u) << table;
  }
  // The whole-trace checks need the model; every other diagnostic is there.
  const std::string not_checks = "code NOT IN ('overlapping_kernels', 'unmatched_flow')";
  EXPECT_EQ(dump(cut, "diagnostics"), dump(memory, "diagnostics", not_checks));
  EXPECT_EQ(dump(cut, "diagnostic_counts"), dump(memory, "diagnostic_counts", not_checks));
  const std::string not_mode = "key NOT IN ('stream', 'derived')";
  EXPECT_EQ(dump(cut, "meta", not_mode), dump(memory, "meta", not_mode));
  EXPECT_EQ(dump(cut, "meta", "key IN ('stream', 'derived')"), "stream|1\nderived|0\n");
  EXPECT_EQ(over->rows_of("events"), whole->rows_of("events"));
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"cut.db", "memory.db", "streamed.db"}));
}

class EveryTrace : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryTrace, ExportsTheSameRows) {
  const std::vector<std::string> paths = traces(GetParam());
  ASSERT_GE(paths.size(), 1u);
  // Under a sanitizer (make test's unit run, 20-50x slower) every third
  // trace: the release run checks them all.
  const std::size_t stride = testing::kSanitized ? 3 : 1;
  for (std::size_t i = 0; i < paths.size(); i += stride) expect_same_export(paths[i]);
}

// Split by directory, so that ctest runs them side by side.
INSTANTIATE_TEST_SUITE_P(Dirs, EveryTrace,
                         ::testing::Values("gpu", "public", "torch-1.13", "kineto-public", "ranks", "fuzz"));

// What the reader finishes only after the last event, spread over many
// batches: B/E pairs (one never closed, one E without a B), the base time
// written after the events, a flow end (with and without "bp": "e") before
// its start, a string flow id, instants inside and between slices, a
// python_function stack beside the ops, and the M events last.
TEST(SqliteStream, WhatTheReadFinishesAfterTheEvents) {
  TempDir dir;
  const std::string trace = dir.path() + "/t.json";
  {
    std::ofstream f(trace);
    f << "{\"traceEvents\": [\n";
    bool first = true;
    auto ev = [&](const std::string& body) {
      f << (first ? "" : ",\n") << "{" << body << "}";
      first = false;
    };
    for (int i = 0; i < 300; ++i) {
      const std::string ts = std::to_string(i * 100);
      const std::string at = std::to_string(i * 100 + 5);
      ev("\"ph\": \"f\", \"id\": " + std::to_string(i) + ", \"pid\": 0, \"tid\": 7, \"ts\": " + at +
         ", \"cat\": \"ac2g\", \"name\": \"ac2g\"" + (i % 2 == 0 ? ", \"bp\": \"e\"" : ""));
      ev("\"ph\": \"B\", \"name\": \"step\", \"cat\": \"user_annotation\", \"pid\": 1, \"tid\": 1, \"ts\": " + ts);
      ev("\"ph\": \"X\", \"name\": \"aten::mm\", \"cat\": \"cpu_op\", \"pid\": 1, \"tid\": 1, \"ts\": " + ts +
         ", \"dur\": 50, \"args\": {\"External id\": " + std::to_string(i) + "}");
      ev("\"ph\": \"X\", \"name\": \"cudaLaunchKernel\", \"cat\": \"cuda_runtime\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         at + ", \"dur\": 10, \"args\": {\"correlation\": " + std::to_string(i) + "}");
      ev("\"ph\": \"s\", \"id\": " + std::to_string(i) + ", \"pid\": 1, \"tid\": 1, \"ts\": " + at +
         ", \"cat\": \"ac2g\", \"name\": \"ac2g\"");
      ev("\"ph\": \"i\", \"s\": \"t\", \"name\": \"mark\", \"pid\": 1, \"tid\": 1, \"ts\": " + at);
      ev("\"ph\": \"X\", \"name\": \"model.py(1): f\", \"cat\": \"python_function\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         ts + ", \"dur\": 90");
      ev("\"ph\": \"X\", \"name\": \"gemm\", \"cat\": \"kernel\", \"pid\": 0, \"tid\": 7, \"ts\": " + at +
         ", \"dur\": 30, \"args\": {\"correlation\": " + std::to_string(i) + ", \"External id\": " + std::to_string(i) +
         "}");
      ev("\"ph\": \"s\", \"id\": \"x" + std::to_string(i % 5) + "\", \"pid\": 1, \"tid\": 1, \"ts\": " + ts +
         ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"");
      // A flow end between slices: it binds to the next one.
      ev("\"ph\": \"f\", \"id\": \"x" + std::to_string(i % 5) + "\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         std::to_string(i * 100 + 60) + ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"");
      if (i != 150) ev("\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(i * 100 + 95));
    }
    ev("\"ph\": \"E\", \"pid\": 2, \"tid\": 2, \"ts\": 1");
    ev("\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"main\"}");
    ev("\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"GPU 0\"}");
    f << "\n], \"baseTimeNanoseconds\": 1700000000000000000}\n";
  }
  Result<Trace> t = read_trace(trace);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  ASSERT_TRUE(t->meta.base_time_ns.has_value());
  ASSERT_GT(t->diagnostics.count(DiagnosticCode::kUnmatchedBegin), 0u);
  ASSERT_GT(t->diagnostics.count(DiagnosticCode::kUnmatchedEnd), 0u);
  expect_same_export(trace);
  // The stream found what the model says: B/E pairs joined, times shifted,
  // flow ends bound, python functions nested apart from the ops.
  TempDir out;
  ASSERT_TRUE(
      internal::write_sqlite_streamed(trace, testing::many_small_batches(1), out.path() + "/t.db").has_value());
  const std::string db = out.path() + "/t.db";
  EXPECT_EQ(dump(db, "events", "name_id = (SELECT id FROM strings WHERE text = 'step') AND id < 20"),
            dump(db, "events", "phase = 'X' AND dur_ns = 95000 AND id < 20"));
  EXPECT_NE(dump(db, "flows", "to_event IS NOT NULL"), "");
}

// True when `s` is well-formed UTF-8, as glibc's iconv decodes it (an
// oracle apart from tprof's own: it refuses overlong forms, surrogates,
// code points past U+10FFFF and cut sequences).
bool iconv_valid_utf8(const std::string& s) {
  iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
  if (cd == reinterpret_cast<iconv_t>(-1)) {
    ADD_FAILURE() << "iconv_open";
    return false;
  }
  std::string in = s;
  std::string out(4 * s.size() + 4, '\0');
  char* ip = in.data();
  char* op = out.data();
  std::size_t il = in.size(), ol = out.size();
  const bool ok = iconv(cd, &ip, &il, &op, &ol) != static_cast<std::size_t>(-1) && il == 0;
  iconv_close(cd);
  return ok;
}

// Every TEXT value in every table of the database at `path`: (table.column,
// value) of those that are not valid UTF-8, and how many held U+FFFD.
struct TextCheck {
  std::vector<std::string> invalid;
  int replaced = 0;
  int values = 0;
};

TextCheck check_text(const std::string& path) {
  TextCheck out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << path;
    sqlite3_close(db);
    return out;
  }
  std::vector<std::string> tables;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW) tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  sqlite3_finalize(s);
  for (const std::string& table : tables) {
    sqlite3_prepare_v2(db, ("SELECT * FROM \"" + table + "\"").c_str(), -1, &s, nullptr);
    while (sqlite3_step(s) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        if (sqlite3_column_type(s, c) != SQLITE_TEXT) continue;
        const auto* p = static_cast<const char*>(sqlite3_column_blob(s, c));  // the bytes as stored
        const std::string v(p != nullptr ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, c)));
        ++out.values;
        if (v.find("\xef\xbf\xbd") != std::string::npos) ++out.replaced;
        if (!iconv_valid_utf8(v)) out.invalid.push_back(table + "." + sqlite3_column_name(s, c) + ": " + v);
      }
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return out;
}

// Names, categories, args, metadata, ids and top-level keys with bytes that
// are not UTF-8 (overlong forms, surrogates raw and escaped, cut sequences,
// 0xFF, past U+10FFFF) were stored as TEXT as they were, and Python's
// sqlite3 and pandas.read_sql failed on the database (issue 36: 449 of
// 6,838 hostile inputs). Now every TEXT value is valid UTF-8, each bad byte
// U+FFFD as the JSON writer writes it, in the in-memory and the streamed
// export alike (the same rows), and valid text is kept as it was.
TEST(SqliteStream, EveryTextValueIsValidUtf8) {
  TempDir dir;
  const std::string trace = dir.path() + "/bad_utf8.json";
  {
    std::ofstream f(trace, std::ios::binary);
    f << "{\"traceEvents\": [\n"
         "{\"ph\": \"X\", \"name\": \"overlong\xc0\xaf\", \"cat\": \"cpu_op\xff\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 1, \"dur\": 10, \"args\": {\"k\xff\": \"v\xed\xa0\x80\", \"External id\": 1}},\n"
         "{\"ph\": \"X\", \"name\": \"surrogate\xed\xa0\x80 escaped\\ud800\", \"cat\": \"kernel\", \"pid\": 0, "
         "\"tid\": 7, \"ts\": 2, \"dur\": 3, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 5}},\n"
         "{\"ph\": \"X\", \"name\": \"cut\xe2\x82\", \"cat\": \"cuda_runtime\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 2, \"dur\": 1, \"args\": {\"correlation\": 5}},\n"
         "{\"ph\": \"X\", \"name\": \"ProfilerStep#1\", \"cat\": \"user_annotation\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 0, \"dur\": 20},\n"
         "{\"ph\": \"X\", \"name\": \"past\xf4\x90\x80\x80 and \xff\xfe\", \"pid\": \"p\xff\", \"tid\": \"t\xc3\", "
         "\"ts\": 4, \"dur\": 1},\n"
         "{\"ph\": \"i\", \"s\": \"t\", \"name\": \"ok \xe2\x82\xac \xf0\x9f\x98\x80\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": 5},\n"
         "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"proc\xa0\"}},\n"
         "{\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": 1, \"args\": {\"labels\": \"lab\xe0\x80\x80\"}},\n"
         "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"thr\xf8\"}}\n"
         "], \"deviceProperties\": [{\"name\": \"GPU\xff\"}], \"key\xfe\": \"value\xc1\"}\n";
  }
  Result<Trace> t = read_trace(trace);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  expect_same_export(trace);  // the same rows in memory and streamed (with the model and without)

  const std::string memory = dir.path() + "/memory.db", streamed = dir.path() + "/streamed.db",
                    cut = dir.path() + "/cut.db";
  // The trace's path is stored too (meta.source).
  const std::string source = "t\xff\xc0.json";
  ASSERT_TRUE(internal::write_sqlite(*t, memory, {.source = source}).has_value());
  ASSERT_TRUE(
      internal::write_sqlite_streamed(trace, testing::many_small_batches(), streamed, {.source = source}).has_value());
  ASSERT_TRUE(
      internal::write_sqlite_streamed(trace, testing::many_small_batches(1), cut, {.source = source}).has_value());
  for (const std::string& db : {memory, streamed, cut}) {
    SCOPED_TRACE(db);
    const TextCheck c = check_text(db);
    EXPECT_EQ(c.invalid, std::vector<std::string>{});
    EXPECT_GE(c.replaced, 12) << "of " << c.values << " text values";
    EXPECT_EQ(dump(db, "meta", "key = 'source'"), "source|t\xef\xbf\xbd\xef\xbf\xbd.json\n");
    // One U+FFFD per byte that is not UTF-8; valid text (U+20AC, U+1F600) kept.
    EXPECT_EQ(dump(db, "strings", "text LIKE 'overlong%' OR text LIKE 'cut%' OR text LIKE 'ok %' OR text LIKE 'past%'"),
              dump(db, "strings", "text IN ('overlong\xef\xbf\xbd\xef\xbf\xbd', 'cut\xef\xbf\xbd\xef\xbf\xbd', "
                                  "'ok \xe2\x82\xac \xf0\x9f\x98\x80', 'past\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd and "
                                  "\xef\xbf\xbd\xef\xbf\xbd')"));
    EXPECT_NE(dump(db, "strings", "text = 'ok \xe2\x82\xac \xf0\x9f\x98\x80'"), "");
  }
}

// A trace that does not read: the trace's error (file, byte offset), and
// nothing left beside the output, neither the database nor its work file.
TEST(SqliteStream, ABadTraceLeavesNothing) {
  TempDir dir;
  const std::string trace = dir.path() + "/bad.json";
  {
    std::ofstream f(trace);
    f << "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 2}], !}";
  }
  const auto r = internal::write_sqlite_streamed(trace, {}, dir.path() + "/out.db");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().path(), trace);
  EXPECT_GT(r.error().byte_offset(), 0);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"bad.json"});
  const auto missing = internal::write_sqlite_streamed(dir.path() + "/none.json", {}, dir.path() + "/out.db");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(dir.files(), std::vector<std::string>{"bad.json"});
}

// A streamed export killed mid-way (SIGKILL, once the read is done: its
// database and its work database both exist) leaves them, under the names
// the output writer gives its temporary files; the next export into the
// directory removes them (their process is gone), as it does the
// writer's own.
TEST(SqliteStream, AKilledExportsFilesGoWithTheNextExportIntoTheDirectory) {
  TempDir dir;
  const std::string trace = std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)internal::write_sqlite_streamed(trace, testing::many_small_batches(1), dir.path() + "/killed.db", {},
                                          [](const Trace&) { raise(SIGKILL); });
    _exit(1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const std::vector<std::string> left = dir.files();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].rfind("killed.db.tmp." + std::to_string(child) + ".", 0), 0u) << left[0];
  EXPECT_EQ(left[1].rfind("killed.db.work.tmp." + std::to_string(child) + ".", 0), 0u) << left[1];
  ASSERT_TRUE(internal::write_sqlite_streamed(trace, {}, dir.path() + "/next.db").has_value());
  EXPECT_EQ(dir.files(), std::vector<std::string>{"next.db"});
}

}  // namespace
}  // namespace tprof
