// Fuzz target: what an expert-reading run does with whatever loads —
// diagnose (every rule), its text, Markdown and JSON, steps and kernels.
//
// Properties beyond "does not crash" (and, under UBSan in make test, no
// undefined arithmetic on extreme values):
//   - diagnose's, steps' and kernels' JSON are valid JSON (tprof's own parser);
//   - every finding is in exactly one cause, and the verdict's support names
//     findings that exist (tprof/diagnose.h);
//   - a step's GPU idle share is a percentage, its times are not negative;
//   - the causal model (tprof/causal.h): every step's critical path sums
//     to its length (shares + unexplained), which is the step's replayed
//     time; the graph edit never makes a step end later (max-plus); the
//     critical-path and whatif JSON are valid JSON.
// Seeds: tests/fuzz/corpus_gpu (real GPU traces) and tests/fuzz/corpus.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "src/trace/json_value.h"
#include "tprof/causal.h"
#include "tprof/causal_report.h"
#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "diagnose_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

void expect_json(const std::string& text, const char* what) {
  const auto parsed = tprof::internal::JsonValue::parse(text);
  if (!parsed) property_failed(what, parsed.error().to_string() + "\n" + text.substr(0, 2000));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tprof::ReadOptions serial;
  serial.threads = 1;
  const tprof::Result<tprof::Trace> trace =
      tprof::read_trace_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", serial);
  if (!trace) return 0;

  const tprof::Diagnosis d = tprof::diagnose(*trace);
  (void)tprof::format_diagnosis_text(*trace, d);
  (void)tprof::format_diagnosis_md(*trace, d);
  expect_json(tprof::format_diagnosis_json(*trace, d), "diagnose JSON is not valid JSON");
  std::vector<int> in_causes(d.findings.size(), 0);
  for (const tprof::Cause& c : d.causes) {
    for (std::size_t i : c.findings) {
      if (i >= d.findings.size()) property_failed("a cause points past the findings", c.id);
      ++in_causes[i];
    }
  }
  for (std::size_t i = 0; i < d.findings.size(); ++i) {
    if (in_causes[i] != 1) property_failed("a finding not in exactly one cause", d.findings[i].id);
  }
  for (const std::string& id : d.support) {
    bool found = false;
    for (const tprof::Finding& f : d.findings) found = found || f.id == id;
    if (!found) property_failed("the verdict's support names no finding", id);
  }
  for (const tprof::StepVerdict& s : d.steps) {
    if (!(s.gpu_idle_pct >= 0 && s.gpu_idle_pct <= 100)) {
      property_failed("a step's GPU idle share is not a percentage", std::to_string(s.gpu_idle_pct));
    }
    if (s.cpu_span_ns < 0 || s.gpu_busy_ns < 0 || s.idle_launch_ns < 0 || s.idle_host_ns < 0 ||
        s.idle_queued_ns < 0 || s.idle_unrecorded_ns < 0) {
      property_failed("a negative time in a step", std::to_string(s.step));
    }
  }

  auto causal = tprof::analyze_causal(*trace);
  if (!causal) property_failed("analyze_causal failed without edits", causal.error().to_string());
  for (const tprof::StepTime& s : causal->steps) {
    std::int64_t sum = s.path.unexplained_ns;
    for (std::int64_t b : s.path.bound_ns) sum += b;
    if (sum != s.path.length_ns() || s.path.length_ns() != s.replayed_ns) {
      property_failed("a step's critical path does not add up to its replayed time",
                      "step " + std::to_string(s.step) + ": shares " + std::to_string(sum) + ", length " +
                          std::to_string(s.path.length_ns()) + ", replayed " + std::to_string(s.replayed_ns));
    }
  }
  tprof::CausalReportOptions json;
  json.format = "json";
  expect_json(tprof::format_critical_path(*trace, *causal, json), "critical-path JSON is not valid JSON");
  (void)tprof::format_critical_path(*trace, *causal);
  auto graph = tprof::analyze_causal(*trace, causal->graph, {.edits = {*tprof::parse_whatif_edit("graph")}});
  if (graph) {
    for (const tprof::StepTime& s : graph->steps) {
      if (s.predicted_end_ns > s.replayed_end_ns) property_failed("the graph edit made a step end later", std::to_string(s.step));
    }
    expect_json(tprof::format_whatif(*trace, *graph, json), "whatif JSON is not valid JSON");
  }

  const tprof::StepsSummary steps = tprof::compute_steps(*trace);
  (void)tprof::format_steps_text(*trace, steps);
  expect_json(tprof::format_steps_json(*trace, steps), "steps JSON is not valid JSON");

  const tprof::KernelsSummary kernels = tprof::compute_kernels(*trace);
  (void)tprof::format_kernels_text(kernels);
  expect_json(tprof::format_kernels_json(kernels), "kernels JSON is not valid JSON");
  return 0;
}
