// The SQLite exporter (src/export/sqlite_export.cc) on real traces from
// tests/data: every table holds as many rows as the model (or the derived
// view) has, the values are the views' own, self times are torch's, kernels
// know their launch call and op, flows bind to the slices Perfetto draws
// them between, and the output is written whole or not at all.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "src/export/sqlite_export.h"
#include "src/report/kernel_names.h"
#include "tests/support/temp_dir.h"
#include "tprof/key_averages.h"
#include "tprof/kernels.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

const std::string kData = TPROF_TEST_DATA;
const std::string kBlog64 = kData + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json";

Trace load(const std::string& path) {
  Result<Trace> t = read_trace(path);
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().to_string());
  return t ? std::move(t).value() : Trace();
}

using TempDir = testing::TempDir;

// A read-only connection with one-value and many-row queries.
class Db {
 public:
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << path;
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Rows of int64 columns (NULL as -1).
  std::vector<std::vector<std::int64_t>> rows(const std::string& sql) {
    std::vector<std::vector<std::int64_t>> out;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return out;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::int64_t> row;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        row.push_back(sqlite3_column_type(s, c) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, c));
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(s);
    return out;
  }
  std::int64_t num(const std::string& sql) {
    const auto r = rows(sql);
    return r.empty() || r[0].empty() ? -2 : r[0][0];
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return out;
    }
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Exports `trace` into dir/name.db and returns the stats.
internal::SqliteExportStats export_to(const Trace& trace, const std::string& db) {
  Result<internal::SqliteExportStats> s = internal::write_sqlite(trace, db, {.source = "test"});
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().to_string());
  return s ? *s : internal::SqliteExportStats{};
}

std::uint64_t count_if_kind(const Trace& t, std::initializer_list<EventKind> kinds) {
  std::uint64_t n = 0;
  for (EventKind k : t.events.kind) n += std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  return n;
}

// Row counts equal the model's on every kind of trace the reader knows: a
// blog GPU trace (torch 2.11, flows and gpu_user_annotation), a compiled one,
// torch 1.13's legacy array with [memory] records, a 2022 Kineto .gz.
class RowCounts : public ::testing::TestWithParam<const char*> {};

TEST_P(RowCounts, EqualTheModelsAndTheViews) {
  const Trace t = load(kData + "/" + GetParam());
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  const internal::SqliteExportStats stats = export_to(t, path);
  Db db(path);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events"), static_cast<std::int64_t>(t.events.size()));
  EXPECT_EQ(stats.rows_of("events"), t.events.size());
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM strings"), static_cast<std::int64_t>(t.strings.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM lanes"), static_cast<std::int64_t>(t.lanes.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM processes"), static_cast<std::int64_t>(t.processes.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM memory"), static_cast<std::int64_t>(t.memory.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM top_level"), static_cast<std::int64_t>(t.meta.top_level.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM diagnostics"), static_cast<std::int64_t>(t.diagnostics.items().size()));
  EXPECT_EQ(db.num("SELECT COALESCE(SUM(count), 0) FROM diagnostic_counts"),
            static_cast<std::int64_t>(t.diagnostics.total()));
  std::int64_t with_args = 0, starts = 0, ends = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    with_args += !t.args_json(e).empty();
    starts += t.events.phase[e] == Phase::kFlowStart;
    ends += t.events.phase[e] == Phase::kFlowEnd;
  }
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM args"), with_args);
  EXPECT_EQ(db.num("SELECT COUNT(start_event) FROM flows"), starts);
  EXPECT_EQ(db.num("SELECT COUNT(end_event) FROM flows"), ends);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels"),
            static_cast<std::int64_t>(count_if_kind(t, {EventKind::kKernel, EventKind::kGpuMemcpy, EventKind::kGpuMemset})));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM steps"), static_cast<std::int64_t>(compute_steps(t).steps.size()));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM key_averages"),
            static_cast<std::int64_t>(EventList::build(t).key_averages().size()));
  // Every row of a table was counted in the stats, and every reference resolves.
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels") + db.num("SELECT COUNT(*) FROM steps"),
            static_cast<std::int64_t>(stats.rows_of("kernels") + stats.rows_of("steps")));
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events e LEFT JOIN strings n ON n.id = e.name_id WHERE n.id IS NULL"), 0);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events e LEFT JOIN lanes l ON l.id = e.lane_id WHERE l.id IS NULL"), 0);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events e LEFT JOIN events p ON p.id = e.parent_id "
                   "WHERE e.parent_id IS NOT NULL AND p.id IS NULL"),
            0);
  EXPECT_EQ(db.num("PRAGMA user_version"), internal::kSqliteSchemaVersion);
  EXPECT_EQ(db.num("PRAGMA application_id"), internal::kSqliteApplicationId);
  EXPECT_EQ(db.text("SELECT value FROM meta WHERE key = 'source'"), "test");
}

