// trace_bench: reader/analysis throughput side by side, in one run.
//
//   trace_bench --sizes 100M,1G,4G [--dir /tmp] [--repeat 3] [--gz] [--build build]
//               [--baseline OTHER_TPROF]
//
// For each size it generates a trace (bench/gen_trace, deterministic), runs
// every command on the same file as its own process (so peak RSS is the
// command's own), in rounds (each round runs every command once, so a noisy
// minute hits them all), keeps each command's fastest round, prints wall
// seconds, CPU seconds (user + system), MB/s, the throughput ratio to the
// floor (a bare single-threaded simdjson on-demand pass,
// bench/simdjson_floor) and peak RSS relative to the file size, then the
// ratios the targets name (table / `wc -l`, diagnose / table, wall and
// CPU), and deletes the file. With --gz it also compares `tprof table
// x.json.gz` with the decompressor alone (bench/gunzip_floor, zlib streamed
// on one thread). --baseline adds another tprof binary's table and diagnose
// to the same rounds (before/after a change).
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system
  double peak_rss_mb = 0;
  int exit_code = -1;
};

Run run(const std::vector<std::string>& cmd) {
  Run r;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    std::vector<char*> argv;
    for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  r.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// True when `tprof --help` lists the subcommand.
bool has_subcommand(const std::string& tprof, const std::string& name) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(tprof.c_str(), tprof.c_str(), "--help", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out.find("  " + name + " ") != std::string::npos;
}

// Keeps the faster of two runs (a failed run wins: it is reported).
void keep_best(Run* best, const Run& r, bool first) {
  if (best->exit_code != 0 && !first) return;
  if (first || r.exit_code != 0 || r.seconds < best->seconds) *best = r;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

double file_mb(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_size) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes = "100M", dir = "/tmp", build = "build";
  int repeat = 3;
  bool gz = false;
  std::string baseline;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--build" && i + 1 < argc) {
      build = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (a == "--gz") {
      gz = true;
    } else if (a == "--baseline" && i + 1 < argc) {
      baseline = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: trace_bench [--sizes 100M,1G] [--dir DIR] [--repeat N] [--gz] [--build DIR] "
                   "[--baseline TPROF]\n");
      return 2;
    }
  }
  const std::string gen = build + "/bench/gen_trace";
  const std::string floor = build + "/bench/simdjson_floor";
  const std::string gunzip = build + "/bench/gunzip_floor";
  const std::string tprof = build + "/tools/tprof/tprof";
  const bool has_diagnose = has_subcommand(tprof, "diagnose");
  std::printf("cores: %ld, best of %d runs each\n\n", sysconf(_SC_NPROCESSORS_ONLN), repeat);
  int failures = 0;
  for (const std::string& size : split(sizes)) {
    const std::string path = dir + "/tprof_bench_" + size + ".json";
    if (run({gen, "--size", size, "--seed", "1", "--out", path}).exit_code != 0) {
      std::fprintf(stderr, "trace_bench: gen_trace failed for %s\n", size.c_str());
      return 2;
    }
    const double mb = file_mb(path);
    std::printf("%s trace: %.1f MB\n", size.c_str(), mb);
    std::printf("  %-34s %9s %9s %9s %10s %11s %9s\n", "command", "seconds", "CPU s", "MB/s", "vs floor",
                "peak RSS MB", "RSS/file");
    struct Row {
      std::string label;
      std::vector<std::string> cmd;
      Run best;
    };
    std::vector<Row> rows = {
        {"simdjson on-demand, 1 thread (floor)", {floor, path}, {}},
        {"wc -l", {"/usr/bin/wc", "-l", path}, {}},
        {"tprof table", {tprof, "-q", "table", path}, {}},
        {"tprof steps", {tprof, "-q", "steps", path}, {}},
    };
    if (has_diagnose) rows.push_back({"tprof diagnose", {tprof, "-q", "diagnose", path}, {}});
    if (!baseline.empty()) {
      rows.push_back({"baseline table", {baseline, "-q", "table", path}, {}});
      rows.push_back({"baseline diagnose", {baseline, "-q", "diagnose", path}, {}});
    }
    for (int round = 0; round < repeat; ++round) {
      for (Row& row : rows) keep_best(&row.best, run(row.cmd), round == 0);
    }
    auto find = [&](const std::string& label) -> const Run* {
      for (const Row& row : rows) {
        if (row.label == label && row.best.exit_code == 0) return &row.best;
      }
      return nullptr;
    };
    const double floor_s = find(rows[0].label) != nullptr ? find(rows[0].label)->seconds : 0;
    for (const Row& row : rows) {
      const Run& r = row.best;
      if (r.exit_code != 0) {
        std::printf("  %-34s failed (exit %d)\n", row.label.c_str(), r.exit_code);
        ++failures;
        continue;
      }
      std::printf("  %-34s %9.3f %9.3f %9.0f %9.2fx %11.0f %9.2f\n", row.label.c_str(), r.seconds, r.cpu_seconds,
                  mb / r.seconds, floor_s / r.seconds, r.peak_rss_mb, r.peak_rss_mb / mb);
    }
    auto ratio = [&](const char* what, const std::string& a, const std::string& b) {
      const Run* x = find(a);
      const Run* y = find(b);
      if (x == nullptr || y == nullptr) return;
      std::printf("  %-34s %8.2fx wall %8.2fx CPU\n", what, x->seconds / y->seconds,
                  y->cpu_seconds > 0 ? x->cpu_seconds / y->cpu_seconds : 0.0);
    };
    ratio("tprof table / wc -l", "tprof table", "wc -l");
    ratio("tprof diagnose / tprof table", "tprof diagnose", "tprof table");
    ratio("baseline diagnose / baseline table", "baseline diagnose", "baseline table");
    ratio("tprof diagnose / baseline diagnose", "tprof diagnose", "baseline diagnose");
    if (gz) {
      const std::string gz_path = path + ".gz";
      if (run({gen, "--size", size, "--seed", "1", "--out", gz_path, "--gzip"}).exit_code == 0) {
        Run d, t;
        for (int round = 0; round < repeat; ++round) {
          keep_best(&d, run({gunzip, gz_path}), round == 0);
          keep_best(&t, run({tprof, "-q", "table", gz_path}), round == 0);
        }
        std::printf("  %-34s %9.3f %9.3f %9.0f %10s %11.0f\n", "gunzip alone (.json.gz)", d.seconds, d.cpu_seconds,
                    mb / d.seconds, "", d.peak_rss_mb);
        std::printf("  %-34s %9.3f %9.3f %9.0f %9.2fx %11.0f   (time / gunzip time)\n", "tprof table (.json.gz)",
                    t.seconds, t.cpu_seconds, mb / t.seconds, t.seconds / d.seconds, t.peak_rss_mb);
        if (d.exit_code != 0 || t.exit_code != 0) ++failures;
      }
      std::remove(gz_path.c_str());
    }
    std::remove(path.c_str());
    std::printf("\n");
  }
  return failures == 0 ? 0 : 1;
}
