#include "tools/tprof/common.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>

#include <CLI/CLI.hpp>

#include "src/base/file.h"
#include "src/base/safe_text.h"
#include "tprof/info.h"
#include "tprof/read.h"
#include "tprof/step_events.h"

namespace tprof::cli {

GlobalOptions& global_options() {
  static GlobalOptions options;
  return options;
}

namespace {

// A progress bar on stderr, shown only on a terminal and only once a load
// has taken more than a second.
}  // namespace

ProgressBar::ProgressBar() : start_(std::chrono::steady_clock::now()), enabled_(!global_options().quiet && isatty(2)) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r%72s\r", "");
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) { update("reading", done, total, true); }

void ProgressBar::update(std::string_view phase, std::uint64_t done, std::uint64_t total, bool bytes) {
  if (!enabled_ || total == 0) return;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (secs < 1.0) return;
  const int pct = static_cast<int>(100.0 * static_cast<double>(std::min(done, total)) / static_cast<double>(total));
  if (pct == last_pct_ && phase == last_phase_) return;
  last_pct_ = pct;
  last_phase_ = phase;
  const int filled = pct * 30 / 100;
  std::fprintf(stderr, "\r%-14.14s [%.*s%*s] %3d%%", std::string(phase).c_str(), filled,
               "##############################", 30 - filled, "", pct);
  if (bytes) std::fprintf(stderr, "  %.0f MB", static_cast<double>(done) / 1e6);
  std::fprintf(stderr, "%8s", "");
  drawn_ = true;
}

namespace {

bool stdout_has_color() {
  const std::string& mode = global_options().color;
  // An explicit --color beats NO_COLOR, as no-color.org asks of command-line flags.
  if (mode != "auto") return mode == "always";
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return isatty(1) == 1;
}

// Wraps the severity tag that opens a line of diagnose's text ("  [warning] "
// in both views, "  3. [critical] " in the short one) in SGR colours. Only
// that position is matched, two spaces in: titles quote names from the trace,
// and continuation lines are indented further, so a "[info] " inside a name
// stays plain. Runs after safe_text, which would escape these ESC bytes.
std::string color_severities(std::string_view text) {
  struct Style {
    std::string_view tag, sgr;
  };
  static constexpr Style kStyles[] = {
      {"[critical] ", "\x1b[1;31m"}, {"[warning] ", "\x1b[33m"}, {"[info] ", "\x1b[36m"}};
  static constexpr std::string_view kReset = "\x1b[0m";
  std::string out;
  out.reserve(text.size() + 256);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string_view line = text.substr(pos, end - pos);
    pos = end;
    std::size_t at = 2;
    if (!line.starts_with("  ")) {
      out += line;
      continue;
    }
    std::size_t digits = at;
    while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
    if (digits > at && line.substr(digits).starts_with(". ")) at = digits + 2;
    const Style* style = nullptr;
    for (const Style& s : kStyles) {
      if (line.substr(at).starts_with(s.tag)) style = &s;
    }
    if (style == nullptr) {
      out += line;
      continue;
    }
    // The tag without its trailing blank is coloured.
    const std::size_t tag_end = at + style->tag.size() - 1;
    out.append(line.substr(0, at)).append(style->sgr).append(line.substr(at, tag_end - at)).append(kReset);
    out += line.substr(tag_end);
  }
  return out;
}

}  // namespace

std::string step_range_error(const Trace& trace, const std::string& path) {
  const std::string problem = step_range_problem(trace);
  if (problem.empty()) return {};
  return "tprof: " + path + ": --step-range \"" + trace.meta.step_range + "\": " + problem + "\n";
}

ReadOptions read_options() {
  ReadOptions options;
  options.threads = global_options().threads;
  options.max_inflated_bytes = global_options().max_inflated_mib << 20;
  options.max_inflate_ratio = global_options().max_inflate_ratio;
  options.max_model_bytes = global_options().max_model_mib << 20;
  options.strict = global_options().strict;
  options.step_range = global_options().step_range;
  return options;
}

