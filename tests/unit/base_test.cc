#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/json_writer.h"
#include "src/base/safe_text.h"
#include "tprof/string_pool.h"

namespace tprof::internal {
namespace {

TEST(StringPool, InternsOnceWithStableIds) {
  StringPool pool;
  EXPECT_EQ(pool.intern(""), kEmptyStr);
  const StrId a = pool.intern("aten::mm");
  const StrId b = pool.intern("aten::add");
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.intern("aten::mm"), a);
  EXPECT_EQ(pool.str(a), "aten::mm");
  EXPECT_EQ(pool.find("aten::add"), b);
  EXPECT_FALSE(pool.find("nope"));
}

TEST(StringPool, ViewsSurviveGrowthAndLongStrings) {
  StringPool pool;
  std::vector<StrId> ids;
  for (int i = 0; i < 50000; ++i) ids.push_back(pool.intern("name_" + std::to_string(i)));
  const std::string big(200000, 'k');
  const StrId big_id = pool.intern(big);
  for (int i = 0; i < 50000; i += 997) EXPECT_EQ(pool.str(ids[i]), "name_" + std::to_string(i));
  EXPECT_EQ(pool.str(big_id), big);
  EXPECT_EQ(pool.size(), 50002u);
}

TEST(JsonWriter, EscapesOnlyWhatJsonRequires) {
  std::string out;
  append_json_string(&out, std::string("a\"b\\c\n\x01\xc3\xa9", 9));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
}

TEST(JsonWriter, MicrosecondsAreExactDecimals) {
  std::string out;
  append_us(&out, 1795319515516244078);
  out += ' ';
  append_us(&out, -1);
  out += ' ';
  append_us(&out, 1000);
  out += ' ';
  append_us(&out, 0);
  EXPECT_EQ(out, "1795319515516244.078 -0.001 1.000 0.000");
}

TEST(JsonWriter, WritesStructurePrettyAndCompact) {
  std::string compact;
  JsonWriter c(&compact);
  c.begin_object();
  c.key("a");
  c.begin_array();
  c.value_int(1);
  c.value_double(0.5);
  c.value_null();
  c.end_array();
  c.key("b");
  c.value_bool(true);
  c.end_object();
  EXPECT_EQ(compact, R"({"a": [1, 0.5, null], "b": true})");

  std::string pretty;
  JsonWriter p(&pretty, JsonWriter::kPretty);
  p.begin_object();
  p.key("a");
  p.begin_array();
  p.value_int(1);
  p.end_array();
  p.key("e");
  p.begin_object();
  p.end_object();
  p.end_object();
  EXPECT_EQ(pretty, "{\n  \"a\": [\n    1\n  ],\n  \"e\": {}\n}");
}

TEST(Gzip, RoundTripsAndSalvagesACutStream) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"name\": \"event " + std::to_string(i) + "\"},\n";
  auto gz = gzip(text);
  ASSERT_TRUE(gz);
  auto back = gunzip(*gz);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->truncated);
  EXPECT_EQ(back->bytes(), text);

  auto cut = gunzip(std::string_view(*gz).substr(0, gz->size() / 2));
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->truncated);
  EXPECT_GT(cut->size, 0u);
  EXPECT_EQ(text.compare(0, cut->size, cut->bytes()), 0);
}

TEST(Gzip, ConcatenatedMembersDecodeWhole) {
  auto a = gzip("hello ");
  auto b = gzip("world");
  ASSERT_TRUE(a && b);
  auto back = gunzip(*a + *b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->bytes(), "hello world");
}

TEST(Gzip, GarbageIsAnErrorWithAnOffset) {
  auto r = gunzip(std::string("\x1f\x8b\x08\x00garbage", 11));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kParse);
  EXPECT_GE(r.error().byte_offset(), 0);
}

