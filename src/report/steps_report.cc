#include <cmath>
#include <string>

#include "src/base/json_writer.h"
#include "src/report/py_format.h"
#include "tprof/steps.h"

namespace tprof {

namespace {

std::string ms(std::int64_t ns) { return internal::fixed(static_cast<double>(ns) / 1e6, 3); }
std::string t(std::int64_t ns) { return internal::format_time_us(static_cast<double>(ns) / 1000.0); }

}  // namespace

std::string format_steps_text(const Trace& trace, const StepsSummary& s) {
  std::string out;
  if (s.steps.empty()) {
    if (!s.range.empty()) return "no call of \"" + s.range + "\" on a host thread in this trace\n";
    out = s.closing_step_only
              ? "no iteration in this trace's ProfilerStep#N events: the one recorded holds only the profiler's closing "
                "step() call (profile with a schedule whose active steps call prof.step() after each iteration"
          : s.empty_markers > 0
              ? "no iteration in this trace's " + std::to_string(s.empty_markers) +
                    " ProfilerStep#N events: none holds another event, so they mark the step() calls, not the "
                    "iterations (a legacy export's; profile with a PyTorch build that has Kineto"
              : "no ProfilerStep#N events in this trace (profile with a schedule and call prof.step()";
    if (s.candidates.empty()) return out + ", or name a repeated range with --step-range NAME)\n";
    out += "); several repeated ranges could be the steps:";
    for (std::size_t i = 0; i < s.candidates.size(); ++i) out += (i ? ", \"" : " \"") + s.candidates[i] + "\"";
    return out + ": choose one with --step-range NAME\n";
  }
  if (!s.range.empty()) {
    out = "Steps: the " + std::to_string(s.steps.size()) + " calls of \"" + s.range + "\"" +
          (s.detected ? " (no ProfilerStep#N: the one repeated range covering the run; --step-range NAME chooses "
                        "another)\n"
                      : " (--step-range)\n");
  }
  const char* const headers[] = {"Step", "Start (ms)", "Duration", "CPU busy", "GPU busy", "GPU idle", "Launches",
                                 "First kernel - launch"};
  const std::size_t widths[] = {8, 12, 12, 12, 12, 10, 10, 22};
  auto row = [&](const std::string* cells) {
    for (std::size_t i = 0; i < 8; ++i) {
      internal::append_right(&out, cells[i], widths[i]);
      out.append(i + 1 < 8 ? "  " : "\n");
    }
  };
  std::string head[8];
  for (std::size_t i = 0; i < 8; ++i) head[i] = headers[i];
  row(head);
  std::size_t unnumbered = 0;
  for (const StepStat& st : s.steps) {
    if (!st.numbered) ++unnumbered;
    std::string cells[8] = {
        std::to_string(st.step) + (st.numbered ? "" : "*"),
        ms(st.start_ns - s.trace_start_ns),
        t(st.dur_ns),
        t(st.cpu_busy_ns),
        s.has_device ? t(st.gpu_busy_ns) : "-",
        s.has_device ? internal::fixed(st.gpu_idle_pct, 1) + "%" : "-",
        s.has_device ? std::to_string(st.launches) : "-",
        st.first_kernel_offset_ns ? t(*st.first_kernel_offset_ns) : "-",
    };
    row(cells);
  }
  if (unnumbered > 0) {
    out += "* " + std::to_string(unnumbered) +
           " step name(s) hold no usable number (ProfilerStep#abc, ProfilerStep#, past int64): numbered after the "
           "step before\n";
  }
  (void)trace;
  return out;
}

std::string format_steps_json(const Trace& trace, const StepsSummary& s) {
  std::string out;
  internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
  w.begin_object();
  w.key("has_device");
  w.value_bool(s.has_device);
  w.key("trace_start_ns");
  w.value_int(s.trace_start_ns);
  // ProfilerStep#N steps keep the document as it was.
  if (!s.range.empty()) {
    w.key("step_range");
    w.value_string(s.range);
    w.key("step_range_detected");
    w.value_bool(s.detected);
  }
  if (s.closing_step_only) {
    w.key("closing_step_only");
    w.value_bool(true);
  }
  if (s.empty_markers > 0) {
    w.key("empty_step_markers");
    w.value_int(s.empty_markers);
  }
  if (!s.candidates.empty()) {
    w.key("step_range_candidates");
    w.begin_array();
    for (const std::string& c : s.candidates) w.value_string(c);
    w.end_array();
  }
  w.key("steps");
  w.begin_array();
  for (const StepStat& st : s.steps) {
    w.begin_object();
    w.key("step");
    w.value_int(st.step);
    if (!st.numbered) {
      w.key("numbered");
      w.value_bool(false);
    }
    w.key("start_ns");
    w.value_int(st.start_ns);
    w.key("start_offset_ns");
    w.value_int(st.start_ns - s.trace_start_ns);
    w.key("dur_ns");
    w.value_int(st.dur_ns);
    w.key("cpu_busy_ns");
    w.value_int(st.cpu_busy_ns);
    if (s.has_device) {
      w.key("gpu_busy_ns");
      w.value_int(st.gpu_busy_ns);
      w.key("gpu_idle_pct");
      w.value_double(std::round(st.gpu_idle_pct * 100.0) / 100.0);
      w.key("launches");
      w.value_int(st.launches);
    }
    if (st.first_kernel_offset_ns) {
      w.key("first_kernel");
      w.begin_object();
      w.key("name");
      w.value_string(trace.name(st.first_kernel_event));
      w.key("ts_ns");
      w.value_int(trace.events.ts_ns[st.first_kernel_event]);
      w.key("launch_name");
      w.value_string(trace.name(st.first_launch_event));
      w.key("launch_ts_ns");
      w.value_int(trace.events.ts_ns[st.first_launch_event]);
      w.key("offset_ns");
      w.value_int(*st.first_kernel_offset_ns);
      w.end_object();
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
  out.push_back('\n');
  return out;
}

}  // namespace tprof
