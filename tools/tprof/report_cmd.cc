// tprof report TRACE -o FILE: one self-contained HTML page (docs/report.md).
#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/html_report.h"

namespace tprof::cli {

void add_report_html_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Self-contained HTML report (verdict, causes, steps, kernel durations, op table); opens offline");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz)")->required();
  cmd->add_option("-o,--output", a->output, "The HTML file to write")->required();
  cmd->callback([a, rc] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const std::string html =
        format_report_html(*trace, {.trace_file_name = std::filesystem::path(a->trace).filename().string()});
    note_diagnostics(*trace, a->trace);
    *rc = emit(html, a->output, a->trace);
  });
}

}  // namespace tprof::cli
