// tprof steps TRACE: one row per ProfilerStep#N.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/steps.h"

namespace tprof::cli {

void add_steps_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("steps", "One row per ProfilerStep: duration, CPU/GPU busy, GPU idle, launch offset");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz)")->required();
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const StepsSummary s = compute_steps(*trace);
    note_diagnostics(*trace, a->trace);
    *rc = emit(a->format == "json" ? format_steps_json(*trace, s) : format_steps_text(*trace, s), a->output);
  });
}

}  // namespace tprof::cli
