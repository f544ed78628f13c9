// tprof report TRACE [TRACE_B] -o FILE: one self-contained HTML page
// (docs/report.md); with two traces, B's page with B compared against A;
// with a directory of rank traces the job's page, with two the jobs compared.
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/compare.h"
#include "tprof/html_report.h"
#include "tprof/ranks.h"

namespace tprof::cli {

namespace {

// A directory: one trace per rank, the job view as a page (docs/scale.md).
int report_dir(const std::string& dir, const std::string& output) {
  std::vector<std::string> files;
  const std::optional<JobSummary> job = load_job_dir(dir, &files);
  if (!job) return kExitBadInput;
  return emit(format_job_html(compute_job_view(*job)), output, files);
}

// Two directories: job B against job A as a page (tprof compare --jobs A B
// --format html, docs/compare.md "Jobs").
int report_dirs(const std::string& a, const std::string& b, const std::string& output) {
  std::vector<std::string> files_a, files_b;  // each job's own list (load_job_dir reads the one it is given)
  const std::optional<JobSummary> ja = load_job_dir(a, &files_a);
  if (!ja) return kExitBadInput;
  const std::optional<JobSummary> jb = load_job_dir(b, &files_b);
  if (!jb) return kExitBadInput;
  files_a.insert(files_a.end(), files_b.begin(), files_b.end());
  return emit(format_job_comparison_html(compare_jobs(*ja, *jb), {.label_a = a, .label_b = b}), output, files_a);
}

}  // namespace

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
  cmd->add_option("TRACE", a->traces,
                  "Trace file (.json or .json.gz; - reads stdin); or two: A (baseline) and B; or a directory of one "
                  "trace per rank (the job view of tprof diagnose DIR); or two such directories: job B against job A "
                  "(tprof compare --jobs A B --format html)")
      ->required()
      ->expected(1, 2);
  cmd->add_option("-o,--output", a->output, "The HTML file to write")->required();
  cmd->callback([a, rc] {
    auto file_name = [](const std::string& path) { return std::filesystem::path(path).filename().string(); };
    std::error_code ec;
    if (a->traces.size() == 1 && std::filesystem::is_directory(a->traces[0], ec)) {
      *rc = report_dir(a->traces[0], a->output);
      return;
    }
    if (a->traces.size() == 2) {
      const bool dir_a = std::filesystem::is_directory(a->traces[0], ec);
      const bool dir_b = std::filesystem::is_directory(a->traces[1], ec);
      if (dir_a && dir_b) {
        *rc = report_dirs(a->traces[0], a->traces[1], a->output);
        return;
      }
      if (dir_a || dir_b) {
        std::cerr << "tprof: report A B takes two traces or two job directories, not one of each ("
                  << a->traces[dir_a ? 0 : 1] << " is a directory)\n";
        *rc = kExitBadInput;
        return;
      }
    }
    if (a->traces.size() == 1) {
      std::optional<Trace> trace = load_trace(a->traces[0]);
      if (!trace) {
        *rc = kExitBadInput;
        return;
      }
      const std::string html = format_report_html(*trace, {.trace_file_name = file_name(a->traces[0])});
      note_diagnostics(*trace, a->traces[0]);
      *rc = emit(html, a->output, a->traces[0], Markup::kJson);  // its data is JSON for the page's script
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
    *rc = emit(html, a->output, a->traces, Markup::kJson);
  });
}

}  // namespace tprof::cli
