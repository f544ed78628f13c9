// Shared pieces of the tprof CLI: loading a trace with a progress bar and
// clear errors, and the one-line diagnostics note every command prints.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/ranks.h"
#include "tprof/read.h"
#include "tprof/trace.h"

namespace CLI {
class App;
}

namespace tprof::cli {

enum ExitCode { kExitOk = 0, kExitCheckFailed = 1, kExitBadInput = 2 };

struct GlobalOptions {
  bool quiet = false;          // no progress bar, no diagnostics note
  int threads = 0;             // parser threads, 0 = all cores
  std::string color = "auto";  // --color: auto, always or never
  std::uint64_t max_inflated_mib = 0;  // --max-inflated-mib: 0 = half the physical memory
  double max_inflate_ratio = 200;      // --max-inflate-ratio: 0 = none
  std::uint64_t max_model_mib = 0;     // --max-model-mib: 0 = half the physical memory
  bool strict = false;                 // --strict: a syntax error inside traceEvents fails the read
  std::string step_range;              // --step-range NAME: that range's calls are the steps
};

// A progress bar on stderr, shown only on a terminal (and not with -q),
// and only once the work has taken more than a second: "reading [###  ] 40%
// 812 MB", then the phases of longer commands ("events", "indexes", ...).
// Cleared when destroyed.
class ProgressBar {
 public:
  ProgressBar();
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(std::uint64_t done, std::uint64_t total);  // reading: bytes
  void update(std::string_view phase, std::uint64_t done, std::uint64_t total, bool bytes = false);

 private:
  std::chrono::steady_clock::time_point start_;
  bool enabled_;
  bool drawn_ = false;
  int last_pct_ = -1;
  std::string last_phase_;
};

// ReadOptions from the global flags (threads, gzip limits).
ReadOptions read_options();

GlobalOptions& global_options();

// "" unless --step-range names a range the trace lacks: then the error line
// ("tprof: FILE: --step-range \"X\": no host event of that name; repeated
// ranges here: ..."), and the command exits with kExitBadInput.
std::string step_range_error(const Trace& trace, const std::string& path);

// Loads `path`; on failure prints "tprof: <file>: byte N: <what>" to stderr
// and returns nothing (the caller exits with kExitBadInput).
std::optional<Trace> load_trace(const std::string& path);
// The same for loads on several threads: no progress bar unless `progress`,
// and the error line stored in *error instead of printed, so the caller
// reports in a fixed order.
std::optional<Trace> load_trace(const std::string& path, bool progress, std::string* error);

// Prints one line naming the trace's diagnostics to stderr (unless quiet).
void note_diagnostics(const Trace& trace, const std::string& path);
// That line ("" when quiet or when there are none), for callers on several threads.
std::string diagnostics_note(const Trace& trace, const std::string& path);

// Many ranks (tools/tprof/ranks_load.cc). Lists the *.json / *.json.gz
// files under `dir`, recursively, sorted by path; *.summary.json files are
// skipped with a note, other names ignored. False with the error line in
// *error when there is no trace or the directory cannot be read.
bool list_rank_traces(const std::string& dir, std::vector<std::string>* files, std::string* error);
// Loads and summarizes each file (tprof/ranks.h) on a small pool of
// threads: as many as cores, and as the memory allows for the largest
// trace. Prints the diagnostics notes, then every load error, in file
// order; false when any file failed.
bool summarize_traces(const std::vector<std::string>& files, std::vector<RankSummary>* out);
// list_rank_traces, summarize_traces and merge_summaries for a directory of
// ranks (diagnose DIR, report DIR): the job, or nullopt after printing why.
std::optional<JobSummary> load_job_dir(const std::string& dir, std::vector<std::string>* files);
// The job view as text, json or md.
std::string format_job(const JobView& view, const std::string& format);

// What emit writes, for its filter and its colours. Colours go to stdout
// when they are on: --color=always, or --color=auto (the default) with
// stdout a terminal, NO_COLOR unset or empty (no-color.org) and TERM not
// "dumb". kNone: text (tables, Markdown). kSeverities: text whose
// "[critical]", "[warning]" and "[info]" tags open the lines of diagnose's
// text view, coloured. kJson: JSON, or a page that carries JSON for its
// script (tprof report, sweep --html): filtered with JSON escapes
// (safe_json_text), so it stays valid; never coloured.
enum class Markup : std::uint8_t { kNone, kSeverities, kJson };

// Writes text to stdout, or to `path` when it is not empty (through the one
// writer, src/base/file.h: atomic for files, straight through to devices and
// FIFOs). Refuses a `path` that is the `input` trace. Returns an exit code:
// 2 with one line on stderr when the output cannot be written. Colours
// (`markup`) go to stdout only, never into a file.
int emit(const std::string& text, const std::string& path, const std::string& input, Markup markup = Markup::kNone);
// The same, refusing a `path` that is any of `inputs`.
int emit(const std::string& text, const std::string& path, const std::vector<std::string>& inputs,
         Markup markup = Markup::kNone);

// Adds the subcommand "NAME TRACE [--format F] [-o FILE]" (F one of
// `formats`, the first the default): it loads the trace, prints
// render(trace, format) to stdout or FILE (as JSON for F "json"), and with
// `note_diags` the diagnostics note. Returns the subcommand for options of
// its own.
CLI::App* add_report_command(CLI::App& app, int* rc, const std::string& name, const std::string& description,
                             const std::vector<std::string>& formats, bool note_diags,
                             std::function<std::string(const Trace&, const std::string& format)> render);

// Subcommands: each adds itself to `app` and stores its exit code in *rc.
void add_table_command(CLI::App& app, int* rc);
void add_steps_command(CLI::App& app, int* rc);
// tprof critical-path and tprof whatif (causal_cmd.cc).
void add_critical_path_command(CLI::App& app, int* rc);
void add_whatif_command(CLI::App& app, int* rc);
void add_info_command(CLI::App& app, int* rc);
void add_diagnose_command(CLI::App& app, int* rc);
void add_kernels_command(CLI::App& app, int* rc);
// tprof memory (memory_cmd.cc): a trace's [memory] records or a memory snapshot.
void add_memory_command(CLI::App& app, int* rc);
void add_compare_command(CLI::App& app, int* rc);
void add_record_command(CLI::App& app, int* rc);
void add_serve_command(CLI::App& app, int* rc);
void add_sweep_command(CLI::App& app, int* rc);
void add_report_html_command(CLI::App& app, int* rc);
void add_summarize_command(CLI::App& app, int* rc);
void add_merge_command(CLI::App& app, int* rc);
// tprof export --sqlite (export_cmd.cc): says so when built without SQLite.
void add_export_command(CLI::App& app, int* rc);
// Hidden from --help: the bash completion and the man page (generate_cmd.cc),
// generated from the commands above, so these two are added last.
void add_completion_command(CLI::App& app, int* rc);
void add_man_command(CLI::App& app, int* rc);

}  // namespace tprof::cli
