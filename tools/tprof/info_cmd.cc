// tprof info TRACE: what the trace holds, and every diagnostic.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/info.h"

namespace tprof::cli {

void add_info_command(CLI::App& app, int* rc) {
  // No diagnostics note: the output lists every diagnostic itself.
  add_report_command(app, rc, "info", "Format, events by kind, lanes and diagnostics of a trace", {"text", "json"}, false,
                     [](const Trace& t, const std::string& format) {
                       return format == "json" ? format_info_json(t) : format_info_text(t);
                     });
}

}  // namespace tprof::cli