std::optional<Trace> load_trace(const std::string& path, bool progress, std::string* error) {
  std::optional<ProgressBar> bar;
  ReadOptions options = read_options();
  if (progress) {
    bar.emplace();
    options.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar->update(done, total); };
  }
  Result<Trace> trace = read_trace(path, options);
  if (!trace) {
    *error = "tprof: " + trace.error().to_string() + "\n";
    return std::nullopt;
  }
  if (std::string range_error = step_range_error(*trace, path); !range_error.empty()) {
    *error = std::move(range_error);
    return std::nullopt;
  }
  return std::move(trace).value();
}

std::optional<Trace> load_trace(const std::string& path) {
  std::string error;
  std::optional<Trace> trace = load_trace(path, true, &error);
  if (!trace) std::cerr << error;
  return trace;
}

void note_diagnostics(const Trace& trace, const std::string& path) { std::cerr << diagnostics_note(trace, path); }

std::string diagnostics_note(const Trace& trace, const std::string& path) {
  return global_options().quiet ? std::string() : format_diagnostics_note(trace, path);
}

int emit(const std::string& text, const std::string& path, const std::string& input, Markup markup) {
  return emit(text, path, input.empty() ? std::vector<std::string>{} : std::vector<std::string>{input}, markup);
}

int emit(const std::string& raw, const std::string& path, const std::vector<std::string>& inputs, Markup markup) {
  // Names from the trace are quoted in every output: no control sequence or
  // invalid UTF-8 reaches a terminal or a file. JSON gets JSON's escapes
  // (safe_text's "\x7f" made it invalid); the writer's escaper escapes all
  // of these already, so for tprof's own JSON this changes nothing.
  const bool json = markup == Markup::kJson;
  const std::string safe = !internal::needs_safe_text(raw) ? std::string()
                           : json                          ? internal::safe_json_text(raw)
                                                           : internal::safe_text(raw);
  const std::string& text = safe.empty() ? raw : safe;
  if (path.empty() || path == "-") {
    const std::string colored =
        markup == Markup::kSeverities && stdout_has_color() ? color_severities(text) : std::string();
    const std::string& out = colored.empty() ? text : colored;
    // A full disk, a closed stdout or a broken pipe is an error, not a success.
    errno = 0;
    const bool ok = std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0;
    if (!ok) {
      std::cerr << "tprof: cannot write to standard output: " << std::strerror(errno != 0 ? errno : EIO) << "\n";
      return kExitBadInput;
    }
    return kExitOk;
  }
  for (const std::string& input : inputs) {
    if (!input.empty() && internal::same_file(path, input)) {
      std::cerr << "tprof: " << path << ": is the input trace; refusing to overwrite it\n";
      return kExitBadInput;
    }
  }
  Status s = internal::write_file_atomic(path, text);
  if (!s) {
    std::cerr << "tprof: " << s.error().to_string() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

CLI::App* add_report_command(CLI::App& app, int* rc, const std::string& name, const std::string& description,
                             const std::vector<std::string>& formats, bool note_diags,
                             std::function<std::string(const Trace&, const std::string& format)> render) {
  struct Args {
    std::string trace, format, output;
  };
  auto a = std::make_shared<Args>();
  a->format = formats.front();
  std::string formats_help;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    formats_help += (i == 0 ? "" : i + 1 == formats.size() ? " or " : ", ") + formats[i];
  }
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->add_option("TRACE", a->trace, "Trace file (.json or .json.gz; - reads stdin)")->required();
  cmd->add_option("--format", a->format, formats_help)->check(CLI::IsMember(formats))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to a file instead of stdout");
  cmd->callback([a, rc, note_diags, render = std::move(render)] {
    std::optional<Trace> trace = load_trace(a->trace);
    if (!trace) {
      *rc = kExitBadInput;
      return;
    }
    const std::string text = render(*trace, a->format);
    if (note_diags) note_diagnostics(*trace, a->trace);
    *rc = emit(text, a->output, a->trace, a->format == "json" ? Markup::kJson : Markup::kNone);
  });
  return cmd;
}

}  // namespace tprof::cli
