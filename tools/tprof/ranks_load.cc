// tprof diagnose DIR and tprof summarize: finding rank traces, loading and
// summarizing them on a small pool of threads.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/tprof/common.h"
#include "tprof/read.h"

namespace tprof::cli {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What one trace may take in memory while it is summarized: a .gz is
// inflated in windows and its args copied into the model, which peaks at
// about 11 times the .gz for Kineto JSON (bench/README.md: a 1 GB trace as
// an 82 MB .gz peaked at 873 MB); a plain file is mapped and its columns
// take about twice its size.
std::uint64_t estimated_bytes(const std::string& path) {
  std::error_code ec;
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) return 0;
  return ends_with(path, ".gz") ? size * 11 : size * 2;
}

std::uint64_t available_memory() {
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 8ull << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

}  // namespace

bool list_rank_traces(const std::string& dir, std::vector<std::string>* files, std::string* error) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  std::vector<std::string> skipped;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    const std::string path = it->path().string();
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".summary.json")) {
      skipped.push_back(path);
    } else if (ends_with(name, ".json") || ends_with(name, ".json.gz")) {
      files->push_back(path);
    }
  }
  if (ec) {
    *error = "tprof: " + dir + ": cannot read the directory: " + ec.message() + "\n";
    return false;
  }
  std::sort(files->begin(), files->end());
  std::sort(skipped.begin(), skipped.end());
  if (!global_options().quiet) {
    for (const std::string& s : skipped) std::cerr << "tprof: note: " << s << ": a rank summary, not a trace; skipped\n";
  }
  if (files->empty()) {
    *error = "tprof: " + dir + ": no trace in the directory (*.json or *.json.gz, one per rank)\n";
    return false;
  }
  return true;
}

std::optional<JobSummary> load_job_dir(const std::string& dir, std::vector<std::string>* files) {
  std::string error;
  if (!list_rank_traces(dir, files, &error)) {
    std::cerr << error;
    return std::nullopt;
  }
  std::vector<RankSummary> summaries;
  if (!summarize_traces(*files, &summaries)) return std::nullopt;
  std::vector<JobSummary> parts;
  for (RankSummary& s : summaries) parts.push_back(JobSummary{{std::move(s)}});
  Result<JobSummary> job = merge_summaries(parts);
  if (!job) {
    std::cerr << "tprof: " << dir << ": " << job.error().message() << "\n";
    return std::nullopt;
  }
  return std::move(*job);
}

bool summarize_traces(const std::vector<std::string>& files, std::vector<RankSummary>* out) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t largest = 1;
  for (const std::string& f : files) largest = std::max(largest, estimated_bytes(f));
  // Half the available memory for the traces held at once.
  const std::uint64_t by_memory = std::max<std::uint64_t>(1, available_memory() / 2 / largest);
  const std::size_t workers = static_cast<std::size_t>(
      std::min<std::uint64_t>({static_cast<std::uint64_t>(cores), files.size(), by_memory}));
  // The cores not running a trace of their own help parse one.
  const int reader_threads = global_options().threads > 0 ? global_options().threads
                                                          : std::max(1, static_cast<int>(cores / workers));

  std::vector<std::optional<RankSummary>> results(files.size());
  std::vector<std::string> errors(files.size()), notes(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
      ReadOptions options = read_options();
      options.threads = reader_threads;
      Result<Trace> trace = read_trace(files[i], options);
      if (!trace) {
        errors[i] = "tprof: " + trace.error().to_string() + "\n";
        continue;
      }
      if (errors[i] = step_range_error(*trace, files[i]); !errors[i].empty()) continue;
      notes[i] = diagnostics_note(*trace, files[i]);
      results[i] = summarize_rank(*trace, fs::path(files[i]).filename().string());
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  bool ok = true;
  for (const std::string& n : notes) std::cerr << n;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::cerr << errors[i];
    ok = ok && results[i].has_value();
  }
  if (!ok) return false;
  for (std::optional<RankSummary>& r : results) out->push_back(std::move(*r));
  return true;
}

std::string format_job(const JobView& view, const std::string& format) {
  return format == "json" ? format_job_json(view) : format == "md" ? format_job_md(view) : format_job_text(view);
}

}  // namespace tprof::cli
