// Issue 23 through the tprof binary: the repros of the review, each now a
// refusal (exit 2, one line "tprof: <file>: <what was expected>", nothing
// half-written) or a correct write. The writer's own cases are in
// tests/unit/output_safety_test.cc.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "src/base/file.h"
#include "tests/support/run_cli.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

constexpr uid_t kNobody = 65534;

class CliOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/tprof_cli_output_" + std::to_string(getpid()) + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    trace_ = at("in.json");
    fs::copy_file(std::string(TPROF_TEST_DATA) + "/torch-1.13/memory/memory.kineto.json", trace_);
    const CliResult table = run({"table", trace_});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    ASSERT_GT(table.out.size(), 1024u);  // past `ulimit -f 1` below
    table_ = table.out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string at(const std::string& name) const { return dir_ + "/" + name; }
  static CliResult run(const std::vector<std::string>& args, const std::string& stdin_path = "") {
    return run_cli(TPROF_BIN, args, stdin_path);
  }
  // `script` under /bin/sh, with $T the trace, $B tprof, in the test's directory.
  CliResult sh(const std::string& script) const {
    return run_cli("/bin/sh", {"-c", "cd '" + dir_ + "' && T='" + trace_ + "' && B='" + TPROF_BIN + "' && " + script});
  }
  static std::string slurp(const std::string& path) {
    Result<std::string> r = internal::read_file(path);
    return r ? *r : "<unreadable>";
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_, trace_, table_;
};

