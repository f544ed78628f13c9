// tprof compare A B: step-aligned, noise-aware diff of two traces, of two
// sets of runs (a directory of traces a side), or with --jobs of two jobs
// (a directory of rank traces or a summary file a side); with
// --fail-if-slower PCT an exit status for CI.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/base/file.h"
#include "tools/tprof/common.h"
#include "tprof/compare.h"

namespace tprof::cli {

namespace {

// One side's runs: a file is one run; a directory, each of its traces
// (*.json, *.json.gz, recursively, sorted by path: list_rank_traces). False
// after printing why when a directory holds no trace or cannot be read.
bool list_runs(const std::string& path, std::vector<std::string>* files) {
  std::error_code ec;
  if (path == "-" || !std::filesystem::is_directory(path, ec)) {
    files->push_back(path);
    return true;
  }
  std::string error;
  if (list_rank_traces(path, files, &error)) return true;
  // The lister names its files ranks (diagnose DIR); here they are runs.
  const std::string rank = "one per rank)";
  if (const std::size_t at = error.rfind(rank); at != std::string::npos) error.replace(at, rank.size(), "one per run)");
  std::cerr << error;
  return false;
}

// Reads every run on two threads, one trace at a time each (a trace is
// dropped once its run is read, so at most two are held, as for two
// files). Errors and diagnostics notes are kept per file, for the caller
// to print in argument order.
struct LoadedRuns {
  std::vector<std::optional<CompareRun>> runs;
  std::vector<std::string> errors, notes;
};

LoadedRuns load_runs(const std::vector<std::string>& files) {
  LoadedRuns out;
  out.runs.resize(files.size());
  out.errors.resize(files.size());
  out.notes.resize(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
      // The progress bar for the first trace only, as for two files.
      std::optional<Trace> trace = load_trace(files[i], i == 0, &out.errors[i]);
      if (!trace) continue;
      out.notes[i] = diagnostics_note(*trace, files[i]);
      out.runs[i] = read_compare_run(*trace, files[i]);
    }
  };
  std::thread second(work);
  work();
  second.join();
  return out;
}

// The distinct ranks (distributedInfo.rank) of a side's runs: two or more
// make them one job's ranks, not runs of one program.
std::set<std::int64_t> ranks_of(const std::vector<CompareRun>& runs) {
  std::set<std::int64_t> out;
  for (const CompareRun& r : runs) {
    if (r.rank() >= 0) out.insert(r.rank());
  }
  return out;
}

// One job a side (--jobs): a directory of its ranks' traces, summarized
// here as diagnose DIR does, or a summary file (tprof summarize / merge
// --format summary, python3 -m tprof job --format summary). Every file it
// read goes to `inputs` (-o must not name one). nullopt after printing why.
std::optional<JobSummary> load_job(const std::string& path, std::vector<std::string>* inputs) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::string> files;
    std::optional<JobSummary> job = load_job_dir(path, &files);
    inputs->insert(inputs->end(), files.begin(), files.end());
    return job;
  }
  inputs->push_back(path);
  Result<std::string> text = internal::read_file(path);
  if (!text) {
    std::cerr << "tprof: " << text.error().with_path(path).to_string() << "\n";
    return std::nullopt;
  }
  Result<JobSummary> job = parse_rank_summary_json(*text);
  if (!job) {
    std::cerr << "tprof: " << path << ": " << job.error().message()
              << " (--jobs takes a directory of one job's rank traces, or its summary file)\n";
    return std::nullopt;
  }
  if (job->ranks.empty()) {
    std::cerr << "tprof: " << path << ": the summary holds no rank\n";
    return std::nullopt;
  }
  return std::move(job).value();
}

}  // namespace

