// torch's _build_table (torch/autograd/profiler_util.py), reproduced byte for
// byte: widths are computed over all rows, every cell is right-aligned but
// Source Location, each cell is followed by two spaces, lengths count code
// points, and percentages divide by the sum of *self* CPU times.
#include <algorithm>
#include <functional>

#include "src/base/json_writer.h"
#include "src/base/saturate.h"
#include "src/report/py_format.h"
#include "tprof/table.h"

namespace tprof {

namespace {

using internal::append_left;
using internal::append_right;
using internal::format_memory;
using internal::format_share;
using internal::format_time_us;
using internal::py_head;
using internal::py_len;
using internal::py_tail;

constexpr std::size_t kDefaultWidth = 12;
constexpr std::size_t kMaxStackEntry = 5;  // torch 1.13: frames shown per row

double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

struct SortKey {
  std::string name;
  std::function<double(const StatRow&)> value;
};

const std::vector<SortKey>& sort_keys() {
  static const std::vector<SortKey> keys = [] {
    std::vector<SortKey> k;
    auto avg = [](std::int64_t total, std::int64_t count) {
      return count == 0 ? 0.0 : us(total) / static_cast<double>(count);
    };
    auto add_device = [&](const std::string& dev) {
      k.push_back({dev + "_time", [=](const StatRow& r) { return avg(r.device_time_total_ns, r.count); }});
      k.push_back({dev + "_time_total", [](const StatRow& r) { return us(r.device_time_total_ns); }});
      k.push_back({"self_" + dev + "_time_total", [](const StatRow& r) { return us(r.self_device_time_total_ns); }});
      k.push_back({dev + "_memory_usage", [](const StatRow& r) { return static_cast<double>(r.device_memory_usage); }});
      k.push_back({"self_" + dev + "_memory_usage",
                   [](const StatRow& r) { return static_cast<double>(r.self_device_memory_usage); }});
    };
    k.push_back({"cpu_time", [=](const StatRow& r) { return avg(r.cpu_time_total_ns, r.count); }});
    k.push_back({"cpu_time_total", [](const StatRow& r) { return us(r.cpu_time_total_ns); }});
    k.push_back({"self_cpu_time_total", [](const StatRow& r) { return us(r.self_cpu_time_total_ns); }});
    k.push_back({"cpu_memory_usage", [](const StatRow& r) { return static_cast<double>(r.cpu_memory_usage); }});
    k.push_back({"self_cpu_memory_usage", [](const StatRow& r) { return static_cast<double>(r.self_cpu_memory_usage); }});
    add_device("cuda");
    add_device("device");
    k.push_back({"count", [](const StatRow& r) { return static_cast<double>(r.count); }});
    return k;
  }();
  return keys;
}

}  // namespace

std::string device_name_of(const Trace& trace) {
  for (std::uint32_t e = 0; e < trace.events.size(); ++e) {
    if (trace.events.kind[e] == EventKind::kKernel) {
      return trace.strings.str(trace.events.cat[e]).starts_with("mtia") ? "MTIA" : "CUDA";
    }
  }
  return "CUDA";
}

const std::vector<std::string>& table_sort_keys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const SortKey& k : sort_keys()) n.push_back(k.name);
    return n;
  }();
  return names;
}

namespace {

// The rows in the table's order: sorted(..., key, reverse=True) when sort_by
// is set, which is stable (ties keep their first-appearance order).
Result<std::vector<const StatRow*>> sorted_rows(const std::vector<StatRow>& input, const TableOptions& opt) {
  std::vector<const StatRow*> rows;
  rows.reserve(input.size());
  for (const StatRow& r : input) rows.push_back(&r);
  if (opt.sort_by.empty()) return rows;
  const SortKey* key = nullptr;
  for (const SortKey& k : sort_keys()) {
    if (k.name == opt.sort_by) key = &k;
  }
  if (key == nullptr) {
    std::string valid;
    for (const std::string& n : table_sort_keys()) valid += (valid.empty() ? "" : ", ") + n;
    return Error(ErrorCode::kInvalidArgument, "unknown sort key '" + opt.sort_by + "' (valid: " + valid + ")");
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const StatRow* a, const StatRow* b) { return key->value(*a) > key->value(*b); });
  return rows;
}

}  // namespace

Result<std::vector<const StatRow*>> select_table_rows(const std::vector<StatRow>& input, const TableOptions& opt) {
  TPROF_TRY_ASSIGN(std::vector<const StatRow*> rows, sorted_rows(input, opt));
  const std::size_t limit = opt.row_limit < 0 ? static_cast<std::size_t>(-1) : static_cast<std::size_t>(opt.row_limit);
  std::vector<const StatRow*> shown;
  for (const StatRow* r : rows) {
    if (shown.size() == limit) break;
    if (opt.top_level_events_only && r->has_parent) continue;
    shown.push_back(r);
  }
  return shown;
}

