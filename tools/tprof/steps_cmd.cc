// tprof steps TRACE: one row per ProfilerStep#N.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/steps.h"

namespace tprof::cli {

void add_steps_command(CLI::App& app, int* rc) {
  add_report_command(app, rc, "steps", "One row per ProfilerStep: duration, CPU/GPU busy, GPU idle, launch offset",
                     {"text", "json"}, true, [](const Trace& t, const std::string& format) {
                       const StepsSummary s = compute_steps(t);
                       return format == "json" ? format_steps_json(t, s) : format_steps_text(t, s);
                     });
}

}  // namespace tprof::cli