void add_compare_command(CLI::App& app, int* rc) {
  struct Args {
    std::string a, b, format = "text", output;
    std::size_t top = 10;
    double max_slower_pct = 0;
    std::string metric = "auto";
    std::size_t min_steps = 5;
    bool allow_mismatch = false;
    bool paired_runs = false;
    bool jobs = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compare trace B against A, or B's runs against A's: steps, ops, kernels, verdicts; a CI gate");
  cmd->add_option("A", args->a,
                  "Baseline: a trace (.json or .json.gz; - reads stdin), or a directory of runs (each trace in it one "
                  "run of the program)")
      ->required();
  cmd->add_option("B", args->b, "Compared against A: a trace (- reads stdin) or a directory of runs")->required();
  cmd->add_option("--format", args->format, "text, json or md; with --jobs also html (one self-contained page)")
      ->check(CLI::IsMember({"text", "json", "md", "html"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", args->output, "Write to a file instead of stdout");
  cmd->add_option("--top", args->top, "Op and kernel rows shown, by |delta| (0: all; JSON lists all)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  CLI::Option* gate = cmd->add_option("--fail-if-slower", args->max_slower_pct,
                                      "Exit 1 when B's mean per step (of --metric) is slower than A's by more than "
                                      "PCT percent and the 95% interval of the change lies above 0 (over runs, a "
                                      "directory a side: above PCT); exit 2 when it cannot decide (too few steps, "
                                      "different set-ups)")
                          ->type_name("PCT")
                          ->check(CLI::Validator(
                              [](const std::string& s) -> std::string {
                                double v = 0;
                                if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v) || v < 0) {
                                  return "PCT must be a non-negative number, got " + s;
                                }
                                return {};
                              },
                              "PCT >= 0"));

  cmd->add_option("--metric", args->metric,
                  "What the gate compares per step: auto (steady), steady (the time from one step's end to the next, "
                  "a step ending when its host work and the device work it launched are done), step (the "
                  "ProfilerStep's wall time), device (the device work it launched), cpu (its thread's busy time)")
      ->check(CLI::IsMember({"auto", "steady", "step", "device", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--min-steps", args->min_steps,
                  "The gate refuses (exit 2) with fewer aligned steps (over runs: a side's, all runs together): "
                  "the noise is unknown")
      ->check(CLI::Range(1, 1000000000))
      ->capture_default_str();
  cmd->add_flag("--allow-mismatch", args->allow_mismatch,
                "Gate even when the device, device count, world size or dtype differ");
  cmd->add_flag("--paired-runs", args->paired_runs,
                "Run i of A ran next to run i of B (interleaved, by name order; as many runs a side): resample "
                "pairs of runs, so the machine's drift between them cancels");

  cmd->add_flag("--jobs", args->jobs,
                "A and B are two jobs: each a directory of one job's rank traces, or its summary file (tprof merge "
                "--format summary); a job's step is the median over its ranks, and ranks and stragglers are compared");

  cmd->callback([args, rc, gate] {
    std::optional<GateResult> g;
    const auto gate_of = [&](const Comparison& c) {
      if (gate->count() > 0) {
        g = check_gate(c, {.max_slower_pct = args->max_slower_pct,
                           .metric = compare_metric_named(args->metric).value_or(CompareMetric::kAuto),
                           .min_steps = args->min_steps,
                           .allow_mismatch = args->allow_mismatch});
      }
    };
    const auto finish = [&](const std::string& text, const std::vector<std::string>& inputs) {
      *rc = emit(text, args->output, inputs, args->format == "json" ? Markup::kJson : Markup::kNone);
      if (*rc != kExitOk || !g) return;
      std::cerr << format_gate_line(*g);
      if (g->outcome == GateOutcome::kFail) *rc = kExitCheckFailed;
      if (g->outcome == GateOutcome::kRefused) *rc = kExitBadInput;
    };
    if (!args->jobs && args->format == "html") {
      std::cerr << "tprof: --format html is for two jobs (--jobs); two traces' page is tprof report A B -o FILE\n";
      *rc = kExitBadInput;
      return;
    }
    if (args->jobs) {
      if (args->paired_runs) {
        std::cerr << "tprof: --paired-runs compares runs, not jobs: give one or the other\n";
        *rc = kExitBadInput;
        return;
      }
      std::vector<std::string> inputs;
      std::optional<JobSummary> ja = load_job(args->a, &inputs);
      if (!ja) {
        *rc = kExitBadInput;
        return;
      }
      std::optional<JobSummary> jb = load_job(args->b, &inputs);
      if (!jb) {
        *rc = kExitBadInput;
        return;
      }
      const JobComparison j = compare_jobs(*ja, *jb);
      gate_of(j.c);
      const CompareFormat f{.label_a = args->a, .label_b = args->b, .top = args->top};
      const GateResult* gp = g ? &*g : nullptr;
      finish(args->format == "json"   ? format_job_comparison_json(j, f, gp)
             : args->format == "md"   ? format_job_comparison_md(j, f, gp)
             : args->format == "html" ? format_job_comparison_html(j, f, gp)
                                      : format_job_comparison_text(j, f, gp),
             inputs);
      return;
    }
    // A file is one run, a directory its traces; every run loads (two at a
    // time) before anything is compared; errors are reported in argument order.
    std::vector<std::string> files_a, files_b;
    if (!list_runs(args->a, &files_a) || !list_runs(args->b, &files_b)) {
      *rc = kExitBadInput;
      return;
    }
    if (args->paired_runs && files_a.size() != files_b.size()) {
      std::cerr << "tprof: --paired-runs needs as many runs on each side (A has " << files_a.size() << ", B "
                << files_b.size() << ")\n";
      *rc = kExitBadInput;
      return;
    }
    std::vector<std::string> files = files_a;
    files.insert(files.end(), files_b.begin(), files_b.end());
    LoadedRuns loaded = load_runs(files);
    bool ok = true;
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::cerr << loaded.errors[i];
      ok = ok && loaded.runs[i].has_value();
    }
    if (!ok) {
      *rc = kExitBadInput;
      return;
    }
    std::vector<CompareRun> runs_a, runs_b;
    for (std::size_t i = 0; i < files.size(); ++i) (i < files_a.size() ? runs_a : runs_b).push_back(*loaded.runs[i]);
    // A directory whose traces are different ranks holds one job, not runs.
    for (const auto& [side_runs, path] : {std::pair{&runs_a, &args->a}, std::pair{&runs_b, &args->b}}) {
      const std::set<std::int64_t> ranks = ranks_of(*side_runs);
      if (ranks.size() > 1) {
        std::string list;
        for (const std::int64_t r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
        std::cerr << "tprof: " << *path << ": its traces are ranks " << list
                  << " of one job (distributedInfo.rank), not runs of one program: compare two jobs with --jobs, "
                     "or one rank's runs with a directory of that rank's traces a side\n";
        *rc = kExitBadInput;
        return;
      }
    }

    const Comparison c = compare_runs(runs_a, runs_b, {.paired_runs = args->paired_runs});
    // A directory of one trace reads as that trace.
    const std::string label_a = files_a.size() == 1 ? files_a.front() : args->a;
    const std::string label_b = files_b.size() == 1 ? files_b.front() : args->b;
    const CompareFormat f{.label_a = label_a, .label_b = label_b, .top = args->top};
    gate_of(c);
    const std::string text = args->format == "json" ? format_comparison_json(c, f, g ? &*g : nullptr)
                             : args->format == "md" ? format_comparison_md(c, f, g ? &*g : nullptr)
                                                    : format_comparison_text(c, f, g ? &*g : nullptr);
    for (const std::string& note : loaded.notes) std::cerr << note;
    finish(text, files);
  });
}

}  // namespace tprof::cli
