// tprof export --sqlite, as a user runs it: the database it writes is opened
// by the system's `sqlite3` shell, and every example query of docs/sql.md
// returns the rows written under it (the doc is the golden file:
// TPROF_UPDATE_GOLDEN=1 rewrites its expected blocks, `git diff` is the
// review). The tables agree with `tprof steps/kernels/table --format json`
// on the same blog trace, and bad input exits 2 leaving nothing behind.
//
// Without `sqlite3` on PATH the tests that need it skip, saying so; a tprof
// built without SQLite must say that it was (exit 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/trace/json_value.h"
#include "tests/support/run_cli.h"
#include "tests/support/temp_dir.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using internal::JsonValue;
using testing::CliResult;
using testing::run_cli;

const std::string kTrace = std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json";
const std::string kDoc = std::string(TPROF_SOURCE_DIR) + "/docs/sql.md";

bool update_mode() {
  const char* env = std::getenv("TPROF_UPDATE_GOLDEN");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The sqlite3 shell on PATH, or "".
std::string find_sqlite3() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/sqlite3";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

using TempDir = testing::TempDir;

class SqlExport : public ::testing::Test {
 protected:
  void SetUp() override {
#if !TPROF_HAVE_SQLITE
    GTEST_SKIP() << "tprof was built without SQLite (libsqlite3-dev not found); "
                    "SqlExportWithoutSqlite.SaysItWasBuiltWithoutSqlite runs instead";
#endif
    sqlite3_ = find_sqlite3();
    ASSERT_FALSE(dir_.path().empty());
    db_ = dir_.path() + "/trace.db";
  }

  // Exports kTrace once per test (`extra`: more arguments, e.g. --stream);
  // fails the test when the export does.
  void export_trace(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"export", "--sqlite", kTrace, "-o", db_};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(TPROF_BIN, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(fs::exists(db_));
  }

  // Runs `sqlite3 -batch -header DB SQL`; its stdout.
  std::string query(const std::string& sql) {
    const CliResult r = run_cli(sqlite3_, {"-batch", "-bail", "-header", db_, sql});
    EXPECT_EQ(r.exit_code, 0) << sql << "\n" << r.err;
    return r.out;
  }
  // One value (first row, first column, no header).
  std::string value(const std::string& sql) {
    const CliResult r = run_cli(sqlite3_, {"-batch", "-bail", db_, sql});
    EXPECT_EQ(r.exit_code, 0) << sql << "\n" << r.err;
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  TempDir dir_;
  std::string sqlite3_;
  std::string db_;
};

#define NEED_SQLITE3()                                                                                \
  do {                                                                                                \
    if (sqlite3_.empty()) GTEST_SKIP() << "the sqlite3 shell is not installed (Debian: sqlite3, which " \
                                          "scripts/setup.sh --test installs); skipping";              \
  } while (0)

// ---- docs/sql.md's examples ---------------------------------------------------

struct Example {
  std::string name;
  std::string sql;
  std::size_t expected_begin = 0;  // byte range of the expected block's body in the doc
  std::size_t expected_end = 0;
  std::string expected;
};

// Every ```sql block whose first line is "-- example: NAME", with the
// ```text block that follows it.
std::vector<Example> parse_examples(const std::string& doc, std::vector<std::string>* errors) {
  std::vector<Example> out;
  std::size_t pos = 0;
  const std::string open_sql = "```sql\n-- example: ";
  while ((pos = doc.find(open_sql, pos)) != std::string::npos) {
    Example ex;
    const std::size_t name_begin = pos + open_sql.size();
    const std::size_t name_end = doc.find('\n', name_begin);
    ex.name = doc.substr(name_begin, name_end - name_begin);
    const std::size_t sql_end = doc.find("\n```\n", name_end);
    if (sql_end == std::string::npos) {
      errors->push_back(ex.name + ": the sql block does not end");
      break;
    }
    ex.sql = doc.substr(name_end + 1, sql_end - name_end);
    const std::size_t text = doc.find("```text\n", sql_end);
    const std::size_t next_sql = doc.find(open_sql, sql_end);
    if (text == std::string::npos || (next_sql != std::string::npos && next_sql < text)) {
      errors->push_back(ex.name + ": no ```text block with the expected output follows");
      pos = sql_end;
      continue;
    }
    ex.expected_begin = text + 8;
    const std::size_t close = doc.find("```\n", ex.expected_begin);
    if (close == std::string::npos) {
      errors->push_back(ex.name + ": the text block does not end");
      break;
    }
    ex.expected_end = close;
    ex.expected = doc.substr(ex.expected_begin, close - ex.expected_begin);
    out.push_back(ex);
    pos = close;
  }
  return out;
}

TEST_F(SqlExport, DocumentedQueriesReturnTheExpectedRows) {
  NEED_SQLITE3();
  export_trace();
  std::string doc = read_text(kDoc);
  std::vector<std::string> errors;
  std::vector<Example> examples = parse_examples(doc, &errors);
  for (const std::string& e : errors) ADD_FAILURE() << "docs/sql.md: " << e;
  // The cheatsheet's three questions are among them.
  std::vector<std::string> names;
  for (const Example& ex : examples) names.push_back(ex.name);
  for (const char* needed : {"top_kernels_per_step", "launch_delay_percentiles", "ops_self_cpu_over_kernel_time"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), needed), names.end()) << "docs/sql.md lacks example " << needed;
  }
  // Back to front, so that rewriting one block keeps the offsets of the others.
  bool changed = false;
  for (auto it = examples.rbegin(); it != examples.rend(); ++it) {
    const std::string got = query(it->sql);
    EXPECT_FALSE(got.empty()) << it->name << ": no rows (an example should show some)";
    if (got == it->expected) continue;
    if (update_mode()) {
      doc.replace(it->expected_begin, it->expected_end - it->expected_begin, got);
      changed = true;
    } else {
      ADD_FAILURE() << "docs/sql.md, example " << it->name << ": expected\n"
                    << it->expected << "got\n"
                    << got << "(TPROF_UPDATE_GOLDEN=1 rewrites the doc's expected blocks)";
    }
  }
  if (changed) std::ofstream(kDoc, std::ios::binary) << doc;
}

