// trace_bench: reader/analysis throughput side by side, in one run.
//
//   trace_bench --sizes 100M,1G,4G [--dir /tmp] [--repeat 3] [--gz] [--build build]
//
// For each size it generates a trace (bench/gen_trace, deterministic), runs
// every command on the same file as its own process (so peak RSS is the
// command's own), keeps the fastest of --repeat runs, prints MB/s, the
// throughput ratio to the floor (a bare single-threaded simdjson on-demand
// pass, bench/simdjson_floor) and peak RSS relative to the file size, and
// deletes the file. With --gz it also compares `tprof table x.json.gz` with
// the decompressor alone (bench/gunzip_floor).
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

Run best_of(const std::vector<std::string>& cmd, int repeat) {
  Run best;
  for (int i = 0; i < repeat; ++i) {
    Run r = run(cmd);
    if (r.exit_code != 0) return r;
    if (i == 0 || r.seconds < best.seconds) best = r;
  }
  return best;
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
    } else {
      std::fprintf(stderr, "usage: trace_bench [--sizes 100M,1G] [--dir DIR] [--repeat N] [--gz] [--build DIR]\n");
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
    std::printf("  %-34s %9s %9s %10s %11s %9s\n", "command", "seconds", "MB/s", "vs floor", "peak RSS MB", "RSS/file");
    struct Row {
      std::string label;
      std::vector<std::string> cmd;
    };
    std::vector<Row> rows = {
        {"simdjson on-demand, 1 thread (floor)", {floor, path}},
        {"tprof table", {tprof, "-q", "table", path}},
        {"tprof steps", {tprof, "-q", "steps", path}},
    };
    if (has_diagnose) rows.push_back({"tprof diagnose", {tprof, "-q", "diagnose", path}});
    double floor_s = 0, table_s = 0, diagnose_s = 0;
    for (const Row& row : rows) {
      Run r = best_of(row.cmd, repeat);
      if (r.exit_code != 0) {
        std::printf("  %-34s failed (exit %d)\n", row.label.c_str(), r.exit_code);
        ++failures;
        continue;
      }
      if (floor_s == 0) floor_s = r.seconds;
      if (row.label == "tprof table") table_s = r.seconds;
      if (row.label == "tprof diagnose") diagnose_s = r.seconds;
      std::printf("  %-34s %9.3f %9.0f %9.2fx %11.0f %9.2f\n", row.label.c_str(), r.seconds, mb / r.seconds,
                  floor_s / r.seconds, r.peak_rss_mb, r.peak_rss_mb / mb);
    }
    if (table_s > 0 && diagnose_s > 0) std::printf("  tprof diagnose / tprof table: %.2fx\n", diagnose_s / table_s);
    if (gz) {
      const std::string gz_path = path + ".gz";
      if (run({gen, "--size", size, "--seed", "1", "--out", gz_path, "--gzip"}).exit_code == 0) {
        Run d = best_of({gunzip, gz_path}, repeat);
        Run t = best_of({tprof, "-q", "table", gz_path}, repeat);
        std::printf("  %-34s %9.3f %9.0f %10s %11.0f\n", "gunzip alone (.json.gz)", d.seconds, mb / d.seconds, "",
                    d.peak_rss_mb);
        std::printf("  %-34s %9.3f %9.0f %9.2fx %11.0f   (time / gunzip time)\n", "tprof table (.json.gz)", t.seconds,
                    mb / t.seconds, t.seconds / d.seconds, t.peak_rss_mb);
        if (d.exit_code != 0 || t.exit_code != 0) ++failures;
      }
      std::remove(gz_path.c_str());
    }
    std::remove(path.c_str());
    std::printf("\n");
  }
  return failures == 0 ? 0 : 1;
}
