// tprof report TRACE [TRACE_B] -o FILE: one self-contained HTML page
// (docs/report.md); with two traces, B's page with B compared against A.
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/html_report.h"

namespace tprof::cli {

void add_report_html_command(CLI::App& app, int* rc) {
  struct Args {
    std::vector<std::string> traces;
    std::string output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Self-contained HTML report (verdict, causes, steps, timeline, CPU flame graph, kernel durations, op table); "
      "opens offline. Given A B: B's report with B compared against A");
  cmd->add_option("TRACE", a->traces, "Trace file (.json or .json.gz; - reads stdin); or two: A (baseline) and B")
      ->required()
      ->expected(1, 2);
  cmd->add_option("-o,--output", a->output, "The HTML file to write")->required();
  cmd->callback([a, rc] {
    auto file_name = [](const std::string& path) { return std::filesystem::path(path).filename().string(); };
    if (a->traces.size() == 1) {
      std::optional<Trace> trace = load_trace(a->traces[0]);
      if (!trace) {
        *rc = kExitBadInput;
        return;
      }
      const std::string html = format_report_html(*trace, {.trace_file_name = file_name(a->traces[0])});
      note_diagnostics(*trace, a->traces[0]);
      *rc = emit(html, a->output, a->traces[0]);
      return;
    }
    // Both traces load at once; errors are reported in argument order.
    const std::string& pa = a->traces[0];
    const std::string& pb = a->traces[1];
    std::string error_b;
    std::future<std::optional<Trace>> fb =
        std::async(std::launch::async, [&] { return load_trace(pb, false, &error_b); });
    std::string error_a;
    std::optional<Trace> ta = load_trace(pa, true, &error_a);
    std::optional<Trace> tb = fb.get();
    std::cerr << error_a << error_b;
    if (!ta || !tb) {
      *rc = kExitBadInput;
      return;
    }
    HtmlReportOptions options;
    options.trace_file_name = file_name(pb);
    options.baseline_file_name = file_name(pa);
    const std::string html = format_compare_report_html(*ta, *tb, options);
    note_diagnostics(*ta, pa);
    note_diagnostics(*tb, pb);
    *rc = emit(html, a->output, a->traces);
  });
}

}  // namespace tprof::cli