TEST(Gzip, CutDamagedAndBombsSayWhich) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"name\": \"event " + std::to_string(i) + "\"},\n";
  auto gz = gzip(text);
  ASSERT_TRUE(gz);
  // Cut mid-stream: a cut, at the end of the input.
  auto cut = gunzip(std::string_view(*gz).substr(0, gz->size() / 2));
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->cut);
  EXPECT_EQ(cut->damage_offset, static_cast<std::int64_t>(gz->size() / 2));
  // Cut right after the header: nothing decompressed is an error, not an
  // "empty file" further on.
  auto early = gunzip(std::string_view(*gz).substr(0, 20));
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message().find("cut before any data decompressed"), std::string::npos)
      << early.error().message();
  EXPECT_EQ(early.error().byte_offset(), 20);
  // A flipped CRC byte: damaged, with zlib's reason, not a cut.
  std::string bad = *gz;
  bad[bad.size() - 6] ^= 1;
  auto crc = gunzip(bad);
  ASSERT_TRUE(crc);
  EXPECT_TRUE(crc->truncated);
  EXPECT_FALSE(crc->cut);
  EXPECT_EQ(crc->damage, "incorrect data check");
  // Past the output limit: an error naming it, never an allocation of it.
  auto bomb = gunzip(*gz, {.max_output = 64 * 1024});
  ASSERT_FALSE(bomb);
  EXPECT_NE(bomb.error().message().find("decompresses to more than"), std::string::npos) << bomb.error().message();
  EXPECT_NE(bomb.error().message().find("max_inflated_bytes"), std::string::npos) << bomb.error().message();
  auto bomb_salvaged =
      gunzip(std::string_view(*gz).substr(0, gz->size() - 1), {.max_output = 64 * 1024});  // the zlib path
  ASSERT_FALSE(bomb_salvaged);
  EXPECT_NE(bomb_salvaged.error().message().find("decompresses to more than"), std::string::npos);
  // The ratio: the smaller bound wins, and the message says which it was.
  auto by_ratio = gunzip(*gz, {.max_output = 0, .max_ratio = 1.5});
  ASSERT_FALSE(by_ratio);
  EXPECT_NE(by_ratio.error().message().find("1.5 times the"), std::string::npos) << by_ratio.error().message();
  EXPECT_TRUE(gunzip(*gz, {.max_output = 0, .max_ratio = 1000}));
}

TEST(AtomicFileWriter, LeavesNothingBehindWhenNotCommitted) {
  const std::string path = ::testing::TempDir() + "/tprof_atomic_test.txt";
  std::remove(path.c_str());
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->write("partial"));
  }
  EXPECT_FALSE(read_file(path));
  ASSERT_TRUE(write_file_atomic(path, "whole"));
  auto back = read_file(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "whole");
  std::remove(path.c_str());
}

// The output policy of the one writer (src/base/file.h), each case a thing
// the temp-file-then-rename once did to a user's machine.
class OutputPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tprof_output_policy_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Files in the directory: no temporary file may be left behind.
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir_), {}));
  }
  std::string dir_;
};

TEST_F(OutputPolicy, ANewFileFollowsTheUmaskAndAnExistingOneKeepsItsMode) {
  const mode_t old = umask(022);
  const std::string fresh = dir_ + "/fresh.json";
  ASSERT_TRUE(write_file_atomic(fresh, "a"));
  struct stat st {};
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  const std::string secret = dir_ + "/secret.json";
  ASSERT_TRUE(write_file_atomic(secret, "a"));
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  ASSERT_TRUE(write_file_atomic(secret, "b"));
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(*read_file(secret), "b");
  umask(old);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(OutputPolicy, ASymlinkHasItsTargetWrittenAndStaysALink) {
  const std::string target = dir_ + "/target.json", link = dir_ + "/link.json";
  ASSERT_EQ(symlink("target.json", link.c_str()), 0);  // relative, dangling
  ASSERT_TRUE(write_file_atomic(link, "first"));
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*read_file(target), "first");
  ASSERT_TRUE(write_file_atomic(link, "second"));
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*read_file(target), "second");
  EXPECT_EQ(entries(), 2u);
}

