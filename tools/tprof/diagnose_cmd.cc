// tprof diagnose TRACE: per-step verdicts, findings with evidence, the peers' breakdowns.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/diagnose.h"

namespace tprof::cli {

void add_diagnose_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, format = "text", output;
    std::vector<std::string> only;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("diagnose", "Verdict per step, findings with evidence, GPU time breakdowns");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz)")->required();
  cmd->add_option("--format", a->format, "text, json or md")->check(CLI::IsMember({"text", "json", "md"}))->capture_default_str();
  cmd->add_option("--only", a->only, "Run only these rule ids")->check(CLI::IsMember(rule_ids()));
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const Diagnosis d = diagnose(*trace, {.only = a->only});
    note_diagnostics(*trace, a->trace);
    const std::string text = a->format == "json" ? format_diagnosis_json(*trace, d)
                             : a->format == "md" ? format_diagnosis_md(*trace, d)
                                                 : format_diagnosis_text(*trace, d);
    *rc = emit(text, a->output);
  });
}

}  // namespace tprof::cli
