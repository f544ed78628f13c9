// Issue 23: the one output path (src/base/file.h) against a link planted at
// its temporary file, descriptor names, FIFOs without a reader, read-only
// targets, link loops, RLIMIT_FSIZE and temporary files of dead processes;
// input FIFOs whose writer is slow; tensorboard names that never collide.
// Each test failed on 6c32929 (what it did then is in its comment).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "src/base/file.h"
#include "src/capture/handlers.h"
#include "tprof/profiler.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof::internal {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

class OutputSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/tprof_output_safety_" + std::to_string(getpid()) + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string at(const std::string& name) const { return dir_ + "/" + name; }
  static std::string slurp(const std::string& path) {
    Result<std::string> r = read_file(path);
    return r ? *r : "<unreadable>";
  }
  std::vector<std::string> listing(const std::string& sub = "") const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(sub.empty() ? dir_ : at(sub))) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_;
};

// Runs `body` in a child that SIGALRM kills after 60 s, so that a hang is
// a failure and not a stuck test; returns the child's exit code, or
// 128 + the signal it died of.
template <class F>
int in_child(F body) {
  const pid_t child = fork();
  if (child == 0) {
    alarm(60);
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `body` as uid and gid 65534 (nobody) in a forked child: its exit
// code, 3 when the child could not become nobody.
template <class F>
int as_nobody(F body) {
  return in_child([&] {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      return 3;
    }
    return body();
  });
}

// A pid that was a process of ours and is gone (reaped).
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

// ---- A: a link planted at the temporary file's name ----------------------

// Anyone who could write to the output directory could make a root-run
// tprof overwrite any file: `ln -s /root/secret out.txt.tmp.<pid>` and the
// writer opened that name with O_CREAT|O_TRUNC, following the link, then
// renamed the link into place. On 6c32929 the victim held the output and
// out.txt became a link to it.
TEST_F(OutputSafety, ALinkPlantedAtTheTemporaryNameIsNeverFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the link is planted as nobody (uid 65534) and written over as root";
  const std::string vault = at("root_only"), victim = vault + "/secret";
  fs::create_directories(vault);
  ASSERT_EQ(chmod(vault.c_str(), 0700), 0);
  ASSERT_TRUE(write_file_atomic(victim, "root's secret\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  // The output directory belongs to the attacker.
  const std::string shared = at("shared");
  fs::create_directories(shared);
  ASSERT_EQ(chown(shared.c_str(), kNobody, kNobody), 0);
  const std::vector<std::string> outputs = {shared + "/out.txt", shared + "/trace.json"};
  // As nobody: a link to the victim at each name the writer (this process)
  // would have used before: "<output>.tmp.<pid>".
  const pid_t writer = getpid();
  const int planted = in_child([&] {
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) return 3;
    if (access(victim.c_str(), R_OK) == 0 || access(victim.c_str(), W_OK) == 0) return 4;  // really not theirs
    for (const std::string& out : outputs) {
      if (symlink(victim.c_str(), (out + ".tmp." + std::to_string(writer)).c_str()) != 0) return 5;
    }
    return 0;
  });
  if (planted == 3) GTEST_SKIP() << "cannot become uid 65534 here (no CAP_SETUID)";
  ASSERT_EQ(planted, 0);

  // As root: the CLI's writer, export_chrome_trace, and the handler's.
  ASSERT_TRUE(write_file_atomic(outputs[0], "the table\n"));
  Profiler prof;
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.stop());
  ASSERT_TRUE(prof.export_chrome_trace(outputs[1]));
  std::string worker = "w";
  ASSERT_TRUE(write_tensorboard_trace(prof.trace(), shared, &worker, false));

  EXPECT_EQ(slurp(victim), "root's secret\n");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  for (const std::string& out : outputs) {
    ASSERT_EQ(lstat(out.c_str(), &st), 0) << out;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << out << " was replaced by the planted link";
    const std::string plant = out + ".tmp." + std::to_string(writer);
    ASSERT_EQ(lstat(plant.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the attacker's link is theirs to remove";
  }
  EXPECT_EQ(slurp(outputs[0]), "the table\n");
  EXPECT_TRUE(read_trace(outputs[1]));
  // Nothing else in the directory: the output, the plants, one tensorboard trace.
  EXPECT_EQ(listing("shared").size(), 5u);
}

TEST_F(OutputSafety, TemporaryNamesAreUnpredictableAndCreatedExclusively) {
  // Two writers of one target at once in one process: two temporary files,
  // named "<name>.tmp.<pid>.<16 hex digits>" (on 6c32929 both were
  // "<name>.tmp.<pid>", the second truncating the first's).
  auto a = AtomicFileWriter::create(at("t.json"));
  auto b = AtomicFileWriter::create(at("t.json"));
  ASSERT_TRUE(a && b);
  const std::vector<std::string> names = listing();
  ASSERT_EQ(names.size(), 2u);
  const std::regex form(R"(t\.json\.tmp\.)" + std::to_string(getpid()) + R"(\.[0-9a-f]{16})");
  for (const std::string& n : names) EXPECT_TRUE(std::regex_match(n, form)) << n;
  ASSERT_TRUE((*a)->write("first"));
  ASSERT_TRUE((*b)->write("second"));
  ASSERT_TRUE((*a)->commit());
  ASSERT_TRUE((*b)->commit());
  EXPECT_EQ(slurp(at("t.json")), "second");
  EXPECT_EQ(listing(), std::vector<std::string>{"t.json"});
  // A name at NAME_MAX still has room for the suffix.
  const std::string longest(255, 'n');
  ASSERT_TRUE(write_file_atomic(at(longest), "x"));
  EXPECT_EQ(slurp(at(longest)), "x");
}

// ---- B: descriptor names -------------------------------------------------

// /dev/fd/N (and /dev/stdout, /proc/self/fd/N) was resolved like any link
// and the file behind it replaced: `tprof table t -o /dev/stdout >> log`
// exited 0 with the log gone. On 6c32929 the log held only the last write
// and was a new inode.
TEST_F(OutputSafety, DescriptorNamesAreWrittenThroughNeverResolvedAndReplaced) {
  const std::string log = at("log");
  ASSERT_TRUE(write_file_atomic(log, "keep\n"));
  struct stat before {}, after {};
  ASSERT_EQ(stat(log.c_str(), &before), 0);
  const int appending = open(log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(appending, 0);
  const std::string n = std::to_string(appending);
  for (const std::string& name :
       {"/dev/fd/" + n, "/proc/self/fd/" + n, "/proc/" + std::to_string(getpid()) + "/fd/" + n}) {
    EXPECT_TRUE(write_file_atomic(name, name + "\n")) << name;
  }
  // A link of the user's own to one of them is the same descriptor.
  ASSERT_EQ(symlink(("/dev/fd/" + n).c_str(), at("alias").c_str()), 0);
  ASSERT_TRUE(write_file_atomic(at("alias"), "alias\n"));
  ASSERT_EQ(stat(log.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(slurp(log), "keep\n/dev/fd/" + n + "\n/proc/self/fd/" + n + "\n/proc/" + std::to_string(getpid()) +
                            "/fd/" + n + "\nalias\n");
  EXPECT_EQ(fcntl(appending, F_GETFD), FD_CLOEXEC) << "the caller's descriptor stays open";
  close(appending);

  // A pipe (`-o /dev/stdout | wc`: "cannot create" on 6c32929).
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_TRUE(write_file_atomic("/dev/fd/" + std::to_string(fds[1]), "through the pipe"));
  close(fds[1]);
  char buf[64] = {};
  EXPECT_EQ(read(fds[0], buf, sizeof buf), 16);
  EXPECT_EQ(std::string(buf), "through the pipe");
  close(fds[0]);

  // Open only for reading (`-o /dev/stdin < in.json`), or not open: refused.
  const int reading = open(log.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reading, 0);
  Status ro = write_file_atomic("/dev/fd/" + std::to_string(reading), "x");
  ASSERT_FALSE(ro);
  EXPECT_NE(ro.error().to_string().find("open only for reading"), std::string::npos) << ro.error().to_string();
  EXPECT_TRUE(same_file("/dev/fd/" + std::to_string(reading), log));
  EXPECT_TRUE(same_file("/proc/self/fd/" + std::to_string(reading), log));
  // "-" is standard input.
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_EQ(dup2(reading, STDIN_FILENO), STDIN_FILENO);
  EXPECT_TRUE(same_file("-", log));
  EXPECT_TRUE(same_file("/dev/stdin", log));
  Status stdin_out = write_file_atomic("/dev/stdin", "x");
  ASSERT_EQ(dup2(saved_stdin, STDIN_FILENO), STDIN_FILENO);
  close(saved_stdin);
  EXPECT_FALSE(stdin_out);
  const int closed = dup(reading);
  close(closed);
  close(reading);
  Status gone = write_file_atomic("/dev/fd/" + std::to_string(closed), "x");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().to_string().find("which is not open"), std::string::npos) << gone.error().to_string();
  // Devices are not "the same file" as an input: a terminal is both.
  EXPECT_FALSE(same_file("/dev/null", "/dev/null"));
  EXPECT_EQ(listing(), (std::vector<std::string>{"alias", "log"}));
}

TEST_F(OutputSafety, LinksIntoProcOtherThanOurDescriptorsAreRefused) {
  // /proc/1/fd/0 or a link to /proc/self/cwd/x are magic links: resolving
  // them as paths and replacing the result is never what was meant.
  ASSERT_EQ(symlink("/proc/self/cwd", at("cwd").c_str()), 0);
  ASSERT_EQ(symlink("/proc/self/fd/999999", at("fd").c_str()), 0);
  for (const std::string& name : {std::string("/proc/self/cwd"), at("cwd")}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(write_file_atomic(name, "x"));
  }
  Status s = write_file_atomic(at("fd"), "x");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().to_string().find("not open"), std::string::npos) << s.error().to_string();
  EXPECT_EQ(listing(), (std::vector<std::string>{"cwd", "fd"}));
}

// ---- C: a FIFO without a reader ------------------------------------------

// `mkfifo f; tprof table t -o f` blocked forever in open() on 6c32929 (here:
// the child is killed by SIGALRM, exit 142).
TEST_F(OutputSafety, AFifoWithoutAReaderIsAnErrorAfterTheWaitNotAHang) {
  const std::string fifo = at("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rc = in_child([&] {
    Result<std::unique_ptr<AtomicFileWriter>> w = AtomicFileWriter::create(fifo, {.fifo_wait_ms = 100});
    if (w) return 1;
    const std::string e = w.error().to_string();
    if (e.find("no reader opened this FIFO within 0.1 s") == std::string::npos || e.find(fifo) != 0) {
      std::fprintf(stderr, "%s\n", e.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "1: opened without a reader; 2: another message; 142: hung in open()";
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(listing(), std::vector<std::string>{"pipe"});
}

// ---- D: input FIFOs and pipes --------------------------------------------

constexpr char kTrace[] = "{\"traceEvents\": []}";

// `tprof info <(sleep 12; cat t)`: the writer is there from the start, the
// data comes after the wait. On 6c32929: "no writer opened this FIFO".
TEST(InputFifos, APipeWhoseWriterIsSlowIsReadToItsEnd) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(write(fds[1], kTrace, sizeof kTrace - 1), static_cast<ssize_t>(sizeof kTrace - 1));
    close(fds[1]);
  });
  Result<MappedFile> m = MappedFile::open("/dev/fd/" + std::to_string(fds[0]), {.fifo_wait_ms = 1});
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->bytes(), kTrace);
}

// A named FIFO that a writer holds open: read however long the data takes.
TEST(InputFifos, ANamedFifoWithAWriterIsWaitedForPastTheLimit) {
  const std::string path = ::testing::TempDir() + "/tprof_fifo_slow_" + std::to_string(getpid());
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  // O_RDWR never blocks: the writer is attached before the read begins.
  const int held = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(write(held, kTrace, sizeof kTrace - 1), static_cast<ssize_t>(sizeof kTrace - 1));
    close(held);
  });
  Result<MappedFile> m = MappedFile::open(path, {.fifo_wait_ms = 1});
  writer.join();
  std::remove(path.c_str());
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->bytes(), kTrace);
}

