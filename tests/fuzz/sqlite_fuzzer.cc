// Fuzz target: `tprof export --sqlite` both ways, on the input as a trace
// file: in memory (read_trace, then write_sqlite) and streamed
// (write_sqlite_streamed, its read split into small batches on two threads).
//
// Properties, beyond "does not crash":
//   - the two ways agree on whether the trace reads; a trace that does not
//     read leaves no file behind either way;
//   - each database passes PRAGMA integrity_check;
//   - every TEXT value in every table is well-formed UTF-8 (Python's sqlite3
//     and pandas fail on the database otherwise; issue 36, defect 7);
//   - every args and top_level JSON value passes SQLite's json_valid (the
//     json_extract queries of docs/sql.md; issue 36, defect 8);
//   - the two databases hold the same rows in every table (meta's "stream"
//     aside), as docs/sql.md says;
//   - nothing but the two databases is left (no scratch or work file).
// The databases go to a directory of their own under /dev/shm (else the
// temp directory), removed at exit. Seeds: tests/fuzz/corpus and
// corpus_extreme (traces of tests/data and edge cases).
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "src/export/sqlite_export.h"
#include "tests/support/strict_json.h"
#include "tprof/read.h"

namespace fs = std::filesystem;

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "sqlite_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

[[noreturn]] void setup_failed(const std::string& what) {
  std::fprintf(stderr, "sqlite_fuzzer: set-up failed: %s\n", what.c_str());
  std::abort();
}

const std::string& workdir() {
  static const std::string dir = [] {
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                              ? fs::path("/dev/shm")
                              : fs::temp_directory_path();
    std::string pattern = (base / "tprof_sqlite_fuzz.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) setup_failed("mkdtemp under " + base.string());
    // Removed at exit; the path is copied to storage that outlives the
    // static destructors, which run before this handler.
    static char root[4096];
    std::snprintf(root, sizeof root, "%s", pattern.c_str());
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(root, ignored);
    });
    return pattern;
  }();
  return dir;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

class Db {
 public:
  explicit Db(const std::string& path) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      property_failed("the database does not open", path + ": " + sqlite3_errmsg(db_));
    }
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs `sql`, calling row(stmt) for each row.
  template <typename F>
  void each(const std::string& sql, F&& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      property_failed("a query fails", path_ + ": " + sql + ": " + sqlite3_errmsg(db_));
    }
    int rc = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) row(s);
    if (rc != SQLITE_DONE) property_failed("a query fails", path_ + ": " + sql + ": " + sqlite3_errmsg(db_));
    sqlite3_finalize(s);
  }

  std::vector<std::string> tables() {
    std::vector<std::string> out;
    each("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
         [&](sqlite3_stmt* s) { out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))); });
    return out;
  }

  // Every row of `table` in rowid order, values quoted by type; checks each
  // TEXT value's UTF-8 on the way.
  std::string dump(const std::string& table) {
    std::string out;
    each("SELECT * FROM \"" + table + "\" ORDER BY rowid", [&](sqlite3_stmt* s) {
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        switch (sqlite3_column_type(s, c)) {
          case SQLITE_NULL: out += "NULL"; break;
          case SQLITE_INTEGER: out += std::to_string(sqlite3_column_int64(s, c)); break;
          case SQLITE_FLOAT: out += std::to_string(sqlite3_column_double(s, c)); break;
          case SQLITE_TEXT: {
            const std::string_view text(reinterpret_cast<const char*>(sqlite3_column_text(s, c)),
                                        static_cast<std::size_t>(sqlite3_column_bytes(s, c)));
            std::size_t at = 0;
            if (!tprof::testing::is_utf8(text, &at)) {
              property_failed("a TEXT value is not UTF-8", path_ + ": " + table + "." + sqlite3_column_name(s, c) +
                                                               " at byte " + std::to_string(at));
            }
            out.push_back('\'');
            out.append(text);
            out.push_back('\'');
            break;
          }
          default: out += "blob:" + std::to_string(sqlite3_column_bytes(s, c)); break;
        }
        out += c + 1 < sqlite3_column_count(s) ? "|" : "\n";
      }
    });
    return out;
  }

  void check() {
    std::string verdict;
    each("PRAGMA integrity_check", [&](sqlite3_stmt* s) {
      verdict += reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      verdict += "\n";
    });
    if (verdict != "ok\n") property_failed("PRAGMA integrity_check fails", path_ + ": " + verdict);
    for (const char* sql : {"SELECT event_id, json FROM args WHERE NOT json_valid(json)",
                            "SELECT key, json FROM top_level WHERE NOT json_valid(json)"}) {
      each(sql, [&](sqlite3_stmt* s) {
        const auto* json = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
        property_failed("a JSON value fails json_valid",
                        path_ + ": " + sql + ": " + reinterpret_cast<const char*>(sqlite3_column_text(s, 0)) + ": " +
                            std::string(json == nullptr ? "" : json).substr(0, 300));
      });
    }
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& dir = workdir();
  const std::string trace_path = dir + "/t.json", memory = dir + "/m.db", streamed = dir + "/s.db";
  {
    std::ofstream f(trace_path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) setup_failed("write " + trace_path);
  }
  tprof::ReadOptions serial;
  serial.threads = 1;
  const tprof::Result<tprof::Trace> trace = tprof::read_trace(trace_path, serial);

  tprof::ReadOptions batches;  // a streamed read in many small batches
  batches.threads = 2;
  batches.min_parallel_bytes = 1;
  batches.chunk_bytes = 256;
  const auto by_stream = tprof::internal::write_sqlite_streamed(trace_path, batches, streamed, {.source = "t.json"});

  if (!trace) {
    if (by_stream) property_failed("a trace that does not read exports streamed", trace.error().to_string());
    const std::vector<std::string> left = files_in(dir);
    if (left != std::vector<std::string>{"t.json"}) property_failed("a failed export leaves files", joined(left));
    return 0;
  }
  if (!by_stream) property_failed("a trace that reads does not export streamed", by_stream.error().to_string());
  const auto in_memory = tprof::internal::write_sqlite(*trace, memory, {.source = "t.json"});
  if (!in_memory) property_failed("a trace that reads does not export", in_memory.error().to_string());
  const std::vector<std::string> left = files_in(dir);
  if (left != std::vector<std::string>{"m.db", "s.db", "t.json"}) property_failed("an export leaves files", joined(left));

  {
    Db m(memory), s(streamed);
    m.check();
    s.check();
    const std::vector<std::string> tables = m.tables();
    if (s.tables() != tables) property_failed("the streamed database has other tables", joined(s.tables()));
    for (const std::string& table : tables) {
      std::string a = m.dump(table), b = s.dump(table);
      if (table == "meta") {  // "stream" says which way it was written
        const auto drop_stream = [](std::string* d) {
          const std::size_t at = d->find("'stream'|");
          if (at != std::string::npos) d->erase(at, d->find('\n', at) + 1 - at);
        };
        drop_stream(&a);
        drop_stream(&b);
      }
      if (a != b) property_failed("the streamed export holds other rows", table + ":\n" + a.substr(0, 2000) + "\nvs\n" +
                                                                               b.substr(0, 2000));
    }
  }
  std::error_code ec;
  fs::remove(memory, ec);
  fs::remove(streamed, ec);
  return 0;
}
