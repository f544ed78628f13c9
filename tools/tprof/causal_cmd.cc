// tprof critical-path TRACE and tprof whatif TRACE --edit EDIT: the causal
// model of a trace (docs/critical-path.md).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/tprof/common.h"
#include "tprof/causal.h"
#include "tprof/causal_report.h"
#include "tprof/write.h"

namespace tprof::cli {
namespace {

struct Args {
  std::string trace, format = "text", output, overlay, annotation;
  std::optional<std::int64_t> step;
  std::size_t instance = 0;
  bool instance_set = false;
  std::vector<std::string> edits;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "tprof: %s\n", what.c_str());
  return kExitBadInput;
}

// Loads, analyzes, prints; the overlay, when asked, after the text.
int run(const Args& a, bool whatif) {
  std::vector<WhatIfEdit> edits;
  for (const std::string& e : a.edits) {
    auto parsed = parse_whatif_edit(e);
    if (!parsed) return fail(parsed.error().to_string());
    edits.push_back(std::move(*parsed));
  }
  if (!a.overlay.empty() && a.overlay == a.trace) return fail(a.overlay + ": --overlay would overwrite the input trace");
  if (!a.annotation.empty() && a.step) return fail("--step and --annotation choose the window: give one");
  std::optional<Trace> trace = load_trace(a.trace);
  if (!trace) return kExitBadInput;
  CausalOptions opts;
  opts.edits = edits;
  auto r = analyze_causal(*trace, opts);
  if (!r) return fail(a.trace + ": " + r.error().message());
  CausalReportOptions ro;
  ro.format = a.format;
  if (a.step) {
    for (std::size_t i = 0; i < r->steps.size(); ++i)
      if (r->steps[i].step == *a.step) ro.step = i;
    if (!ro.step) {
      std::string have = r->has_steps ? "steps " + std::to_string(r->steps.front().step) + " to " +
                                            std::to_string(r->steps.back().step)
                                      : "no ProfilerStep";
      return fail(a.trace + ": --step " + std::to_string(*a.step) + ": no such step (the trace has " + have + ")");
    }
  }
  if (!a.annotation.empty()) {
    auto p = annotation_critical_path(*trace, *r, a.annotation, a.instance);
    if (!p) return fail(a.trace + ": " + p.error().message());
    ro.window = std::move(*p);
    ro.window_label = "\"" + a.annotation + "\" instance " + std::to_string(a.instance);
  } else if (a.instance_set) {
    return fail("--instance needs --annotation NAME");
  }
  const std::string text = whatif ? format_whatif(*trace, *r, ro) : format_critical_path(*trace, *r, ro);
  note_diagnostics(*trace, a.trace);
  const int rc = emit(text, a.output, a.trace, a.format == "json" ? Markup::kJson : Markup::kNone);
  if (rc != kExitOk || a.overlay.empty()) return rc;
  std::vector<const CriticalPath*> paths;
  if (ro.window) {
    paths.push_back(&*ro.window);
  } else if (ro.step) {
    paths.push_back(&r->steps[*ro.step].path);
  } else {
    for (const StepTime& s : r->steps) paths.push_back(&s.path);
  }
  overlay_critical_path(&*trace, *r->graph, paths);
  const Status st = write_trace(*trace, a.overlay);
  if (!st) return fail(st.error().to_string());
  return kExitOk;
}

void common_options(CLI::App* cmd, const std::shared_ptr<Args>& a) {
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz; - reads stdin)")->required();
  cmd->add_option("--format", a->format, "text, json or md")
      ->check(CLI::IsMember({"text", "json", "md"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->add_option("--overlay", a->overlay,
                  "Also write the trace with the critical path marked (args \"critical\": 1, \"critical_path\" "
                  "flows), as HolisticTraceAnalysis' overlay does (.json or .json.gz)");
}

}  // namespace

void add_critical_path_command(CLI::App& app, int* rc) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "critical-path", "The critical path per step: its length, share by bound type (HTA's), the events on it");
  common_options(cmd, a);
  cmd->add_option("--step", a->step, "One step's path in detail (N of ProfilerStep#N)");
  cmd->add_option("--annotation", a->annotation, "The window of a host event of this name (with --instance)");
  cmd->add_option("--instance", a->instance, "Which one of the --annotation events, from 0 (default 0)")
      ->each([a](const std::string&) { a->instance_set = true; });
  cmd->callback([a, rc] { *rc = run(*a, false); });
}

void add_whatif_command(CLI::App& app, int* rc) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "whatif", "Replay the trace with edits: measured, replayed and predicted time per step, the new critical path");
  common_options(cmd, a);
  cmd->add_option("--edit", a->edits,
                  "remove:PATTERN, scale:PATTERN=F (PATTERN also gemm, elementwise, communication), graph, release, "
                  "drop-sync:PATTERN or overlap:PATTERN; PATTERN an event name or a regular expression; repeatable")
      ->required();
  cmd->callback([a, rc] { *rc = run(*a, true); });
}

}  // namespace tprof::cli
