// tprof export --sqlite TRACE -o FILE: the trace and its derived views as an
// SQLite database (docs/sql.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "src/base/file.h"
#include "tools/tprof/common.h"
#if TPROF_HAVE_SQLITE
#include "src/export/sqlite_export.h"
#endif

namespace tprof::cli {

void add_export_command(CLI::App& app, int* rc) {
  struct Args {
    std::string trace, output;
    bool sqlite = false;
    bool no_args = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write the trace and its derived views (steps, kernels with their ops, breakdowns) as an SQLite database");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz; - reads stdin)")->required();
  cmd->add_flag("--sqlite", a->sqlite, "Write an SQLite database (schema and example queries: docs/sql.md)");
  cmd->add_option("-o,--output", a->output, "The database to write (put in place whole; - is stdout unless a terminal)")
      ->required();
  cmd->add_flag("--no-args", a->no_args, "Leave the args table empty (each event's args JSON: about half the size)");
  cmd->callback([a, rc] {
    *rc = kExitBadInput;
    if (!a->sqlite) {
      std::cerr << "tprof export: name the output format: --sqlite (the only one so far)\n";
      return;
    }
    // The output checks come before the build's: the same arguments fail
    // the same way with or without SQLite.
    std::string out = a->output;
    if (out == "-") {
      if (isatty(STDOUT_FILENO) == 1) {
        std::cerr << "tprof export: refusing to write an SQLite database to a terminal (-o FILE, or redirect stdout)\n";
        return;
      }
      out = "/dev/stdout";
    }
    if (internal::same_file(out, a->trace)) {
      std::cerr << "tprof: " << a->output << ": is the input trace; refusing to overwrite it\n";
      return;
    }
#if !TPROF_HAVE_SQLITE
    std::cerr << "tprof export: this tprof was built without SQLite, so it cannot write --sqlite (install "
                 "libsqlite3-dev, as scripts/setup.sh does, and build again)\n";
#else
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) return;
    internal::SqliteExportOptions options;
    options.args = !a->no_args;
    options.source = a->trace;
    Result<internal::SqliteExportStats> stats = internal::write_sqlite(*trace, out, options);
    note_diagnostics(*trace, a->trace);
    if (!stats) {
      std::cerr << "tprof: " << stats.error().to_string() << "\n";
      return;
    }
    *rc = kExitOk;
#endif
  });
}

}  // namespace tprof::cli
