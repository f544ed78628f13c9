// tprof memory output: text, Markdown, the JSON contract and CSV rows
// (docs/memory.md). Every view formats the one MemoryReport.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "src/base/json_writer.h"
#include "tprof/memory.h"

namespace tprof {

namespace {

// Binary units, one decimal past KiB: "512 B", "3.0 MiB".
std::string bytes_text(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = std::fabs(static_cast<double>(b));
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%s%.0f B", b < 0 ? "-" : "", v);
  } else {
    std::snprintf(buf, sizeof buf, "%s%.1f %s", b < 0 ? "-" : "", v, units[u]);
  }
  return buf;
}

std::string signed_bytes(std::int64_t b) { return (b > 0 ? "+" : "") + bytes_text(b); }

// A time relative to the report's origin: "+12.345 ms".
std::string at_text(const MemoryReport& r, std::int64_t ns) {
  if (!r.times_recorded) return "event " + std::to_string(ns - r.origin_ns);
  char buf[48];
  std::snprintf(buf, sizeof buf, "+%.3f ms", static_cast<double>(ns - r.origin_ns) / 1e6);
  return buf;
}

std::string group_name_plain(const MemoryGroup& g) {
  const std::string op = g.op.empty() ? "(no op)" : g.op;
  return g.caller.empty() ? op : g.caller + " > " + op;
}

// The op and, in the text view, the stack's three innermost user frames
// (the JSON keeps five).
std::string group_name(const MemoryGroup& g) {
  std::string s = group_name_plain(g);
  if (g.stack.empty()) return s;
  std::size_t cut = 0;
  for (int i = 0; i < 3 && cut != std::string::npos; ++i) cut = g.stack.find(" <- ", cut == 0 ? 0 : cut + 4);
  return s + "  [" + (cut == std::string::npos ? g.stack : g.stack.substr(0, cut) + " <- ...") + "]";
}

void append_groups_text(std::string* out, const std::vector<MemoryGroup>& groups, const char* indent) {
  char line[96];
  for (const MemoryGroup& g : groups) {
    std::snprintf(line, sizeof line, "%s%10s  %6lld  ", indent, bytes_text(g.bytes).c_str(), static_cast<long long>(g.count));
    *out += line + group_name(g) + "\n";
  }
}

// Eight levels of a block sparkline over the buckets' highest values.
std::string sparkline(const MemoryDeviceView& v, std::size_t width) {
  static const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (v.timeline.empty()) return "";
  std::int64_t lo = v.timeline.front().min_allocated, hi = v.timeline.front().max_allocated;
  for (const MemoryPoint& p : v.timeline) {
    lo = std::min(lo, p.min_allocated);
    hi = std::max(hi, p.max_allocated);
  }
  std::string out;
  const std::size_t n = v.timeline.size();
  for (std::size_t c = 0; c < width && c < n; ++c) {
    const std::size_t b0 = c * n / std::min(width, n), b1 = std::max(b0 + 1, (c + 1) * n / std::min(width, n));
    std::int64_t m = v.timeline[b0].max_allocated;
    for (std::size_t b = b0; b < b1 && b < n; ++b) m = std::max(m, v.timeline[b].max_allocated);
    const double f = hi > lo ? static_cast<double>(m - lo) / static_cast<double>(hi - lo) : 1.0;
    out += kBars[std::clamp(static_cast<int>(f * 7.0 + 0.5), 0, 7)];
  }
  return out;
}

std::string source_text(const MemoryReport& r, const MemoryDeviceView& v) {
  if (r.source == "snapshot") return "allocated and reserved replayed from the snapshot's trace and segments";
  return v.totals_recorded ? "allocated from the trace's Total Allocated"
                           : "no totals in the trace: allocated is a running sum of Bytes from 0 at the first record";
}

}  // namespace

std::string format_memory_bytes(std::int64_t bytes) { return bytes_text(bytes); }

