// tprof kernels TRACE: per device-activity name count, total, mean, median, p90, min, max, cv, outlier steps.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/kernels.h"

namespace tprof::cli {

void add_kernels_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("kernels", "Per kernel: count, total, mean, median, p90, min, max, CV, outlier steps");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz)")->required();
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const KernelsSummary k = compute_kernels(*trace);
    note_diagnostics(*trace, a->trace);
    *rc = emit(a->format == "json" ? format_kernels_json(k) : format_kernels_text(k), a->output);
  });
}

}  // namespace tprof::cli