// A writer that opens the FIFO after the read began (and after the wait
// started): read as soon as it comes.
TEST(InputFifos, AWriterThatComesWithinTheWaitIsRead) {
  const std::string path = ::testing::TempDir() + "/tprof_fifo_late_" + std::to_string(getpid());
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);  // blocks until the reader opens
    if (fd < 0) return;
    EXPECT_EQ(write(fd, kTrace, sizeof kTrace - 1), static_cast<ssize_t>(sizeof kTrace - 1));
    close(fd);
  });
  Result<MappedFile> m = MappedFile::open(path, {.fifo_wait_ms = 600'000});
  writer.join();
  std::remove(path.c_str());
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->bytes(), kTrace);
}

// ---- I: the output parts -------------------------------------------------

// A link loop as -o: on 6c32929 the first link was replaced by a regular file.
TEST_F(OutputSafety, ALinkLoopIsAnErrorAndStaysALoop) {
  ASSERT_EQ(symlink("b", at("a").c_str()), 0);
  ASSERT_EQ(symlink("a", at("b").c_str()), 0);
  ASSERT_EQ(symlink("self", at("self").c_str()), 0);
  for (const std::string name : {"a", "b", "self"}) {
    Status s = write_file_atomic(at(name), "x");
    ASSERT_FALSE(s) << name;
    EXPECT_NE(s.error().to_string().find("symbolic link loop"), std::string::npos) << s.error().to_string();
    EXPECT_EQ(s.error().path(), at(name));
  }
  for (const std::string name : {"a", "b", "self"}) {
    struct stat st {};
    ASSERT_EQ(lstat(at(name).c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << name;
  }
  EXPECT_EQ(listing(), (std::vector<std::string>{"a", "b", "self"}));
}

// A 0444 file was silently replaced on 6c32929 (root or its owner).
TEST_F(OutputSafety, AReadOnlyFileIsRefusedAndKept) {
  const std::string path = at("frozen.json");
  ASSERT_TRUE(write_file_atomic(path, "keep me"));
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  Status s = write_file_atomic(path, "new");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().to_string(),
            path + ": is read-only (mode 0444); expected a writable file, not replacing it (make it writable or "
                   "remove it first)");
  EXPECT_EQ(slurp(path), "keep me");
  // Through a link, too.
  ASSERT_EQ(symlink("frozen.json", at("link").c_str()), 0);
  EXPECT_FALSE(write_file_atomic(at("link"), "new"));
  EXPECT_EQ(slurp(path), "keep me");
  EXPECT_EQ(listing(), (std::vector<std::string>{"frozen.json", "link"}));
}

TEST_F(OutputSafety, AFileOfAnotherUserKeepsItsOwnerWhenRootWritesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string path = at("theirs.json");
  ASSERT_TRUE(write_file_atomic(path, "old"));
  ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(write_file_atomic(path, "new"));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(slurp(path), "new");
}

// `ulimit -f` with SIGXFSZ at its default (kill): on 6c32929 the child died
// of SIGXFSZ (exit 153 here) and left its temporary file.
TEST_F(OutputSafety, AWritePastTheFileSizeLimitIsAnErrorNotAKill) {
  const std::string path = at("big.json");
  ASSERT_TRUE(write_file_atomic(path, "old"));
  const int rc = in_child([&] {
    signal(SIGXFSZ, SIG_DFL);
    rlimit limit{64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
    Status s = write_file_atomic(path, std::string(1 << 20, 'x'));
    if (s) return 1;
    if (s.error().message().find("File too large") == std::string::npos) return 2;
    // The signal it raised was taken: the process lives on unharmed.
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGXFSZ) == 1 ? 4 : 0;
  });
  EXPECT_EQ(rc, 0) << "1: no error; 2: another reason; 4: SIGXFSZ left pending; 153: killed by SIGXFSZ";
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(listing(), std::vector<std::string>{"big.json"});
}

// A killed write's temporary file stayed until the same target was written
// again (6c32929); now any write into the directory clears those of dead
// processes, and only those: a live process's, another user's, a link, or
// a name that only looks alike stay.
TEST_F(OutputSafety, TemporaryFilesOfDeadProcessesGoAtTheNextWriteToTheDirectory) {
  const pid_t dead = dead_pid();
  const std::string d = std::to_string(dead);
  const std::vector<std::string> stale = {"other.json.tmp." + d + ".0123456789abcdef",
                                          "x.tmp." + d + ".fedcba9876543210", "target.json.tmp." + d};
  // Made directly: a write through the writer would already clear them.
  auto plant = [&](const std::string& name) {
    const int fd = open(at(name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << name;
    ASSERT_EQ(write(fd, "left", 4), 4);
    close(fd);
  };
  for (const std::string& name : stale) plant(name);
  std::vector<std::string> kept = {"alive.json.tmp.1.0123456789abcdef",  // pid 1 lives
                                   "notes.tmp." + d,                     // not this target's old form
                                   "y.tmp." + d + ".0123456789ABCDEF",    // not the form (upper case)
                                   "link.tmp." + d + ".0123456789abcdef"};
  plant(kept[0]);
  plant(kept[1]);
  plant(kept[2]);
  ASSERT_EQ(symlink("target.json", at(kept[3]).c_str()), 0);
  if (geteuid() == 0) {
    kept.push_back("theirs.json.tmp." + d + ".0123456789abcdef");
    plant(kept.back());
    ASSERT_EQ(chown(at(kept.back()).c_str(), kNobody, kNobody), 0);
  }
  ASSERT_TRUE(write_file_atomic(at("target.json"), "new"));
  kept.push_back("target.json");
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(listing(), kept);
}

// ---- issue 36: links in sticky world-writable directories --------------------

// resolve_output() reads links itself, so the kernel's fs.protected_symlinks
// did not apply: nobody's `ln -s /root/secret /tmp/out.txt` made root's
// `-o /tmp/out.txt` replace the root-only file with the output (before
// issue 36 the victim held "the table"). Now, as the kernel rules, a link
// in a sticky world-writable directory is followed only when it is the
// caller's or the directory owner's, at every hop; otherwise an error
// naming the link, and nothing written anywhere.
TEST_F(OutputSafety, AnotherUsersLinkInAStickyWorldWritableDirectoryIsNotFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the links are made as nobody (uid 65534), written through as root";
  const std::string vault = at("root_only"), victim = vault + "/secret";
  fs::create_directories(vault);
  ASSERT_EQ(chmod(vault.c_str(), 0700), 0);
  ASSERT_TRUE(write_file_atomic(victim, "root's secret\n"));
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  const std::string sticky = at("sticky");  // /tmp-like: root's, 01777
  fs::create_directories(sticky);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  const std::vector<std::string> planted = {sticky + "/out.txt", sticky + "/trace.json", sticky + "/model.json"};
  const int made = as_nobody([&] {
    if (access(victim.c_str(), R_OK) == 0 || access(victim.c_str(), W_OK) == 0) return 4;  // really not theirs
    for (const std::string& link : planted) {
      if (symlink(victim.c_str(), link.c_str()) != 0) return 5;
    }
    return 0;
  });
  if (made == 3) GTEST_SKIP() << "cannot become uid 65534 here (no CAP_SETUID)";
  ASSERT_EQ(made, 0);
  // Root's own links that lead to nobody's: refused at the second hop, in
  // the sticky directory and from outside it.
  ASSERT_EQ(symlink("out.txt", (sticky + "/mine").c_str()), 0);
  ASSERT_EQ(symlink((sticky + "/out.txt").c_str(), at("outside").c_str()), 0);

  auto expect_refused = [&](const Status& s, const std::string& output, const std::string& link) {
    ASSERT_FALSE(s) << output;
    EXPECT_EQ(s.error().path(), output);
    const std::string e = s.error().to_string();
    EXPECT_NE(e.find("owned by uid 65534 in the sticky world-writable directory " + sticky), std::string::npos) << e;
    EXPECT_NE(e.find(link == output ? output + ": is a symbolic link" : "leads to " + link), std::string::npos) << e;
  };
  expect_refused(write_file_atomic(planted[0], "the table\n"), planted[0], planted[0]);
  expect_refused(AtomicFileWriter::create(planted[0]).error(), planted[0], planted[0]);
  expect_refused(write_file_atomic(sticky + "/mine", "the table\n"), sticky + "/mine", sticky + "/out.txt");
  expect_refused(write_file_atomic(at("outside"), "the table\n"), at("outside"), sticky + "/out.txt");
  Profiler prof;
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.stop());
  expect_refused(prof.export_chrome_trace(planted[1]), planted[1], planted[1]);
  expect_refused(write_trace(prof.trace(), planted[2]), planted[2], planted[2]);

  EXPECT_EQ(slurp(victim), "root's secret\n");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(listing("root_only"), std::vector<std::string>{"secret"});
  // Every link stays a link, and no temporary file is left anywhere.
  for (const std::string& link : planted) {
    ASSERT_EQ(lstat(link.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << link;
    EXPECT_EQ(st.st_uid, kNobody);
  }
  EXPECT_EQ(listing("sticky"), (std::vector<std::string>{"mine", "model.json", "out.txt", "trace.json"}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"outside", "root_only", "sticky"}));
}

// What the kernel allows stays allowed: in a sticky world-writable
// directory, a link of the caller's own or of the directory's owner; in a
// directory that is not sticky (or not world-writable), anyone's link.
TEST_F(OutputSafety, LinksTheKernelWouldFollowAreStillFollowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: links of nobody (uid 65534), written through as root";
  fs::create_directories(at("targets"));
  const std::string mine = at("targets/mine.txt"), owners = at("targets/owners.txt"),
                    open_dir = at("targets/open.txt");
  const std::string theirs = at("theirs"), plain = at("plain");
  for (const std::string& d : {theirs, plain}) fs::create_directories(d);
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(theirs.c_str(), 01777), 0);  // nobody's, sticky and world-writable
  ASSERT_EQ(chmod(plain.c_str(), 0777), 0);    // world-writable, not sticky
  ASSERT_EQ(symlink(mine.c_str(), (theirs + "/mine.txt").c_str()), 0);  // the caller's link
  const int made = as_nobody([&] {
    if (symlink(owners.c_str(), (theirs + "/owners.txt").c_str()) != 0) return 4;  // the directory owner's
    if (symlink(open_dir.c_str(), (plain + "/open.txt").c_str()) != 0) return 5;   // anyone's, not sticky
    return 0;
  });
  if (made == 3) GTEST_SKIP() << "cannot become uid 65534 here (no CAP_SETUID)";
  ASSERT_EQ(made, 0);
  for (const std::string& link : {theirs + "/mine.txt", theirs + "/owners.txt", plain + "/open.txt"}) {
    Status s = write_file_atomic(link, "through " + link);
    EXPECT_TRUE(s) << s.error().to_string();
    struct stat st {};
    ASSERT_EQ(lstat(link.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << link;
  }
  EXPECT_EQ(slurp(mine), "through " + theirs + "/mine.txt");
  EXPECT_EQ(slurp(owners), "through " + theirs + "/owners.txt");
  EXPECT_EQ(slurp(open_dir), "through " + plain + "/open.txt");
}

// ---- E: tensorboard names --------------------------------------------------

// Names to the millisecond: two windows ending in the same millisecond
// overwrote each other (24 of 30 runs lost a trace on 6c32929). Now the ns
// of current torch, and a taken name moves to the next ns.
TEST_F(OutputSafety, TensorboardNamesNeverCollideAndNeverReplace) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  ASSERT_TRUE(prof.stop());
  const std::int64_t ns = 1'795'319'515'550'123'456;
  std::string worker = "w0";
  std::vector<std::string> written;
  for (int i = 0; i < 3; ++i) {
    Result<std::string> p = write_tensorboard_trace(prof.trace(), dir_, &worker, i == 2, ns);
    ASSERT_TRUE(p) << p.error().to_string();
    written.push_back(*p);
  }
  EXPECT_EQ(written, (std::vector<std::string>{at("w0.1795319515550123456.pt.trace.json"),
                                               at("w0.1795319515550123457.pt.trace.json"),
                                               at("w0.1795319515550123456.pt.trace.json.gz")}));
  for (const std::string& p : written) EXPECT_TRUE(read_trace(p)) << p;
  // Whatever holds a name (a file, a link to a file that must not change)
  // is left alone, and the link is not followed.
  ASSERT_TRUE(write_file_atomic(at("victim"), "untouched"));
  ASSERT_EQ(symlink("victim", at("w0.1795319515550123458.pt.trace.json").c_str()), 0);
  Result<std::string> p = write_tensorboard_trace(prof.trace(), dir_, &worker, false, ns);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, at("w0.1795319515550123459.pt.trace.json"));
  EXPECT_EQ(slurp(at("victim")), "untouched");
  EXPECT_EQ(slurp(written[0]), slurp(*p));

  // Through the handler, back to back: every window its own file.
  const std::string tb = at("tb");
  Profiler many({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1, .repeat = 30}),
                 .on_trace_ready = tensorboard_trace_handler(tb, "worker0")});
  ASSERT_TRUE(many.start());
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(many.step());
  ASSERT_TRUE(many.stop());
  const std::regex form(R"(worker0\.\d{19}\.pt\.trace\.json)");
  const std::vector<std::string> files = listing("tb");
  EXPECT_EQ(files.size(), 30u);
  for (const std::string& f : files) EXPECT_TRUE(std::regex_match(f, form)) << f;
}

}  // namespace
}  // namespace tprof::internal
