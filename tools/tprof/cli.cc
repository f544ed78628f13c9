// The tprof command line: global flags, the subcommands, and the "did you
// mean" for an unknown one. The CLI parses flags, calls the library and
// prints; it has no logic of its own.
#include "tools/tprof/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/safe_text.h"
#include "tools/tprof/common.h"
#include "tprof/read.h"

namespace {

// Levenshtein distance, for "did you mean".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The command word of argv (the first argument that is not a global flag or
// its value), or "" when there is none. The global options that take a
// value come from `app`, so a new one needs no change here.
std::string command_word(const CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const CLI::Option* opt = a.starts_with("--") && a.find('=') == std::string_view::npos
                                 ? app.get_option_no_throw(std::string(a))
                                 : nullptr;
    if (opt != nullptr && opt->get_items_expected_min() > 0) {  // takes a value (flags expect none)
      ++i;
      continue;
    }
    if (a.starts_with("-")) continue;
    return std::string(a);
  }
  return {};
}

// Command options written before the command (`tprof --format json steps
// t.json`) move to just after it: the command's own parser then takes them
// or names the one it does not know. Global options (and their values)
// stay where they are. Without a known command word, argv is unchanged.
std::vector<std::string> command_first(CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto is_command = [&](const std::string& a) {
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == a) return true;
    }
    return false;
  };
  std::vector<std::string> global{args.empty() ? std::string("tprof") : args[0]}, moved;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return args;
    const std::string flag = a.substr(0, a.find('='));
    const CLI::Option* opt = a.starts_with("-") ? app.get_option_no_throw(flag) : nullptr;
    if (opt != nullptr) {
      global.push_back(a);
      if (opt->get_items_expected_min() > 0 && a.find('=') == std::string::npos && i + 1 < args.size()) {
        global.push_back(args[++i]);
      }
      continue;
    }
    if (!a.starts_with("-") && is_command(a)) {
      if (moved.empty()) return args;
      global.push_back(a);
      global.insert(global.end(), moved.begin(), moved.end());
      global.insert(global.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return global;
    }
    moved.push_back(a);
  }
  return args;
}

// Standard output failures are errors: `--help` or `--version` (or any
// command's stdout) into a full device, a closed stdout or a file past
// `ulimit -f` exits 2 with the reason, never 0 with the text lost.
int stdout_failed(int err) {
  std::clearerr(stdout);  // for the next run in this process (the fuzz target)
  std::cout.clear();
  std::cerr << "tprof: cannot write to standard output: " << std::strerror(err != 0 ? err : EIO) << "\n";
  return tprof::cli::kExitBadInput;
}

// Prints what CLI11 made for --help or --version, checked.
int print_checked(const std::string& text, int rc) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return stdout_failed(errno);
  }
  return rc;
}

// Flushes what commands printed to stdout and checks it. A command that
// already failed has said why; its code stands.
int checked_stdout(int rc) {
  errno = 0;
  std::cout.flush();
  int err = errno;
  const bool flushed = std::fflush(stdout) == 0;
  if (err == 0) err = errno;
  if (flushed && std::cout.good() && std::ferror(stdout) == 0) return rc;
  if (rc != tprof::cli::kExitOk) {
    std::clearerr(stdout);
    std::cout.clear();
    return rc;
  }
  return stdout_failed(err);
}

}  // namespace

