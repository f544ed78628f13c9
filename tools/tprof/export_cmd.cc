// tprof export --sqlite TRACE -o FILE: the trace and its derived views as an
// SQLite database (docs/sql.md).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <cstdint>

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
    bool stream = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write the trace and its derived views (steps, kernels with their ops, breakdowns) as an SQLite database");
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz; - reads stdin)")->required();
  cmd->add_flag("--sqlite", a->sqlite, "Write an SQLite database (schema and example queries: docs/sql.md)");
  cmd->add_option("-o,--output", a->output, "The database to write (put in place whole; - is stdout unless a terminal)")
      ->required();
  cmd->add_flag("--no-args", a->no_args, "Leave the args table empty (each event's args JSON: about half the size)");
  cmd->add_flag("--stream", a->stream,
                "Write the rows as the trace is read, so a trace larger than the memory exports (the derived "
                "tables need its model to fit: --max-model-mib; docs/sql.md). Chosen by itself for a plain file "
                "larger than that limit");
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
    internal::SqliteExportOptions options;
    options.args = !a->no_args;
    options.source = a->trace;
    // A plain file larger than the model limit: its model (about half the
    // file) and the export's working set would not fit beside each other.
    const ReadOptions read = read_options();
    const std::uint64_t limit =
        read.max_model_bytes > 0 ? read.max_model_bytes : static_cast<std::uint64_t>(internal::half_physical_memory());
    struct stat st {};
    if (!a->stream && a->trace != "-" && ::stat(a->trace.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uint64_t>(st.st_size) > limit) {
      a->stream = true;
      if (!global_options().quiet) {
        std::cerr << "tprof: note: " << a->trace << " is larger than " << (limit >> 20)
                  << " MiB (half the memory, or --max-model-mib): exporting it in a stream (--stream)\n";
      }
    }
    Result<internal::SqliteExportStats> stats = Error(ErrorCode::kInternal, "not written");
    // One bar over the whole export: the read, then the writer's phases.
    if (a->stream) {
      ProgressBar bar;
      ReadOptions streamed = read;
      streamed.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
      options.progress = [&bar](std::string_view phase, std::uint64_t done, std::uint64_t total) {
        bar.update(phase, done, total);
      };
      stats = internal::write_sqlite_streamed(a->trace, streamed, out, options,
                                              [&](const Trace& model) { note_diagnostics(model, a->trace); });
    } else {
      std::optional<Trace> trace = load_trace(a->trace);
      if (!trace) return;
      ProgressBar bar;
      options.progress = [&bar](std::string_view phase, std::uint64_t done, std::uint64_t total) {
        bar.update(phase, done, total);
      };
      stats = internal::write_sqlite(*trace, out, options);
      note_diagnostics(*trace, a->trace);
    }
    if (!stats) {
      std::cerr << "tprof: " << stats.error().to_string() << "\n";
      return;
    }
    *rc = kExitOk;
#endif
  });
}

}  // namespace tprof::cli