std::string format_memory_text(const MemoryReport& r) {
  std::string out;
  if (r.devices.empty()) {
    return r.source == "snapshot" ? "no allocator events or segments in the snapshot\n"
                                  : "no [memory] records in the trace (record with profile_memory=True)\n";
  }
  for (const MemoryDeviceView& v : r.devices) {
    if (&v != &r.devices.front()) out += "\n";
    out += v.label + ": " + std::to_string(v.records) + (v.records == 1 ? " record (" : " records (") +
           std::to_string(v.allocations) +
           " allocations, " + std::to_string(v.frees) + " frees) from " + at_text(r, v.first_ns) + " to " +
           at_text(r, v.last_ns) + "\n";
    out += "  " + source_text(r, v) + (r.times_recorded ? "" : "; no times in it: positions in its trace") + "\n";
    if (v.totals_recorded) {
      out += "  allocated: " + bytes_text(v.start_bytes) + " before the first record, " + bytes_text(v.end_bytes) +
             " after the last; peak " + bytes_text(v.peak_bytes) + " at " + at_text(r, v.peak_ns) + "\n";
    } else {
      out += "  allocated, relative to the first record: " + signed_bytes(v.end_bytes) + " after the last; peak " +
             signed_bytes(v.peak_bytes) + " at " + at_text(r, v.peak_ns) + "\n";
    }
    if (v.peak_reserved_bytes != kMemoryAbsent) {
      out += "  reserved: peak " + bytes_text(v.peak_reserved_bytes) + " at " + at_text(r, v.peak_reserved_ns) +
             "; reserved - allocated at most " + bytes_text(v.max_gap_bytes) + " (" + at_text(r, v.max_gap_ns) + "), " +
             bytes_text(v.end_gap_bytes) + " at the end\n";
    }
    if (r.source == "snapshot" && v.allocations + v.frees == 0) {
      out += "  no allocation history in the snapshot, only its state at the dump (record it with "
             "torch.cuda.memory._record_memory_history before the run)\n";
    } else if (!v.addresses_recorded) {
      out += "  no addresses in the records: which allocations were live is not known\n";
    } else {
      out += "  live at the peak: " + bytes_text(v.peak_in_window_bytes) + " allocated in the window";
      if (v.totals_recorded) out += ", " + bytes_text(v.peak_bytes - v.peak_in_window_bytes) + " from before it";
      out += "\n";
      append_groups_text(&out, v.live_at_peak, "    ");
      out += "  never freed in the window: " + std::to_string(v.never_freed) + " allocations, " +
             bytes_text(v.never_freed_bytes) + "\n";
      append_groups_text(&out, v.never_freed_groups, "    ");
      out += "  frees of memory allocated before the window: " + std::to_string(v.unmatched_frees) + ", " +
             bytes_text(v.unmatched_free_bytes) + "\n";
    }
    if (!v.steps.empty()) {
      char line[160];
      std::snprintf(line, sizeof line, "  %6s  %10s  %10s  %10s  %10s  %11s\n", "step", "start", "end", "high-water",
                    "spike", "growth");
      out += line;
      for (const MemoryStepView& s : v.steps) {
        std::snprintf(line, sizeof line, "  %6lld  %10s  %10s  %10s  %10s  %11s\n", static_cast<long long>(s.step),
                      bytes_text(s.start_bytes).c_str(), bytes_text(s.end_bytes).c_str(),
                      bytes_text(s.high_water_bytes).c_str(), bytes_text(s.spike_bytes).c_str(),
                      signed_bytes(s.growth_bytes).c_str());
        out += line;
      }
      const auto biggest = std::max_element(v.steps.begin(), v.steps.end(), [](const MemoryStepView& x, const MemoryStepView& y) {
        return x.spike_bytes < y.spike_bytes;
      });
      if (biggest->spike_bytes > 0 && !biggest->spike_groups.empty() && biggest->high_water_ns == v.peak_ns) {
        out += "  largest spike, step " + std::to_string(biggest->step) + ": " + bytes_text(biggest->spike_bytes) +
               " taken and given back, at the peak above\n";
      } else if (biggest->spike_bytes > 0 && !biggest->spike_groups.empty()) {
        out += "  largest spike, step " + std::to_string(biggest->step) + ": " + bytes_text(biggest->spike_bytes) +
               " taken and given back; held at its high-water mark by\n";
        append_groups_text(&out, biggest->spike_groups, "    ");
      }
      if (v.leak.found) {
        out += "  growth: " + signed_bytes(v.leak.growth_bytes) + " over steps " + std::to_string(v.steps[1].step) +
               "-" + std::to_string(v.steps.back().step) + " (" + signed_bytes(v.leak.per_step_bytes) +
               " a step; " + std::to_string(v.leak.growing_steps) + " of " + std::to_string(v.leak.steps) +
               " steps grew) and not given back\n";
        append_groups_text(&out, v.leak.groups, "    ");
      } else if (v.steps.size() >= 3) {
        out += "  growth: none that stays (" + std::to_string(v.leak.growing_steps) + " of " +
               std::to_string(v.leak.steps) + " steps after the first ended higher than they started)\n";
      }
    }
    std::int64_t low = v.timeline.empty() ? 0 : v.timeline.front().min_allocated;
    for (const MemoryPoint& p : v.timeline) low = std::min(low, p.min_allocated);
    out += "  timeline (highest allocated, " + bytes_text(low) + " .. " + bytes_text(v.peak_bytes) +
           "): " + sparkline(v, 60) + "\n";
  }
  if (!r.segments.empty()) {
    std::int64_t total = 0, used = 0, largest_free = 0;
    for (const MemorySegmentState& s : r.segments) {
      total += s.total_bytes;
      used += s.allocated_bytes;
      largest_free = std::max(largest_free, s.largest_free_bytes);
    }
    out += "segments at the snapshot: " + std::to_string(r.segments.size()) + ", " + bytes_text(total) +
           " reserved, " + bytes_text(used) + " allocated, " + bytes_text(total - used) +
           " free in them (largest free block " + bytes_text(largest_free) + ")\n";
  }
  return out;
}

