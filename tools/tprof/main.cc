// tprof — read torch.profiler / Kineto traces the way an expert would, and
// record unmodified CUDA programs into them.
// The CLI parses flags, calls the library and prints; it has no logic of its own.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/read.h"

int main(int argc, char** argv) {
  using namespace tprof::cli;
  CLI::App app{"tprof: torch.profiler tables, steps and findings from any torch/Kineto trace"};
  app.require_subcommand(1);
  app.add_flag("-q,--quiet", global_options().quiet, "No progress bar and no diagnostics note on stderr");
  app.add_option("--threads", global_options().threads, "Parser threads (0 = all cores, at most 256)")
      ->check(CLI::Range(0, tprof::kMaxReaderThreads));
  int rc = kExitOk;
  add_table_command(app, &rc);
  add_steps_command(app, &rc);
  add_info_command(app, &rc);
  add_diagnose_command(app, &rc);
  add_kernels_command(app, &rc);
  add_compare_command(app, &rc);
  add_record_command(app, &rc);
  add_serve_command(app, &rc);
  add_sweep_command(app, &rc);
  add_report_html_command(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  return rc;
}
