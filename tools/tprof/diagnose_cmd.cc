// tprof diagnose TRACE: per-step verdicts, findings with evidence, the peers' breakdowns.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/diagnose.h"

namespace tprof::cli {

void add_diagnose_command(CLI::App& app, int* rc) {
  auto only = std::make_shared<std::vector<std::string>>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = add_report_command(
      app, rc, "diagnose", "Verdict per step, findings with evidence, GPU time breakdowns", {"text", "json", "md"}, true,
      [only, verbose](const Trace& t, const std::string& format) {
        const Diagnosis d = diagnose(t, {.only = *only});
        return format == "json" ? format_diagnosis_json(t, d)
               : format == "md" ? format_diagnosis_md(t, d)
                                : format_diagnosis_text(t, d, {.verbose = *verbose});
      });
  cmd->add_option("--only", *only, "Run only these rule ids")->check(CLI::IsMember(rule_ids()));
  cmd->add_flag("--verbose,-v", *verbose, "Text: every step and every finding with all its evidence");
}

}  // namespace tprof::cli