INSTANTIATE_TEST_SUITE_P(Traces, RowCounts,
                         ::testing::Values("gpu/h100-torch-2.11/64_bf16_warm_eager.json",
                                           "gpu/h100-torch-2.11/4096_bf16_warm_compile.json",
                                           "torch-1.13/memory/memory.json",
                                           "kineto-public/hta_rank_non_gpu_2022-08.json.gz"));

// The values are the views' own: tprof steps' rows, tprof kernels' totals
// and short names, torch's key_averages.
TEST(SqliteExport, ValuesAreTheDerivedViews) {
  const Trace t = load(kBlog64);
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  export_to(t, path);
  Db db(path);
  const StepsSummary steps = compute_steps(t);
  ASSERT_EQ(steps.steps.size(), 20u);
  for (const StepStat& s : steps.steps) {
    const auto r = db.rows("SELECT event_id, ts_ns, dur_ns, cpu_busy_ns, gpu_busy_ns, launches, first_kernel_offset_ns, "
                           "first_kernel_id, first_launch_id FROM steps WHERE step = " +
                           std::to_string(s.step));
    ASSERT_EQ(r.size(), 1u) << s.step;
    EXPECT_EQ(r[0], (std::vector<std::int64_t>{s.event, s.start_ns, s.dur_ns, s.cpu_busy_ns, s.gpu_busy_ns, s.launches,
                                               s.first_kernel_offset_ns.value_or(-1), s.first_kernel_event,
                                               s.first_launch_event}))
        << "step " << s.step;
  }
  const KernelsSummary k = compute_kernels(t);
  const internal::KernelNames names(t);
  ASSERT_EQ(k.kernels.size(), 2u);
  for (const KernelStat& ks : k.kernels) {
    const std::string where = " FROM kernel_view WHERE name = '" + ks.name + "'";
    EXPECT_EQ(db.rows("SELECT COUNT(*), SUM(dur_ns), MIN(dur_ns), MAX(dur_ns)" + where)[0],
              (std::vector<std::int64_t>{ks.count, ks.total_ns, ks.min_ns, ks.max_ns}))
        << ks.name;
    EXPECT_EQ(db.text("SELECT DISTINCT short_name" + where), names.get(ks.name));
    EXPECT_EQ(db.text("SELECT DISTINCT category" + where), ks.category);
  }
  const std::vector<StatRow> rows = EventList::build(t).key_averages();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const StatRow& r = rows[i];
    EXPECT_EQ(db.rows("SELECT count, cpu_total_ns, self_cpu_ns, device_total_ns, self_device_ns FROM key_averages "
                      "WHERE id = " +
                      std::to_string(i))[0],
              (std::vector<std::int64_t>{r.count, r.cpu_time_total_ns, r.self_cpu_time_total_ns, r.device_time_total_ns,
                                         r.self_device_time_total_ns}))
        << r.key;
    EXPECT_EQ(db.text("SELECT name FROM key_averages WHERE id = " + std::to_string(i)), r.key);
  }
  // The plugin's breakdown: one row per step, the blog's 20.
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM step_breakdown"), 20);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM step_breakdown b JOIN steps s USING (step)"), 20);
}

// events.self_ns summed per op name is torch's Self CPU on every GPU blog
// trace (exact-ns semantics): the tree is prof.events()'s.
TEST(SqliteExport, SelfTimeIsTorchsSelfCpu) {
  for (const char* name : {"64_bf16_warm_eager.json", "4096_bf16_cold_compile.json", "4096_bf16_warm_eager.json"}) {
    const Trace t = load(kData + "/gpu/h100-torch-2.11/" + name);
    TempDir dir;
    const std::string path = dir.path() + "/t.db";
    export_to(t, path);
    Db db(path);
    int checked = 0;
    for (const StatRow& r : EventList::build(t).key_averages()) {
      if (r.is_device || r.key == "ProfilerStep*" || r.is_user_annotation) continue;
      const std::string escaped = [&] {
        std::string s;
        for (char c : r.key) s += c == '\'' ? std::string("''") : std::string(1, c);
        return s;
      }();
      EXPECT_EQ(db.num("SELECT SUM(e.self_ns) FROM events e JOIN strings n ON n.id = e.name_id "
                       "WHERE e.phase = 'X' AND e.kind IN ('cpu_op', 'user_annotation', 'cuda_runtime', "
                       "'cuda_driver') AND n.text = '" + escaped + "'"),
                r.self_cpu_time_total_ns)
          << name << ": " << r.key;
      ++checked;
    }
    EXPECT_GT(checked, 4) << name;
  }
}

