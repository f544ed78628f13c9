// tprof info TRACE: what the trace holds, and every diagnostic.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/info.h"

namespace tprof::cli {

void add_info_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("info", "Format, events by kind, lanes and diagnostics of a trace");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz)")->required();
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    *rc = emit(a->format == "json" ? format_info_json(*trace) : format_info_text(*trace), a->output);
  });
}

}  // namespace tprof::cli