TEST_F(OutputPolicy, DevicesAndFifosAreWrittenThroughNeverReplaced) {
  ASSERT_TRUE(write_file_atomic("/dev/null", "into the void"));
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    Result<std::string> r = read_file(fifo);
    received = r ? *r : "read failed";
  });
  ASSERT_TRUE(write_file_atomic(fifo, "through the pipe"));
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // A device that fails the write fails the call.
  if (access("/dev/full", W_OK) == 0) {
    Status full = write_file_atomic("/dev/full", std::string(1 << 16, 'x'));
    ASSERT_FALSE(full);
    EXPECT_NE(full.error().to_string().find("/dev/full"), std::string::npos);
  }
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputPolicy, DirectoriesAndEmptyPathsAreRefusedWithThePath) {
  Status s = write_file_atomic(dir_, "x");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().to_string().find(dir_), std::string::npos);
  EXPECT_NE(s.error().to_string().find("Is a directory"), std::string::npos) << s.error().to_string();
  EXPECT_FALSE(write_file_atomic("", "x"));
  EXPECT_EQ(entries(), 0u);
}

TEST_F(OutputPolicy, SameFileSeesThroughLinks) {
  const std::string a = dir_ + "/a.json", link = dir_ + "/l.json";
  ASSERT_TRUE(write_file_atomic(a, "x"));
  ASSERT_EQ(symlink(a.c_str(), link.c_str()), 0);
  EXPECT_TRUE(same_file(a, link));
  EXPECT_TRUE(same_file(a, dir_ + "/./a.json"));
  EXPECT_FALSE(same_file(a, dir_ + "/missing.json"));
  EXPECT_FALSE(same_file(a, dir_));
}

// ---- inputs (MappedFile) ------------------------------------------------

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/tprof_input_" + std::to_string(getpid()) + "_" + name;
  EXPECT_TRUE(write_file_atomic(path, bytes));
  return path;
}

TEST(InputSources, AFileCutShortWhileMappedReadsZerosAndSaysSo) {
  // Rewriting a trace in place while tprof reads it once killed it with
  // SIGBUS (exit 135). Now the lost pages read as zeros and shrunk() says so.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::string path = write_temp("shrink", std::string(4 * page, 'x'));
  Result<MappedFile> m = MappedFile::open(path);
  ASSERT_TRUE(m);
  Result<MappedFile> other = MappedFile::open(write_temp("other", std::string(page, 'y')));
  ASSERT_TRUE(other);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(page)), 0);
  const std::string_view b = m->bytes();
  EXPECT_EQ(b[0], 'x');
  EXPECT_FALSE(m->shrunk());
  EXPECT_EQ(b[3 * page + 5], '\0');
  EXPECT_TRUE(m->shrunk());
  EXPECT_FALSE(other->shrunk());
  EXPECT_EQ(other->bytes()[0], 'y');
  std::remove(path.c_str());
}

TEST(InputSources, APipeIsReadToItsEnd) {
  // `<(cat t.json)` and /dev/stdin from a pipe were "empty file": their size is 0.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string text = "{\"traceEvents\": [" + std::string(200000, ' ') + "]}";
  std::thread writer([&] {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    close(fds[1]);
  });
  Result<MappedFile> m = MappedFile::open("/dev/fd/" + std::to_string(fds[0]));
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->bytes(), text);
}

TEST(InputSources, ADeviceOfNulBytesStopsAtTheFirstChunk) {
  // /dev/zero never ends: the first byte already cannot start a trace.
  Result<MappedFile> m = MappedFile::open("/dev/zero");
  ASSERT_TRUE(m);
  EXPECT_LE(m->bytes().size(), std::size_t{1} << 20);
  EXPECT_EQ(m->bytes()[0], '\0');
}

TEST(InputSources, AFifoWithoutAWriterIsAnErrorNotAHang) {
  const std::string path = ::testing::TempDir() + "/tprof_fifo_" + std::to_string(getpid());
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  Result<MappedFile> m = MappedFile::open(path, {.fifo_wait_ms = 100});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().to_string().find("no writer opened this FIFO"), std::string::npos) << m.error().to_string();
  EXPECT_NE(m.error().to_string().find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST(InputSources, AStreamLargerThanTheLimitIsAnError) {
  signal(SIGPIPE, SIG_IGN);  // the writer outlives the read end
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    const std::string chunk = "[" + std::string(65535, ' ');
    for (int i = 0; i < 64; ++i) {
      if (write(fds[1], chunk.data(), chunk.size()) <= 0) break;
    }
    close(fds[1]);
  });
  Result<MappedFile> m = MappedFile::open("/dev/fd/" + std::to_string(fds[0]), {.max_stream_bytes = 1 << 20});
  close(fds[0]);  // the writer gets EPIPE and stops
  writer.join();
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().to_string().find("larger than 1 MiB"), std::string::npos) << m.error().to_string();
}