// Each kernel's launch call has its correlation id, its op is the cpu_op
// with the launch's External id, and the delay is the difference of starts.
TEST(SqliteExport, KernelsKnowTheirLaunchAndOp) {
  const Trace t = load(kBlog64);
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  export_to(t, path);
  Db db(path);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels"), 40);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels k JOIN events e ON e.id = k.event_id JOIN events l ON l.id = "
                   "k.launch_id WHERE l.correlation = e.correlation AND k.launch_delay_ns = e.ts_ns - l.ts_ns "
                   "AND l.kind IN ('cuda_runtime', 'cuda_driver')"),
            40);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels k JOIN events l ON l.id = k.launch_id JOIN events o ON o.id = "
                   "k.op_id WHERE o.external_id = l.external_id AND o.kind = 'cpu_op'"),
            40);
  EXPECT_EQ(db.text("SELECT group_concat(op_name, ',') FROM (SELECT DISTINCT op_name FROM kernel_view "
                    "ORDER BY op_name)"),
            "aten::add,aten::mm");
  // The launch runs inside its op (parent_id), and the op inside its step.
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels k JOIN events l ON l.id = k.launch_id WHERE l.parent_id = k.op_id"),
            40);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM kernels k JOIN steps s ON s.step = k.step JOIN events l ON l.id = "
                   "k.launch_id WHERE l.ts_ns BETWEEN s.ts_ns AND s.ts_ns + s.dur_ns"),
            40);
}

// ac2g flows go from the launch call to the kernel: from_event and
// to_event are the slices the flow's ends bind to.
TEST(SqliteExport, FlowsBindToTheirSlices) {
  const Trace t = load(kBlog64);
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  export_to(t, path);
  Db db(path);
  const std::int64_t paired = db.num("SELECT COUNT(*) FROM flows WHERE start_event IS NOT NULL AND end_event IS NOT NULL");
  EXPECT_EQ(paired, 40);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM flows f JOIN kernels k ON k.event_id = f.to_event "
                   "WHERE k.launch_id = f.from_event"),
            paired);
  // A flow event's parent_id is the slice open at its time: the start's is from_event.
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM flows f JOIN events s ON s.id = f.start_event WHERE s.parent_id = f.from_event"),
            db.num("SELECT COUNT(*) FROM flows WHERE start_event IS NOT NULL"));
}

// The output is complete or absent; an existing file keeps its mode; no
// scratch file stays; a directory that does not exist is an error naming it.
TEST(SqliteExport, WritesWholeOrNothing) {
  const Trace t = load(kBlog64);
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  export_to(t, path);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"t.db"});
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~umask_now);

  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  export_to(t, path);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"t.db"});
  Db db(path);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events"), static_cast<std::int64_t>(t.events.size()));

  const std::string nowhere = dir.path() + "/no/such/dir/t.db";
  Result<internal::SqliteExportStats> r = internal::write_sqlite(t, nowhere);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find(nowhere), std::string::npos) << r.error().to_string();
  r = internal::write_sqlite(t, dir.path());
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(dir.files(), std::vector<std::string>{"t.db"});
}

// --no-args: the args table is there and empty.
TEST(SqliteExport, WithoutArgs) {
  const Trace t = load(kBlog64);
  TempDir dir;
  const std::string path = dir.path() + "/t.db";
  ASSERT_TRUE(internal::write_sqlite(t, path, {.args = false}).has_value());
  Db db(path);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM args"), 0);
  EXPECT_EQ(db.num("SELECT value FROM meta WHERE key = 'args'"), 0);
  EXPECT_EQ(db.num("SELECT COUNT(*) FROM events"), static_cast<std::int64_t>(t.events.size()));
}

}  // namespace
}  // namespace tprof