// --stream: the same answers to every documented query, from the rows
// written as the trace was read.
TEST_F(SqlExport, StreamedExportAnswersTheDocumentedQueriesTheSame) {
  NEED_SQLITE3();
  export_trace({"--stream"});
  EXPECT_EQ(value("SELECT value FROM meta WHERE key = 'stream'"), "1");
  EXPECT_EQ(value("SELECT value FROM meta WHERE key = 'derived'"), "1");
  std::vector<std::string> errors;
  const std::vector<Example> examples = parse_examples(read_text(kDoc), &errors);
  ASSERT_GE(examples.size(), 6u);
  for (const Example& ex : examples) EXPECT_EQ(query(ex.sql), ex.expected) << ex.name;
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"trace.db"});
}

// A plain file larger than the model limit is exported in a stream without
// being asked, saying so; past the limit the derived tables are empty and
// meta says why, and the trace's own rows are all there.
TEST_F(SqlExport, AFileLargerThanTheModelLimitStreamsByItself) {
  NEED_SQLITE3();
  const std::string big = dir_.path() + "/big.json";
  {
    std::ofstream f(big);
    f << "{\"traceEvents\": [\n";
    for (int i = 0; i < 30000; ++i) {
      f << (i == 0 ? "" : ",\n") << "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", "
        << "\"pid\": 1, \"tid\": 1, \"ts\": " << i * 10 << ", \"dur\": 5, \"args\": {\"External id\": " << i << "}}";
    }
    f << "\n]}\n";
  }
  ASSERT_GT(fs::file_size(big), std::uintmax_t{1} << 20);
  const CliResult r = run_cli(TPROF_BIN, {"--max-model-mib", "1", "export", "--sqlite", big, "-o", db_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("exporting it in a stream (--stream)"), std::string::npos) << r.err;
  EXPECT_EQ(value("SELECT value FROM meta WHERE key = 'stream'"), "1");
  EXPECT_EQ(value("SELECT value FROM meta WHERE key = 'derived'"), "0");
  EXPECT_EQ(value("SELECT COUNT(*) FROM events"), "30000");
  EXPECT_EQ(value("SELECT COUNT(*) FROM args"), "30000");
  EXPECT_EQ(value("SELECT COUNT(*) FROM kernels"), "0");
  EXPECT_EQ(dir_.files(), (std::vector<std::string>{"big.json", "trace.db"}));
  // -q: no note.
  const CliResult quiet = run_cli(TPROF_BIN, {"-q", "--max-model-mib", "1", "export", "--sqlite", big, "-o", db_});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

// Every table, view and column the database has is documented.
TEST_F(SqlExport, DocumentsEveryTableAndColumn) {
  NEED_SQLITE3();
  export_trace();
  const std::string doc = read_text(kDoc);
  const std::string listing = value(
      "SELECT m.name || ' ' || p.name FROM sqlite_schema m, pragma_table_info(m.name) p "
      "WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid");
  std::stringstream lines(listing);
  std::string line;
  int columns = 0;
  while (std::getline(lines, line)) {
    const std::string table = line.substr(0, line.find(' '));
    const std::string column = line.substr(line.find(' ') + 1);
    const std::size_t section = doc.find("### `" + table + "`");
    ASSERT_NE(section, std::string::npos) << "docs/sql.md has no section for " << table;
    const std::size_t next = doc.find("\n### ", section + 1);
    const std::string body = doc.substr(section, next == std::string::npos ? std::string::npos : next - section);
    EXPECT_NE(body.find("| `" + column + "` |"), std::string::npos)
        << "docs/sql.md, section " << table << ": column " << column << " is not documented";
    ++columns;
  }
  EXPECT_GT(columns, 100);
  // And the indexes.
  std::stringstream indexes(value("SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"));
  while (std::getline(indexes, line)) {
    EXPECT_NE(doc.find("| `" + line + "` |"), std::string::npos) << "docs/sql.md: index " << line << " is not listed";
  }
  // The version written is the one the document gives.
  EXPECT_EQ(value("PRAGMA user_version"), "2");
  EXPECT_NE(doc.find("version (" + value("PRAGMA user_version") + ")"), std::string::npos)
      << "docs/sql.md does not give the schema version " << value("PRAGMA user_version");
}

// ---- against the JSON views of the same trace --------------------------------

JsonValue json_of(const std::vector<std::string>& args) {
  const CliResult r = run_cli(TPROF_BIN, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Result<JsonValue> v = JsonValue::parse(r.out);
  EXPECT_TRUE(v.has_value());
  return v ? *v : JsonValue();
}

TEST_F(SqlExport, AgreesWithStepsKernelsAndTableJson) {
  NEED_SQLITE3();
  export_trace();
  const JsonValue steps = json_of({"steps", "--format", "json", kTrace});
  const JsonValue* list = steps.find("steps");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(value("SELECT COUNT(*) FROM steps"), std::to_string(list->items().size()));
  for (const JsonValue& s : list->items()) {
    const std::string n = std::to_string(s.find("step")->int_or(-1));
    EXPECT_EQ(value("SELECT ts_ns || ' ' || dur_ns || ' ' || cpu_busy_ns || ' ' || gpu_busy_ns || ' ' || launches "
                    "|| ' ' || first_kernel_offset_ns FROM steps WHERE step = " + n),
              std::to_string(s.find("start_ns")->int_or(-1)) + " " + std::to_string(s.find("dur_ns")->int_or(-1)) +
                  " " + std::to_string(s.find("cpu_busy_ns")->int_or(-1)) + " " +
                  std::to_string(s.find("gpu_busy_ns")->int_or(-1)) + " " +
                  std::to_string(s.find("launches")->int_or(-1)) + " " +
                  std::to_string(s.find("first_kernel")->find("offset_ns")->int_or(-1)))
        << "step " << n;
  }

  const JsonValue kernels = json_of({"kernels", "--format", "json", kTrace});
  const JsonValue* klist = kernels.find("kernels");
  ASSERT_NE(klist, nullptr);
  EXPECT_EQ(value("SELECT SUM(dur_ns) FROM kernels"), std::to_string(kernels.find("total_ns")->int_or(-1)));
  for (const JsonValue& k : klist->items()) {
    const std::string short_name = k.find("short_name")->text();
    EXPECT_EQ(value("SELECT COUNT(*) || ' ' || SUM(dur_ns) || ' ' || MIN(dur_ns) || ' ' || MAX(dur_ns) || ' ' || "
                    "MIN(category) FROM kernel_view WHERE short_name = '" + short_name + "'"),
              std::to_string(k.find("count")->int_or(-1)) + " " + std::to_string(k.find("total_ns")->int_or(-1)) +
                  " " + std::to_string(k.find("min_ns")->int_or(-1)) + " " +
                  std::to_string(k.find("max_ns")->int_or(-1)) + " " + k.find("category")->text())
        << short_name;
  }

  const JsonValue table = json_of({"table", "--format", "json", kTrace});
  const JsonValue* rows = table.find("rows");
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(value("SELECT COUNT(*) FROM key_averages"), std::to_string(rows->items().size()));
  for (const JsonValue& r : rows->items()) {
    const std::string name = r.find("name")->text();
    const std::string annotation = r.find("is_user_annotation")->as_bool() ? "1" : "0";
    const std::string device = r.find("is_device")->as_bool() ? "1" : "0";
    EXPECT_EQ(value("SELECT count || ' ' || self_cpu_ns || ' ' || cpu_total_ns || ' ' || self_device_ns || ' ' || "
                    "device_total_ns FROM key_averages WHERE name = '" + name + "' AND is_user_annotation = " +
                    annotation + " AND is_device = " + device),
              std::to_string(r.find("count")->int_or(-1)) + " " +
                  std::to_string(r.find("self_cpu_time_total_ns")->int_or(-1)) + " " +
                  std::to_string(r.find("cpu_time_total_ns")->int_or(-1)) + " " +
                  std::to_string(r.find("self_device_time_total_ns")->int_or(-1)) + " " +
                  std::to_string(r.find("device_time_total_ns")->int_or(-1)))
        << name;
  }
}

// ---- bad input and the output policy ------------------------------------------

TEST_F(SqlExport, BadTraceExitsTwoNamingTheOffsetAndWritesNothing) {
  const std::string bad = dir_.path() + "/bad.json";
  std::ofstream(bad) << "{\"traceEvents\": [\n  {\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 2, \"pid\": 1, "
                        "\"tid\": 1},\n  nonsense\n";
  const CliResult r = run_cli(TPROF_BIN, {"--strict", "export", "--sqlite", bad, "-o", db_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("byte "), std::string::npos) << r.err;
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"bad.json"});

  const CliResult missing = run_cli(TPROF_BIN, {"export", "--sqlite", dir_.path() + "/none.json", "-o", db_});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("none.json"), std::string::npos) << missing.err;
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"bad.json"});
}