std::string format_memory_markdown(const MemoryReport& r) {
  std::string out = "## Memory\n\n";
  if (r.devices.empty()) return out + "No memory records.\n";
  out += "| device | records | peak allocated | at | peak reserved | never freed | largest spike | growth a step |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const MemoryDeviceView& v : r.devices) {
    std::int64_t spike = 0;
    for (const MemoryStepView& s : v.steps) spike = std::max(spike, s.spike_bytes);
    out += "| " + v.label + " | " + std::to_string(v.records) + " | " + bytes_text(v.peak_bytes) + " | " +
           at_text(r, v.peak_ns) + " | " +
           (v.peak_reserved_bytes == kMemoryAbsent ? std::string("–") : bytes_text(v.peak_reserved_bytes)) + " | " +
           (v.addresses_recorded ? bytes_text(v.never_freed_bytes) : std::string("–")) + " | " +
           (v.steps.empty() ? std::string("–") : bytes_text(spike)) + " | " +
           (v.leak.found ? signed_bytes(v.leak.per_step_bytes) : std::string("–")) + " |\n";
  }
  for (const MemoryDeviceView& v : r.devices) {
    if (v.live_at_peak.empty()) continue;
    out += "\n**" + v.label + ", live at the peak** (" + bytes_text(v.peak_in_window_bytes) +
           " allocated in the window)\n\n| bytes | allocations | op | stack |\n|---:|---:|---|---|\n";
    for (const MemoryGroup& g : v.live_at_peak) {
      out += "| " + bytes_text(g.bytes) + " | " + std::to_string(g.count) + " | `" + group_name_plain(g) + "` | " + (g.stack.empty() ? "" : "`" + g.stack + "`") + " |\n";
    }
  }
  return out;
}

namespace {

void groups_json(internal::JsonWriter& w, const char* key, const std::vector<MemoryGroup>& groups) {
  w.key(key);
  w.begin_array();
  for (const MemoryGroup& g : groups) {
    w.begin_object();
    w.key("op");
    w.value_string(g.op);
    w.key("caller");
    w.value_string(g.caller);
    w.key("stack");
    w.value_string(g.stack);
    w.key("bytes");
    w.value_int(g.bytes);
    w.key("count");
    w.value_int(g.count);
    w.end_object();
  }
  w.end_array();
}

void opt_int(internal::JsonWriter& w, const char* key, std::int64_t v) {
  w.key(key);
  if (v == kMemoryAbsent) {
    w.value_null();
  } else {
    w.value_int(v);
  }
}

}  // namespace

