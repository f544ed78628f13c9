// tprof summarize TRACE -o rank.summary.json: the small per-rank summary
// that tprof merge turns into the job view (docs/scale.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/ranks.h"

namespace tprof::cli {

void add_summarize_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("summarize", "One rank's summary for tprof merge (per-step phases, HTA overlap "
                                                  "and kernel-type times, verdict)");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz; - reads stdin) of one rank")->required();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc] {
    std::vector<RankSummary> summaries;
    if (!summarize_traces({a->trace}, &summaries)) {
      *rc = kExitBadInput;
      return;
    }
    *rc = emit(format_rank_summary_json(JobSummary{std::move(summaries)}), a->output, a->trace, Markup::kJson);
  });
}

}  // namespace tprof::cli
