// tprof diagnose TRACE: per-step verdicts, findings with evidence, the peers' breakdowns.
// tprof diagnose DIR: every trace under DIR as one rank each, read in
// parallel, summarized and merged into the job view (tprof/ranks.h).
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/diagnose.h"
#include "tprof/ranks.h"

namespace tprof::cli {

namespace {

struct Args {
  std::string trace, format = "text", output;
  std::vector<std::string> only;
  bool verbose = false;
};

int diagnose_dir(const Args& a) {
  std::vector<std::string> files;
  const std::optional<JobSummary> job = load_job_dir(a.trace, &files);
  if (!job) return kExitBadInput;
  return emit(format_job(compute_job_view(*job), a.format), a.output, files,
              a.format == "json" ? Markup::kJson : Markup::kNone);
}

}  // namespace

void add_diagnose_command(CLI::App& app, int* rc) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("diagnose", "Verdict per step, findings with evidence, GPU time breakdowns; "
                                                 "a directory: one rank per trace, stragglers, HTA's job breakdowns");
  cmd->add_option("TRACE", a->trace,
                  "Trace file (.json or .json.gz; - reads stdin), or a directory of one trace per rank")
      ->required();
  cmd->add_option("--format", a->format, "text, json or md")
      ->check(CLI::IsMember({"text", "json", "md"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->add_option("--only", a->only, "Run only these rule ids (one trace)")->check(CLI::IsMember(rule_ids()));
  cmd->add_flag("--verbose,-v", a->verbose, "Text: every step and every finding with all its evidence (one trace)");
  cmd->callback([a, rc] {
    std::error_code ec;
    if (std::filesystem::is_directory(a->trace, ec)) {
      *rc = diagnose_dir(*a);
      return;
    }
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const Diagnosis d = diagnose(*trace, {.only = a->only, .threads = global_options().threads});
    const std::string text = a->format == "json" ? format_diagnosis_json(*trace, d)
                             : a->format == "md" ? format_diagnosis_md(*trace, d)
                                                 : format_diagnosis_text(*trace, d, {.verbose = a->verbose});
    note_diagnostics(*trace, a->trace);
    *rc = emit(text, a->output, a->trace,
               a->format == "text"   ? Markup::kSeverities
               : a->format == "json" ? Markup::kJson
                                     : Markup::kNone);
  });
}

}  // namespace tprof::cli