std::string format_memory_json(const MemoryReport& r) {
  std::string out;
  {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    w.key("source");
    w.value_string(r.source);
    w.key("origin_ns");
    w.value_int(r.origin_ns);
    w.key("times_recorded");
    w.value_bool(r.times_recorded);
    w.key("devices");
    w.begin_array();
    for (const MemoryDeviceView& v : r.devices) {
      w.begin_object();
      w.key("device");
      w.value_string(v.label);
      w.key("device_type");
      w.value_int(v.device_type);
      w.key("device_id");
      w.value_int(v.device_id);
      w.key("totals_recorded");
      w.value_bool(v.totals_recorded);
      w.key("reserved_recorded");
      w.value_bool(v.reserved_recorded);
      w.key("addresses_recorded");
      w.value_bool(v.addresses_recorded);
      for (const auto& [k, x] : {std::pair<const char*, std::int64_t>{"records", v.records},
                                 {"allocations", v.allocations},
                                 {"frees", v.frees},
                                 {"allocated_bytes", v.allocated_bytes},
                                 {"freed_bytes", v.freed_bytes},
                                 {"first_ns", v.first_ns},
                                 {"last_ns", v.last_ns},
                                 {"start_bytes", v.start_bytes},
                                 {"end_bytes", v.end_bytes},
                                 {"peak_bytes", v.peak_bytes},
                                 {"peak_ns", v.peak_ns}}) {
        w.key(k);
        w.value_int(x);
      }
      w.key("peak_event");
      if (v.peak_source == kNoIndex) {
        w.value_null();
      } else {
        w.value_int(v.peak_source);
      }
      opt_int(w, "peak_reserved_bytes", v.peak_reserved_bytes);
      opt_int(w, "max_reserved_minus_allocated_bytes", v.max_gap_bytes);
      opt_int(w, "end_reserved_minus_allocated_bytes", v.end_gap_bytes);
      if (v.addresses_recorded) {
        w.key("peak_in_window_bytes");
        w.value_int(v.peak_in_window_bytes);
        groups_json(w, "live_at_peak", v.live_at_peak);
        w.key("never_freed");
        w.value_int(v.never_freed);
        w.key("never_freed_bytes");
        w.value_int(v.never_freed_bytes);
        groups_json(w, "never_freed_groups", v.never_freed_groups);
        w.key("unmatched_frees");
        w.value_int(v.unmatched_frees);
        w.key("unmatched_free_bytes");
        w.value_int(v.unmatched_free_bytes);
      }
      w.key("steps");
      w.begin_array();
      for (const MemoryStepView& s : v.steps) {
        w.begin_object();
        for (const auto& [k, x] : {std::pair<const char*, std::int64_t>{"step", s.step},
                                   {"start_ns", s.start_ns},
                                   {"end_ns", s.end_ns},
                                   {"records", s.records},
                                   {"start_bytes", s.start_bytes},
                                   {"end_bytes", s.end_bytes},
                                   {"high_water_bytes", s.high_water_bytes},
                                   {"high_water_ns", s.high_water_ns},
                                   {"spike_bytes", s.spike_bytes},
                                   {"growth_bytes", s.growth_bytes}}) {
          w.key(k);
          w.value_int(x);
        }
        groups_json(w, "spike_groups", s.spike_groups);
        w.end_object();
      }
      w.end_array();
      w.key("leak");
      w.begin_object();
      w.key("found");
      w.value_bool(v.leak.found);
      w.key("steps");
      w.value_int(v.leak.steps);
      w.key("growing_steps");
      w.value_int(v.leak.growing_steps);
      w.key("growth_bytes");
      w.value_int(v.leak.growth_bytes);
      w.key("per_step_bytes");
      w.value_int(v.leak.per_step_bytes);
      groups_json(w, "groups", v.leak.groups);
      w.end_object();
      w.key("timeline");
      w.begin_array();
      for (const MemoryPoint& p : v.timeline) {
        w.begin_array();
        w.value_int(p.start_ns);
        w.value_int(p.min_allocated);
        w.value_int(p.max_allocated);
        w.value_int(p.last_allocated);
        if (p.max_reserved == kMemoryAbsent) {
          w.value_null();
        } else {
          w.value_int(p.max_reserved);
        }
        w.end_array();
      }
      w.end_array();
      w.key("timeline_columns");
      w.value_raw(R"(["start_ns", "min_allocated", "max_allocated", "last_allocated", "max_reserved"])");
      w.end_object();
    }
    w.end_array();
    w.key("segments");
    w.begin_array();
    for (const MemorySegmentState& s : r.segments) {
      w.begin_object();
      w.key("device_id");
      w.value_int(s.device_id);
      w.key("address");
      w.value_uint(s.address);
      w.key("total_bytes");
      w.value_int(s.total_bytes);
      w.key("allocated_bytes");
      w.value_int(s.allocated_bytes);
      w.key("largest_free_bytes");
      w.value_int(s.largest_free_bytes);
      w.key("blocks");
      w.value_int(s.blocks);
      w.key("segment_type");
      w.value_string(s.segment_type);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  out += "\n";
  return out;
}

namespace {

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string format_memory_csv(const MemoryInput& in, const MemoryReport& r) {
  std::string out = "device,ts_ns,bytes,addr,allocated,reserved,step,op,stack\n";
  for (const MemoryDeviceView& v : r.devices) {
    const auto d = std::find_if(in.devices.begin(), in.devices.end(), [&](const MemoryDeviceInput& x) {
      return x.device_type == v.device_type && x.device_id == v.device_id;
    });
    if (d == in.devices.end()) continue;
    const MemorySeries series = memory_series(in, *d);
    for (std::size_t k = 0; k < d->samples.size(); ++k) {
      const MemorySample& s = d->samples[k];
      const MemorySite* site = s.site < in.sites.size() ? &in.sites[s.site] : nullptr;
      out += csv_field(v.label) + "," + std::to_string(s.ts_ns) + "," + std::to_string(s.bytes) + "," +
             (s.addr != 0 ? std::to_string(s.addr) : "") + "," + std::to_string(series.allocated[k]) + "," +
             (v.reserved_recorded && s.reserved != kMemoryAbsent ? std::to_string(s.reserved) : "") + "," +
             (series.step[k] != kNoIndex ? std::to_string(in.steps[series.step[k]].step) : "") + "," +
             csv_field(site ? site->op : "") + "," + csv_field(site ? site->stack : "") + "\n";
    }
  }
  return out;
}

}  // namespace tprof