namespace {

// The columns for programs, in the table's order.
struct Column {
  const char* key;
  std::int64_t (*value)(const StatRow&);
};
constexpr Column kColumns[] = {
    {"count", [](const StatRow& r) { return r.count; }},
    {"self_cpu_time_total_ns", [](const StatRow& r) { return r.self_cpu_time_total_ns; }},
    {"cpu_time_total_ns", [](const StatRow& r) { return r.cpu_time_total_ns; }},
    {"self_device_time_total_ns", [](const StatRow& r) { return r.self_device_time_total_ns; }},
    {"device_time_total_ns", [](const StatRow& r) { return r.device_time_total_ns; }},
    {"self_cpu_memory_usage", [](const StatRow& r) { return r.self_cpu_memory_usage; }},
    {"cpu_memory_usage", [](const StatRow& r) { return r.cpu_memory_usage; }},
    {"self_device_memory_usage", [](const StatRow& r) { return r.self_device_memory_usage; }},
    {"device_memory_usage", [](const StatRow& r) { return r.device_memory_usage; }},
};

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

Result<std::string> format_table_json(const std::vector<StatRow>& input, const TableOptions& opt) {
  TPROF_TRY_ASSIGN(std::vector<const StatRow*> rows, select_table_rows(input, opt));
  std::string out;
  internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
  w.begin_object();
  w.key("device");
  w.value_string(opt.device_name);
  w.key("rows");
  w.begin_array();
  for (const StatRow* r : rows) {
    w.begin_object();
    w.key("name");
    w.value_string(r->key);
    for (const Column& c : kColumns) {
      w.key(c.key);
      w.value_int(c.value(*r));
    }
    if (r->has_input_shapes) {
      w.key("input_shapes");
      w.value_string(r->input_shapes);
    }
    w.key("is_device");
    w.value_bool(r->is_device);
    w.key("is_user_annotation");
    w.value_bool(r->is_user_annotation);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  out += "\n";
  return out;
}

Result<std::string> format_table_csv(const std::vector<StatRow>& input, const TableOptions& opt) {
  TPROF_TRY_ASSIGN(std::vector<const StatRow*> rows, select_table_rows(input, opt));
  std::string out = "name";
  for (const Column& c : kColumns) out += std::string(",") + c.key;
  out += ",input_shapes\n";
  for (const StatRow* r : rows) {
    out += csv_field(r->key);
    for (const Column& c : kColumns) out += "," + std::to_string(c.value(*r));
    out += "," + csv_field(r->input_shapes) + "\n";
  }
  return out;
}

Result<std::string> format_table(const std::vector<StatRow>& input, const TableOptions& opt) {
  // The sort key is checked first: a misspelt key is an error with no rows
  // too, as in the JSON and CSV forms (torch returns "" before it looks).
  TPROF_TRY_ASSIGN(std::vector<const StatRow*> rows, sorted_rows(input, opt));
  if (rows.empty()) return std::string();

  const bool has_device_time =
      std::any_of(rows.begin(), rows.end(), [](const StatRow* r) { return r->self_device_time_total_ns > 0; });
  const bool has_device_mem =
      std::any_of(rows.begin(), rows.end(), [](const StatRow* r) { return r->self_device_memory_usage > 0; });
  const bool has_input_shapes =
      std::any_of(rows.begin(), rows.end(), [](const StatRow* r) { return r->has_input_shapes; });

  std::size_t name_w = 0, shapes_w = 0, src_w = 0;
  bool has_stack = false;
  for (const StatRow* r : rows) {
    name_w = std::max(name_w, py_len(r->key) + 4);
    shapes_w = std::max(shapes_w, py_len(r->input_shapes) + 4);
    for (const std::string& frame : r->stack) {
      has_stack = true;
      src_w = std::max(src_w, py_len(frame) + 4);
    }
  }
  if (opt.max_name_column_width >= 0) name_w = std::min(name_w, static_cast<std::size_t>(opt.max_name_column_width));
  if (opt.max_shapes_column_width >= 0) {
    shapes_w = std::min(shapes_w, static_cast<std::size_t>(opt.max_shapes_column_width));
  }
  if (has_stack && opt.max_src_column_width >= 0) {
    src_w = std::min(src_w, static_cast<std::size_t>(opt.max_src_column_width));
  }

  std::vector<std::string> headers = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (has_device_time) {
    const std::string& d = opt.device_name;
    for (const std::string& h : {"Self " + d, "Self " + d + " %", d + " total", d + " time avg"}) headers.push_back(h);
  }
  if (opt.profile_memory) {
    headers.emplace_back("CPU Mem");
    headers.emplace_back("Self CPU Mem");
    if (has_device_mem) {
      headers.push_back(opt.device_name + " Mem");
      headers.push_back("Self " + opt.device_name + " Mem");
    }
  }
  headers.emplace_back("# of Calls");
  std::vector<std::size_t> widths(headers.size(), kDefaultWidth);
  widths[0] = name_w;
  if (has_input_shapes) {
    headers.emplace_back("Input Shapes");
    widths.push_back(shapes_w);
  }
  if (has_stack) {
    headers.emplace_back("Source Location");
    widths.push_back(src_w);
  }
  const std::size_t ncols = headers.size();

  auto append_row = [&](std::string* out, const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < ncols; ++i) {
      if (has_stack && i + 1 == ncols) {
        append_left(out, cells[i], widths[i]);
      } else {
        append_right(out, cells[i], widths[i]);
      }
      out->append("  ");
    }
    out->push_back('\n');
  };
  std::string sep;
  std::size_t line_length = 0;
  for (std::size_t w : widths) {
    sep.append(w, '-');
    sep.append("  ");
    line_length += w + 2;
  }
  line_length -= 2;
  sep.push_back('\n');

  // Totals over all rows, independent of sorting, limits and filters.
  std::int64_t sum_self_cpu = 0, sum_self_device = 0;
  for (const StatRow* r : rows) {
    internal::sat_acc(sum_self_cpu, r->self_cpu_time_total_ns);
    if (r->is_device && !r->is_user_annotation) internal::sat_acc(sum_self_device, r->self_device_time_total_ns);
  }

  std::string out;
  if (opt.has_header) {
    out.append(line_length, '=');
    out.push_back('\n');
    out.append(opt.header).push_back('\n');
  }
  if (opt.top_level_events_only) {
    out.append(line_length, '=');
    out.push_back('\n');
    out.append("This report only display top-level ops statistics\n");
  }
  out.append(sep);
  append_row(&out, headers);
  out.append(sep);

  auto trim_path = [&](std::string_view path) {
    std::string p(path);
    if (py_len(path) > src_w) {
      p = std::string(py_tail(path, src_w));
      if (py_len(p) > 3) p = "..." + std::string(py_tail(p, py_len(p) - 3));
    }
    return p;
  };

  const std::size_t limit = opt.row_limit < 0 ? static_cast<std::size_t>(-1) : static_cast<std::size_t>(opt.row_limit);
  std::size_t shown = 0;
  std::vector<std::string> cells;
  for (const StatRow* r : rows) {
    if (shown == limit) break;
    if (opt.top_level_events_only && r->has_parent) continue;
    ++shown;
    std::string name = r->key;
    // torch: `if len(name) >= w - 3: name = name[:w - 3] + "..."`. For w < 3
    // the stop is negative and Python counts it from the end (w = 0 keeps
    // all but the last 3 code points), so the condition always holds.
    if (opt.max_name_column_width >= 0) {
      const std::int64_t stop = static_cast<std::int64_t>(opt.max_name_column_width) - 3;
      const std::int64_t len = static_cast<std::int64_t>(py_len(name));
      if (len >= stop) {
        const std::int64_t keep = stop >= 0 ? stop : std::max<std::int64_t>(0, len + stop);
        name = std::string(py_head(name, static_cast<std::size_t>(keep))) + "...";
      }
    }
    const double cpu_total = us(r->cpu_time_total_ns);
    const double count = static_cast<double>(r->count);
    cells.clear();
    cells.push_back(name);
    cells.push_back(format_share(us(r->self_cpu_time_total_ns), us(sum_self_cpu)));
    cells.push_back(format_time_us(us(r->self_cpu_time_total_ns)));
    cells.push_back(r->is_async ? std::string("0") : format_share(cpu_total, us(sum_self_cpu)));
    cells.push_back(format_time_us(cpu_total));
    cells.push_back(format_time_us(r->count == 0 ? 0.0 : cpu_total / count));
    if (has_device_time) {
      const double dev_total = us(r->device_time_total_ns);
      cells.push_back(format_time_us(us(r->self_device_time_total_ns)));
      cells.push_back(format_share(us(r->self_device_time_total_ns), us(sum_self_device)));
      cells.push_back(format_time_us(dev_total));
      cells.push_back(format_time_us(r->count == 0 ? 0.0 : dev_total / count));
    }
    if (opt.profile_memory) {
      cells.push_back(format_memory(r->cpu_memory_usage));
      cells.push_back(format_memory(r->self_cpu_memory_usage));
      if (has_device_mem) {
        cells.push_back(format_memory(r->device_memory_usage));
        cells.push_back(format_memory(r->self_device_memory_usage));
      }
    }
    cells.push_back(std::to_string(r->count));
    if (has_input_shapes) cells.emplace_back(py_head(r->input_shapes, shapes_w));
    if (has_stack) cells.push_back(r->stack.empty() ? std::string() : trim_path(r->stack[0]));
    append_row(&out, cells);
    if (has_stack) {
      std::vector<std::string> empty(ncols);
      for (std::size_t i = 1; i < r->stack.size() && i < kMaxStackEntry; ++i) {
        empty.back() = trim_path(r->stack[i]);
        append_row(&out, empty);
      }
      empty.back().clear();
      append_row(&out, empty);
    }
  }
  out.append(sep);
  out.append("Self CPU time total: ").append(format_time_us(us(sum_self_cpu))).push_back('\n');
  if (has_device_time) {
    out.append("Self ").append(opt.device_name).append(" time total: ").append(format_time_us(us(sum_self_device))).push_back('\n');
  }
  if (opt.dropped_events > 0) {
    out.append("Dropped events: ").append(std::to_string(opt.dropped_events));
    out.append(" (the recorder's thread buffers were full; these totals miss them)\n");
  }
  return out;
}

}  // namespace tprof
