// tprof merge A.summary.json B.summary.json ...: the job view of rank
// summaries, the same bytes as tprof diagnose DIR over the same traces;
// --format summary writes the merged summary, itself mergeable.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/base/file.h"
#include "tools/tprof/common.h"
#include "tprof/ranks.h"

namespace tprof::cli {

void add_merge_command(CLI::App& app, int* rc) {
  struct Args {
    std::vector<std::string> inputs;
    std::string format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("merge", "Merge rank summaries (tprof summarize) into the job view of tprof diagnose DIR");
  cmd->add_option("SUMMARY", a->inputs, "Summary files (tprof summarize, or tprof merge --format summary)")->required();
  cmd->add_option("--format", a->format, "text, json, md, or summary (a merged summary file)")
      ->check(CLI::IsMember({"text", "json", "md", "summary"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::vector<JobSummary> parts;
    for (const std::string& path : a->inputs) {
      Result<std::string> text = internal::read_file(path);
      if (!text) {
        std::cerr << "tprof: " << text.error().with_path(path).to_string() << "\n";
        *rc = kExitBadInput;
        return;
      }
      Result<JobSummary> part = parse_rank_summary_json(*text);
      if (!part) {
        std::cerr << "tprof: " << path << ": " << part.error().message() << "\n";
        *rc = kExitBadInput;
        return;
      }
      parts.push_back(std::move(part).value());
    }
    Result<JobSummary> job = merge_summaries(parts);
    if (!job) {
      std::cerr << "tprof: " << job.error().message() << "\n";
      *rc = kExitBadInput;
      return;
    }
    const std::string text =
        a->format == "summary" ? format_rank_summary_json(*job) : format_job(compute_job_view(*job), a->format);
    const bool json = a->format == "summary" || a->format == "json";
    *rc = emit(text, a->output, a->inputs, json ? Markup::kJson : Markup::kNone);
  });
}

}  // namespace tprof::cli