namespace tprof::cli {

int run(int argc, const char* const* argv) {
  // Each run starts from the defaults (the fuzz target runs many in one process).
  global_options() = GlobalOptions{};
  std::clearerr(stdout);
  std::cout.clear();
  CLI::App app{"tprof: torch.profiler tables, steps and findings from any torch/Kineto trace"};
  app.require_subcommand(1);
  // Global flags are accepted after the command too (tprof table t.json -q).
  app.fallthrough();
  app.set_version_flag("--version", "tprof " TPROF_VERSION);
  app.add_flag("-q,--quiet", global_options().quiet, "No progress bar and no diagnostics note on stderr");
  app.add_flag("--strict", global_options().strict,
               "Refuse a trace with a syntax error inside traceEvents, args that are not strict JSON, or a file "
               "that ends early (default: skip the damaged bytes to the next event, keep the rest, and say so in a "
               "skipped_bytes diagnostic; repair or drop such args, with a malformed_args diagnostic; read a cut "
               "file up to the cut, with a truncated diagnostic)");
  app.add_option("--step-range", global_options().step_range,
                 "Use the outermost calls of this host range (an NVTX range, a record_function) as the steps, "
                 "instead of ProfilerStep#N (default: ProfilerStep#N; without any, the one repeated user "
                 "annotation that covers at least half its span, as tprof record's NVTX ranges)")
      ->type_name("NAME");
  app.add_option("--threads", global_options().threads, "Parser and diagnose threads (0 = all cores, at most 256)")
      ->check(CLI::Range(0, tprof::kMaxReaderThreads));
  app.add_option("--max-inflated-mib", global_options().max_inflated_mib,
                 "A .gz may inflate to at most this many MiB (0 = half the physical memory)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-inflate-ratio", global_options().max_inflate_ratio,
                 "... and to at most this many times its compressed size (0 = no ratio limit)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--max-model-mib", global_options().max_model_mib,
                 "The model of a .gz may take at most this many MiB (0 = half the physical memory); export --stream "
                 "keeps the model, for its derived tables, only within it")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--color", global_options().color,
                 "Colour severities on a terminal: auto (not when NO_COLOR is set or TERM=dumb), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  int rc = kExitOk;
  add_table_command(app, &rc);
  add_steps_command(app, &rc);
  add_critical_path_command(app, &rc);
  add_whatif_command(app, &rc);
  add_info_command(app, &rc);
  add_diagnose_command(app, &rc);
  add_kernels_command(app, &rc);
  add_memory_command(app, &rc);
  add_compare_command(app, &rc);
  add_record_command(app, &rc);
  add_serve_command(app, &rc);
  add_sweep_command(app, &rc);
  add_report_html_command(app, &rc);
  add_summarize_command(app, &rc);
  add_merge_command(app, &rc);
  add_export_command(app, &rc);
  add_completion_command(app, &rc);
  add_man_command(app, &rc);
  const std::vector<std::string> reordered = command_first(app, argc, argv);
  std::vector<const char*> reordered_argv;
  for (const std::string& a : reordered) reordered_argv.push_back(a.c_str());
  argc = static_cast<int>(reordered_argv.size());
  argv = reordered_argv.data();
  // An unknown command gets the closest one, not CLI11's "not expected".
  if (const std::string word = command_word(app, argc, argv); !word.empty()) {
    std::string best;
    std::size_t best_d = SIZE_MAX;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known |= sub->get_name() == word;
      const std::size_t d = distance(word, sub->get_name());
      if (d < best_d) {
        best_d = d;
        best = sub->get_name();
      }
    }
    if (!known) {
      std::cerr << "tprof: unknown command '" << (internal::needs_safe_text(word) ? internal::safe_text(word) : word)
                << "'"
                << (best_d <= std::max<std::size_t>(2, word.size() / 3) ? "; did you mean '" + best + "'?"
                                                                        : std::string())
                << " (tprof --help lists the commands)\n";
      return kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    std::ostringstream text;
    const int code = app.exit(e, text, std::cerr);
    return print_checked(text.str(), code);
  } catch (const CLI::ParseError& e) {
    // CLI11's message quotes the argument as given: through the text
    // filter, as every message that quotes what a user typed.
    std::ostringstream out, err;
    app.exit(e, out, err);
    for (auto [text, stream] : {std::pair{out.str(), &std::cout}, std::pair{err.str(), &std::cerr}}) {
      *stream << (internal::needs_safe_text(text) ? internal::safe_text(text) : text);
    }
    return kExitBadInput;
  }
  return checked_stdout(rc);
}

}  // namespace tprof::cli