TEST_F(SqlExport, RefusesTheInputAsOutputAndUnwritablePaths) {
  const std::string input = dir_.path() + "/in.json";
  fs::copy_file(kTrace, input);
  const std::string before = read_text(input);
  CliResult r = run_cli(TPROF_BIN, {"export", "--sqlite", input, "-o", input});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is the input trace"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(input), before);

  r = run_cli(TPROF_BIN, {"export", "--sqlite", input, "-o", dir_.path() + "/no/such/dir/x.db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no/such/dir/x.db"), std::string::npos) << r.err;
  r = run_cli(TPROF_BIN, {"export", "--sqlite", input, "-o", dir_.path()});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli(TPROF_BIN, {"export", input, "-o", db_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sqlite"), std::string::npos) << r.err;
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"in.json"});
}

TEST_F(SqlExport, ReplacesAnExistingFileWholeAndLeavesNoScratchFile) {
  NEED_SQLITE3();
  std::ofstream(db_) << "an older file";
  fs::permissions(db_, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  export_trace();
  EXPECT_EQ(value("SELECT value FROM meta WHERE key = 'schema_version'"), "2");
  EXPECT_EQ(fs::status(db_).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(dir_.files(), std::vector<std::string>{"trace.db"});
  // A database on stdout (a pipe or file, never a terminal) is the same file.
  const std::string piped = dir_.path() + "/piped.db";
  const CliResult r = run_cli("/bin/sh", {"-c", std::string(TPROF_BIN) + " export --sqlite '" + kTrace + "' -o - > '" +
                                                    piped + "'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CliResult q = run_cli(sqlite3_, {"-batch", piped, "SELECT COUNT(*) FROM events"});
  EXPECT_EQ(q.out, value("SELECT COUNT(*) FROM events") + "\n");
  EXPECT_EQ(dir_.files(), (std::vector<std::string>{"piped.db", "trace.db"}));
}

#if !TPROF_HAVE_SQLITE
TEST(SqlExportWithoutSqlite, SaysItWasBuiltWithoutSqlite) {
  const std::string out = (fs::temp_directory_path() / "tprof_no_sqlite.db").string();
  const CliResult r = run_cli(TPROF_BIN, {"export", "--sqlite", kTrace, "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("built without SQLite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}
#endif

}  // namespace
}  // namespace tprof
