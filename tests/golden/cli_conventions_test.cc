// CLI conventions seen from outside the binary: severity colours on a
// terminal only (--color, NO_COLOR, TERM=dumb, never in JSON or files), `-`
// reading a plain or gzip trace from a pipe, and the man page and bash
// completion generated from the command definitions (the completion's
// behaviour in bash: completion_test.sh).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_cli.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

const std::string kEnv = "/usr/bin/env";
// Two findings of different severities in the short view (warning, info).
const std::string kTrace = std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_cold_eager.json";
// A critical one.
const std::string kCriticalTrace = std::string(TPROF_TEST_DATA) + "/public/hta/trace_filter/sampled_rank-0.json.gz";
// The commands users see; the hidden completion and man are tprof's too.
const std::vector<std::string> kCommands = {"table",  "steps",     "info",  "diagnose", "kernels",    "compare",
                                            "record", "serve",     "sweep", "report",   "summarize",  "merge",
                                            "export", "critical-path", "whatif", "memory", "completion", "man"};

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

// Runs tprof under env(1), whose arguments set or unset variables first;
// NO_COLOR and TERM are always given so the caller's environment does not
// decide the test.
CliResult run_env(const std::vector<std::string>& env_args, const std::vector<std::string>& args) {
  std::vector<std::string> all = env_args;
  all.push_back(TPROF_BIN);
  all.insert(all.end(), args.begin(), args.end());
  return run_cli(kEnv, all);
}

// The same with stdout on a pseudo-terminal, as a user's shell has it: what
// tprof wrote there (newlines come back as \r\n) and its exit code.
CliResult run_on_tty(const std::vector<std::string>& env_args, const std::vector<std::string>& args) {
  CliResult r;
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return r;
  const std::string slave_name = ptsname(master);
  std::vector<std::string> all = env_args;
  all.push_back(TPROF_BIN);
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    const int slave = open(slave_name.c_str(), O_RDWR);
    const int null = open("/dev/null", O_WRONLY);
    if (slave < 0 || null < 0) _exit(126);
    dup2(slave, 1);
    dup2(null, 2);
    close(master);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kEnv.c_str()));
    for (const std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kEnv.c_str(), argv.data());
    _exit(127);
  }
  char buf[1 << 16];
  // read() fails with EIO once the child has exited and closed the terminal.
  for (ssize_t n; (n = read(master, buf, sizeof buf)) > 0;) r.out.append(buf, static_cast<std::size_t>(n));
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::vector<std::string> kPlainEnv = {"-u", "NO_COLOR", "TERM=xterm"};

bool has_escape(const std::string& s) { return s.find('\x1b') != std::string::npos; }

