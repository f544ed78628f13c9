#include "tools/tprof/common.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "src/base/file.h"
#include "tprof/read.h"

namespace tprof::cli {

GlobalOptions& global_options() {
  static GlobalOptions options;
  return options;
}

namespace {

// A progress bar on stderr, shown only on a terminal and only once a load
// has taken more than a second.
class ProgressBar {
 public:
  ProgressBar() : start_(std::chrono::steady_clock::now()), enabled_(!global_options().quiet && isatty(2)) {}
  ~ProgressBar() {
    if (drawn_) std::fprintf(stderr, "\r%60s\r", "");
  }
  void update(std::uint64_t done, std::uint64_t total) {
    if (!enabled_ || total == 0) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (secs < 1.0) return;
    const int pct = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    if (pct == last_pct_) return;
    last_pct_ = pct;
    const int filled = pct * 30 / 100;
    std::fprintf(stderr, "\rreading [%.*s%*s] %3d%%  %.0f MB", filled, "##############################",
                 30 - filled, "", pct, static_cast<double>(done) / 1e6);
    drawn_ = true;
  }

 private:
  std::chrono::steady_clock::time_point start_;
  bool enabled_;
  bool drawn_ = false;
  int last_pct_ = -1;
};

}  // namespace

std::optional<Trace> load_trace(const std::string& path) {
  ProgressBar bar;
  ReadOptions options;
  options.threads = global_options().threads;
  options.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  Result<Trace> trace = read_trace(path, options);
  if (!trace) {
    std::cerr << "tprof: " << trace.error().to_string() << "\n";
    return std::nullopt;
  }
  return std::move(trace).value();
}

void note_diagnostics(const Trace& trace, const std::string& path) {
  if (global_options().quiet || trace.diagnostics.empty()) return;
  std::string line = "tprof: note: " + path + ":";
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    const auto code = static_cast<DiagnosticCode>(c);
    const std::uint64_t n = trace.diagnostics.count(code);
    if (n == 0) continue;
    line.append(" ").append(diagnostic_code_name(code)).append("=").append(std::to_string(n));
  }
  line += " (details: tprof info)";
  std::cerr << line << "\n";
}

int emit(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return kExitOk;
  }
  Status s = internal::write_file_atomic(path, text);
  if (!s) {
    std::cerr << "tprof: " << s.error().to_string() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace tprof::cli