// A: `ln -s /root/secret out.txt.tmp.<pid>` by an unprivileged user made a
// root-run `tprof table T -o out.txt` write the table into the root-owned
// 0600 file (6c32929). The pid is known ahead here: the child that plants
// the link (as nobody) is forked by the process that then execs tprof.
TEST_F(CliOutput, ALinkPlantedByAnotherUserNeverLeadsTheOutputElsewhere) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the link is planted as nobody (uid 65534), tprof runs as root";
  const std::string vault = at("root_only"), victim = vault + "/secret", shared = at("shared");
  fs::create_directories(vault);
  ASSERT_EQ(chmod(vault.c_str(), 0700), 0);
  ASSERT_TRUE(internal::write_file_atomic(victim, "root's secret\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  fs::create_directories(shared);
  ASSERT_EQ(chown(shared.c_str(), kNobody, kNobody), 0);
  const std::string out = shared + "/out.txt";
  const pid_t runner = fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    const pid_t planter = fork();
    if (planter == 0) {
      if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
      _exit(symlink(victim.c_str(), (out + ".tmp." + std::to_string(getppid())).c_str()) == 0 ? 0 : 4);
    }
    int status = 0;
    waitpid(planter, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(WIFEXITED(status) ? 100 + WEXITSTATUS(status) : 99);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(TPROF_BIN, TPROF_BIN, "table", trace_.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  int status = 0;
  waitpid(runner, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 103) GTEST_SKIP() << "cannot become uid 65534 here (no CAP_SETUID)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(slurp(victim), "root's secret\n");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "out.txt became the planted link";
  EXPECT_EQ(slurp(out), table_);
}

// B: descriptor names. On 6c32929 `-o /dev/stdout >> log` exited 0 with the
// log replaced, `-o /dev/stdout | cat` failed "cannot create", and
// `- -o /dev/stdin < in.json` replaced in.json with the table.
TEST_F(CliOutput, StdoutStdinAndFdNamesAreTheDescriptorsNotFilesToReplace) {
  ASSERT_TRUE(internal::write_file_atomic(at("log"), "keep\n"));
  const CliResult appended = sh("$B table \"$T\" -o /dev/stdout >> log");
  EXPECT_EQ(appended.exit_code, 0) << appended.err;
  EXPECT_EQ(slurp(at("log")), "keep\n" + table_);

  const CliResult piped = sh("{ $B table \"$T\" -o /dev/stdout; echo $? > rc; } | cat > piped");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(slurp(at("rc")), "0\n") << piped.err;
  EXPECT_EQ(slurp(at("piped")), table_);

  const CliResult fd3 = sh("$B table \"$T\" -o /proc/self/fd/3 3>> log");
  EXPECT_EQ(fd3.exit_code, 0) << fd3.err;
  EXPECT_EQ(slurp(at("log")), "keep\n" + table_ + table_);

  const std::string original = slurp(trace_);
  const CliResult into_stdin = run({"table", "-", "-o", "/dev/stdin"}, trace_);
  EXPECT_EQ(into_stdin.exit_code, 2);
  EXPECT_EQ(into_stdin.err, "tprof: /dev/stdin: is the input trace; refusing to overwrite it\n");
  EXPECT_EQ(slurp(trace_), original);
  const CliResult append_to_input = sh("$B table in.json -o /dev/stdout >> in.json");
  EXPECT_EQ(append_to_input.exit_code, 2);
  EXPECT_EQ(append_to_input.err, "tprof: /dev/stdout: is the input trace; refusing to overwrite it\n");
  EXPECT_EQ(slurp(trace_), original);
  EXPECT_EQ(listing(), (std::vector<std::string>{"in.json", "log", "piped", "rc"}));
}

// C: a FIFO nobody reads hung `tprof table T -o f` forever in open() on
// 6c32929. Now exit 2 after the 10 s wait (the one slow case here).
TEST_F(CliOutput, AFifoNobodyReadsIsAnErrorAfterTheWait) {
  ASSERT_EQ(mkfifo(at("f").c_str(), 0600), 0);
  const CliResult r = sh("exec timeout -s KILL 60 $B table \"$T\" -o f");
  EXPECT_EQ(r.exit_code, 2) << "137: killed by the timeout (hung)";
  EXPECT_EQ(r.err, "tprof: f: no reader opened this FIFO within 10.0 s; start the program that reads it first\n");
  EXPECT_EQ(r.out, "");
}

// I: --help and --version into a full device exited 0 on 6c32929.
TEST_F(CliOutput, HelpAndVersionIntoAFullDeviceAreErrors) {
  for (const std::string args : {"--help", "--version", "table --help"}) {
    SCOPED_TRACE(args);
    const CliResult full = sh("$B " + args + " > /dev/full");
    EXPECT_EQ(full.exit_code, 2);
    EXPECT_EQ(full.err, "tprof: cannot write to standard output: No space left on device\n");
    const CliResult closed = sh("$B " + args + " >&-");
    EXPECT_EQ(closed.exit_code, 2);
    EXPECT_EQ(closed.err, "tprof: cannot write to standard output: Bad file descriptor\n");
  }
  EXPECT_EQ(run({"--version"}).exit_code, 0);
}

// I: a link loop as -o was replaced by a regular file, a 0444 file silently
// replaced (6c32929).
TEST_F(CliOutput, ALinkLoopAndAReadOnlyFileAreRefusedAndKept) {
  fs::create_symlink("loop_b", at("loop_a"));
  fs::create_symlink("loop_a", at("loop_b"));
  const CliResult loop = run({"table", trace_, "-o", at("loop_a")});
  EXPECT_EQ(loop.exit_code, 2);
  EXPECT_EQ(loop.err, "tprof: " + at("loop_a") +
                          ": is a symbolic link loop (or a chain of more than 40 links); expected a path to a file, "
                          "not replacing it\n");
  EXPECT_TRUE(fs::is_symlink(at("loop_a")));
  ASSERT_TRUE(internal::write_file_atomic(at("frozen.txt"), "keep me"));
  ASSERT_EQ(chmod(at("frozen.txt").c_str(), 0444), 0);
  const CliResult frozen = run({"table", trace_, "-o", at("frozen.txt")});
  EXPECT_EQ(frozen.exit_code, 2);
  EXPECT_EQ(frozen.err, "tprof: " + at("frozen.txt") +
                            ": is read-only (mode 0444); expected a writable file, not replacing it (make it "
                            "writable or remove it first)\n");
  EXPECT_EQ(slurp(at("frozen.txt")), "keep me");
  EXPECT_EQ(listing(), (std::vector<std::string>{"frozen.txt", "in.json", "loop_a", "loop_b"}));
}

// I: `ulimit -f` killed tprof with SIGXFSZ and left the temporary file
// (6c32929): now exit 2 naming the limit, the old file whole, nothing left;
// the same for standard output redirected to a file.
TEST_F(CliOutput, AFileSizeLimitIsAWriteErrorNotAKill) {
  ASSERT_TRUE(internal::write_file_atomic(at("out.txt"), "old"));
  const CliResult r = sh("ulimit -f 1 && exec $B table \"$T\" -o out.txt");
  EXPECT_EQ(r.exit_code, 2) << "killed by signal " << r.term_signal;
  EXPECT_EQ(r.err, "tprof: out.txt: cannot write: File too large\n");
  EXPECT_EQ(slurp(at("out.txt")), "old");
  const CliResult to_stdout = sh("ulimit -f 1 && exec $B table \"$T\" > redirected.txt");
  EXPECT_EQ(to_stdout.exit_code, 2) << "killed by signal " << to_stdout.term_signal;
  EXPECT_EQ(to_stdout.err, "tprof: cannot write to standard output: File too large\n");
  EXPECT_EQ(listing(), (std::vector<std::string>{"in.json", "out.txt", "redirected.txt"}));
}

// I: a killed write's temporary file stayed until the same target was
// written again (6c32929); now the next write into the directory removes it.
TEST_F(CliOutput, AKilledWritesTemporaryFileGoesWithTheNextWriteToTheDirectory) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string stale = at("report.html.tmp." + std::to_string(gone) + ".00112233aabbccdd");
  ASSERT_TRUE(internal::write_file_atomic(stale, "half a report"));
  const CliResult r = run({"table", trace_, "-o", at("table.txt")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(listing(), (std::vector<std::string>{"in.json", "table.txt"}));
}

// Issue 36: nobody's `ln -s /root/secret /tmp/out.txt` made root's `tprof
// table T -o /tmp/out.txt` write the table into the root-only file: tprof
// followed links by hand, past the kernel's fs.protected_symlinks. Now the
// kernel's rule holds: exit 2 naming the link, the victim untouched,
// nothing left in the directory; for `export --sqlite` too.
TEST_F(CliOutput, AnotherUsersLinkInAStickyDirectoryIsRefusedNotFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the link is made as nobody (uid 65534), tprof runs as root";
  const std::string vault = at("root_only"), victim = vault + "/secret", sticky = at("tmp");
  fs::create_directories(vault);
  ASSERT_EQ(chmod(vault.c_str(), 0700), 0);
  ASSERT_TRUE(internal::write_file_atomic(victim, "root's secret\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  fs::create_directories(sticky);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  const std::string out = sticky + "/out.txt", db = sticky + "/out.db";
  const pid_t planter = fork();
  ASSERT_GE(planter, 0);
  if (planter == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      _exit(3);
    }
    _exit(symlink(victim.c_str(), out.c_str()) == 0 && symlink(victim.c_str(), db.c_str()) == 0 ? 0 : 4);
  }
  int status = 0;
  waitpid(planter, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot become uid 65534 here (no CAP_SETUID)";
  ASSERT_EQ(WEXITSTATUS(status), 0);

  const CliResult table = run({"table", trace_, "-o", out});
  EXPECT_EQ(table.exit_code, 2);
  EXPECT_EQ(table.err, "tprof: " + out + ": is a symbolic link owned by uid 65534 in the sticky world-writable "
                                         "directory " + sticky +
                           " (owned by uid 0); not following it, as the kernel would not (fs.protected_symlinks): "
                           "there only a link of this user or of the directory's owner is followed (name the file "
                           "itself, or remove the link)\n");
  const CliResult exported = run({"export", "--sqlite", trace_, "-o", db});
  EXPECT_EQ(exported.exit_code, 2);
  if (exported.err.find("built without SQLite") == std::string::npos) {
    EXPECT_EQ(exported.err.rfind("tprof: " + db + ": is a symbolic link owned by uid 65534", 0), 0u) << exported.err;
  }
  EXPECT_EQ(slurp(victim), "root's secret\n");
  EXPECT_TRUE(fs::is_symlink(out));
  EXPECT_TRUE(fs::is_symlink(db));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(sticky)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"out.db", "out.txt"}));
}

}  // namespace
}  // namespace tprof