// `s` without SGR sequences (ESC [ digits/semicolons m).
std::string strip_sgr(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

TEST(CliColors, AlwaysWrapsEachSeverityTagAndNothingElse) {
  const CliResult plain = run_env(kPlainEnv, {"diagnose", kTrace});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(has_escape(plain.out)) << "auto in a pipe";
  ASSERT_NE(plain.out.find("  1. [warning] "), std::string::npos) << plain.out;
  ASSERT_NE(plain.out.find("  2. [info] "), std::string::npos) << plain.out;

  const CliResult colored = run_env(kPlainEnv, {"--color=always", "diagnose", kTrace});
  ASSERT_EQ(colored.exit_code, 0) << colored.err;
  EXPECT_NE(colored.out.find("  1. \x1b[33m[warning]\x1b[0m Launch overhead"), std::string::npos) << colored.out;
  EXPECT_NE(colored.out.find("  2. \x1b[36m[info]\x1b[0m "), std::string::npos) << colored.out;
  // The colours are the only change, one pair per tag.
  EXPECT_EQ(strip_sgr(colored.out), plain.out);
  const std::regex tag_line(R"((^|\n)  (\d+\. )?\[(critical|warning|info)\] )");
  const auto tags = std::distance(std::sregex_iterator(plain.out.begin(), plain.out.end(), tag_line), {});
  EXPECT_GE(tags, 3);  // the causes of the blog's 64 cold run (3 since the review pass silenced cost_in_children)
  std::ptrdiff_t resets = 0;
  for (std::size_t at = 0; (at = colored.out.find("\x1b[0m", at)) != std::string::npos; ++at) ++resets;
  EXPECT_EQ(resets, tags);

  // The verbose view's "  [warning] id: title" lines, and critical; the
  // flag after the command, as any global flag.
  const CliResult verbose = run_env(kPlainEnv, {"diagnose", "--verbose", kTrace, "--color", "always"});
  ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_NE(verbose.out.find("\n  \x1b[33m[warning]\x1b[0m launch_overhead: "), std::string::npos) << verbose.out;
  const CliResult critical = run_env(kPlainEnv, {"-q", "--color=always", "diagnose", kCriticalTrace});
  ASSERT_EQ(critical.exit_code, 0) << critical.err;
  // Causes are ranked by the time they could save, so the critical one
  // need not come first.
  EXPECT_NE(critical.out.find(". \x1b[1;31m[critical]\x1b[0m "), std::string::npos) << critical.out;
}

TEST(CliColors, NeverInJsonMarkdownFilesOrOtherCommands) {
  for (const std::string format : {"json", "md"}) {
    const CliResult r = run_env(kPlainEnv, {"--color=always", "diagnose", "--format", format, kTrace});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    EXPECT_FALSE(has_escape(r.out)) << format;
  }
  const fs::path file = fs::path(::testing::TempDir()) / ("tprof_color_" + std::to_string(getpid()) + ".txt");
  const CliResult to_file = run_env(kPlainEnv, {"--color=always", "diagnose", kTrace, "-o", file.string()});
  EXPECT_EQ(to_file.exit_code, 0) << to_file.err;
  std::stringstream written;
  written << std::ifstream(file).rdbuf();
  fs::remove(file);
  EXPECT_NE(written.str().find("[warning]"), std::string::npos);
  EXPECT_FALSE(has_escape(written.str()));
  const CliResult table = run_env(kPlainEnv, {"--color=always", "table", kTrace});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_FALSE(has_escape(table.out));
}

TEST(CliColors, AutoOnATerminalHonoursNoColorAndDumbTerminals) {
  const std::string tag = "\x1b[33m[warning]\x1b[0m";
  const CliResult tty = run_on_tty(kPlainEnv, {"diagnose", kTrace});
  ASSERT_EQ(tty.exit_code, 0);
  EXPECT_NE(tty.out.find(tag), std::string::npos) << tty.out;
  // no-color.org: set and not empty turns them off; empty does not.
  const CliResult no_color = run_on_tty({"NO_COLOR=1", "TERM=xterm"}, {"diagnose", kTrace});
  ASSERT_EQ(no_color.exit_code, 0);
  EXPECT_NE(no_color.out.find("[warning]"), std::string::npos) << no_color.out;
  EXPECT_FALSE(has_escape(no_color.out));
  EXPECT_NE(run_on_tty({"NO_COLOR=", "TERM=xterm"}, {"diagnose", kTrace}).out.find(tag), std::string::npos);
  EXPECT_FALSE(has_escape(run_on_tty({"-u", "NO_COLOR", "TERM=dumb"}, {"diagnose", kTrace}).out));
  EXPECT_FALSE(has_escape(run_on_tty(kPlainEnv, {"--color=never", "diagnose", kTrace}).out));
  // An explicit flag beats the variable.
  EXPECT_NE(run_on_tty({"NO_COLOR=1", "TERM=xterm"}, {"--color=always", "diagnose", kTrace}).out.find(tag),
            std::string::npos);
  // In a pipe, auto is off even with everything else allowing colours.
  EXPECT_FALSE(has_escape(run_env({"NO_COLOR=1", "TERM=xterm"}, {"diagnose", kTrace}).out));
}

TEST(CliColors, BadModeIsAUsageError) {
  const CliResult r = run_env(kPlainEnv, {"--color=sometimes", "diagnose", kTrace});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--color"), std::string::npos) << r.err;
  // "--color always" (two words): "always" is the flag's value, not the command.
  const CliResult two_words = run_env(kPlainEnv, {"--color", "never", "diagnose", kTrace});
  EXPECT_EQ(two_words.exit_code, 0) << two_words.err;
}

TEST(CliStdin, DashReadsPlainAndGzipTracesFromAPipe) {
  const std::string trace = std::string(TPROF_TEST_DATA) + "/torch-1.13/memory/memory.kineto.json";
  for (const std::string cmd : {"info", "table"}) {
    SCOPED_TRACE(cmd);
    const CliResult file = run_cli(TPROF_BIN, {cmd, trace});
    ASSERT_EQ(file.exit_code, 0) << file.err;
    const std::string tprof = std::string(TPROF_BIN) + " " + cmd + " -";
    const CliResult plain = run_cli("/bin/sh", {"-c", "cat " + shell_quote(trace) + " | " + tprof});
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, file.out);
    const CliResult gz = run_cli("/bin/sh", {"-c", "gzip -c " + shell_quote(trace) + " | " + tprof});
    EXPECT_EQ(gz.exit_code, 0) << gz.err;
    if (cmd == "info") {
      // The one difference: info names the compression it found.
      EXPECT_NE(gz.out.find("Kineto JSON object (gzip)"), std::string::npos) << gz.out;
    } else {
      EXPECT_EQ(gz.out, file.out);
    }
  }
  const CliResult help = run_cli(TPROF_BIN, {"table", "--help"});
  EXPECT_NE(help.out.find("- reads stdin"), std::string::npos) << help.out;
}