TEST(SafeText, ControlsAndInvalidUtf8BecomeVisible) {
  // Text output quotes names from traces: no ESC sequence reaches a terminal.
  EXPECT_EQ(safe_text("plain\ttext\n"), "plain\ttext\n");
  EXPECT_FALSE(needs_safe_text("caf\xc3\xa9 \xe2\x86\x92\n"));
  EXPECT_EQ(safe_text("a\x1b[31mb"), "a\\x1b[31mb");
  EXPECT_EQ(safe_text(std::string_view("n\0ul\x7f\r", 6)), "n\\x00ul\\x7f\\x0d");
  EXPECT_EQ(safe_text("csi\xc2\x9b"), "csi\\u009b");  // C1 control (8-bit CSI)
  EXPECT_EQ(safe_text("bad\xff\xfe"), "bad\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_FALSE(needs_safe_text(safe_text("x\x1b\xff\xc2\x9b")));
}

// Issue 36, defect 6: safe_text ran over JSON too, and its "\x7f" is not
// JSON. safe_json_text writes JSON's escapes, valid inside a string (where
// such bytes can only be), and leaves what needs nothing alone.
TEST(SafeText, JsonTextStaysJson) {
  EXPECT_EQ(safe_json_text("{\"a\": \"x\"}\n"), "{\"a\": \"x\"}\n");
  EXPECT_EQ(safe_json_text("\"d\x7f\""), "\"d\\u007f\"");
  EXPECT_EQ(safe_json_text("\"e\x1b[2J\""), "\"e\\u001b[2J\"");
  EXPECT_EQ(safe_json_text(std::string_view("\"n\0\r\"", 5)), "\"n\\u0000\\u000d\"");
  EXPECT_EQ(safe_json_text("\"c\xc2\x9b\""), "\"c\\u009b\"");
  EXPECT_EQ(safe_json_text("\"b\xff\x80\""), "\"b\\ufffd\\ufffd\"");
  EXPECT_FALSE(needs_safe_text(safe_json_text("x\x1b\xff\xc2\x9b\x7f")));
  // What the one escaper writes never needs it: every control is escaped.
  std::string all;
  for (int c = 0; c < 0x100; ++c) all.push_back(static_cast<char>(c));
  all += "\xc2\x80\xc2\x9f\xc2\xa0";
  std::string literal;
  append_json_string(&literal, all);
  EXPECT_FALSE(needs_safe_text(literal)) << literal;
  EXPECT_EQ(safe_json_text(literal), literal);
}

// Issue 36, item 11: ids are 32-bit; the pool wrapped past 2^32 - 1 (which
// is also its empty-slot mark). Capped by the test hook, a full pool gives
// kEmptyStr for a new string and says so; what it holds stays as it was.
TEST(StringPool, IdsNeverWrapWhenThePoolIsFull) {
  static_assert(StringPool::kMaxStrings == 0xffffffffu, "ids 0 .. 2^32 - 2");
  StringPool::set_limit_for_testing(4);
  StringPool pool;
  StringPool::set_limit_for_testing(0);
  EXPECT_EQ(pool.intern("a"), 1u);
  EXPECT_EQ(pool.intern("b"), 2u);
  EXPECT_EQ(pool.intern("c"), 3u);
  EXPECT_FALSE(pool.full());
  EXPECT_EQ(pool.intern("d"), kEmptyStr);
  EXPECT_TRUE(pool.full());
  EXPECT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool.intern("b"), 2u);  // known strings keep their ids
  EXPECT_EQ(pool.str(3), "c");
  EXPECT_FALSE(pool.find("d"));
  StringPool fresh;  // the hook put back: no cap
  EXPECT_FALSE(fresh.full());
}

}  // namespace
}  // namespace tprof::internal