std::string read_text(const fs::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

TEST(CliManPage, HasTheSectionsAndEveryCommandAndPassesGroff) {
  const CliResult man = run_cli(TPROF_BIN, {"man"});
  ASSERT_EQ(man.exit_code, 0) << man.err;
  const std::string& page = man.out;
  EXPECT_EQ(page.find(".TH TPROF 1 "), page.find('\n') + 1) << "the title after one comment line";
  for (const std::string section : {"NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS", "EXIT STATUS",
                                    "ENVIRONMENT", "SEE ALSO"}) {
    EXPECT_NE(page.find("\n.SH " + section + "\n"), std::string::npos) << section;
  }
  for (const std::string& cmd : kCommands) {
    std::string roff_cmd;  // roff writes a hyphen as \-
    for (char c : cmd) roff_cmd += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(page.find("\n.SS \"tprof " + roff_cmd + " "), std::string::npos) << cmd;
  }
  EXPECT_NE(page.find("\\fB\\-\\-format\\fR \\fItext\\fR|\\fIjson\\fR|\\fIcsv\\fR"), std::string::npos);
  EXPECT_NE(page.find("\\fB\\-\\-color\\fR \\fIauto\\fR|\\fIalways\\fR|\\fInever\\fR"), std::string::npos);
  EXPECT_NE(page.find(".B NO_COLOR"), std::string::npos);
  for (const std::string code : {"0", "1", "2"}) EXPECT_NE(page.find(".TP\n.B " + code + "\n"), std::string::npos);
  // The build writes the same page next to the binary, for install().
  EXPECT_EQ(read_text(fs::path(TPROF_BIN).parent_path() / "tprof.1"), page);

  // groff's own checks: every warning enabled, none given.
  if (system("command -v groff >/dev/null 2>&1") != 0) GTEST_SKIP() << "groff not installed; structure checked only";
  const fs::path file = fs::path(::testing::TempDir()) / ("tprof_man_" + std::to_string(getpid()) + ".1");
  std::ofstream(file) << page;
  const CliResult groff = run_cli("/bin/sh", {"-c", "groff -man -z -ww " + shell_quote(file.string()) + " 2>&1"});
  EXPECT_EQ(groff.exit_code, 0);
  EXPECT_EQ(groff.out, "");
  if (system("command -v man >/dev/null 2>&1") == 0) {
    const CliResult warnings = run_cli(
        "/bin/sh", {"-c", "MANWIDTH=80 man --warnings -l " + shell_quote(file.string()) + " 2>&1 >/dev/null"});
    EXPECT_EQ(warnings.out, "");
  }
  fs::remove(file);
}

TEST(CliCompletion, ListsEveryCommandAndMatchesTheBuiltFile) {
  const CliResult script = run_cli(TPROF_BIN, {"completion", "bash"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  // The words offered before the command.
  const std::string head = "\n    \"\") words=\"";
  const std::size_t at = script.out.find(head);
  ASSERT_NE(at, std::string::npos) << script.out;
  const std::size_t begin = at + head.size();
  std::string words = " ";
  words.append(script.out, begin, script.out.find('"', begin) - begin).append(" ");
  for (const std::string& cmd : kCommands) {
    EXPECT_NE(words.find(" " + cmd + " "), std::string::npos) << cmd << " in" << words;
  }
  EXPECT_NE(script.out.find("\ncomplete -F _tprof tprof\n"), std::string::npos);
  EXPECT_EQ(read_text(fs::path(TPROF_BIN).parent_path() / "tprof.bash"), script.out);
  // Both generators stay out of --help; the commands users need are there.
  const CliResult help = run_cli(TPROF_BIN, {"--help"});
  EXPECT_EQ(help.out.find("completion"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("\n  man "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("\n  diagnose "), std::string::npos) << help.out;
  // zsh and fish: the built files (completion_shells_test.sh runs them); other shells are refused.
  for (const char* shell : {"zsh", "fish"}) {
    const CliResult other = run_cli(TPROF_BIN, {"completion", shell});
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_EQ(read_text(fs::path(TPROF_BIN).parent_path() / (std::string(shell) == "zsh" ? "_tprof" : "tprof.fish")),
              other.out);
    for (const std::string& cmd : kCommands) EXPECT_NE(other.out.find(" " + cmd), std::string::npos) << shell << ": " << cmd;
  }
  EXPECT_EQ(run_cli(TPROF_BIN, {"completion", "tcsh"}).exit_code, 2);
}

}  // namespace
}  // namespace tprof
