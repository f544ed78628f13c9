// read_memory_snapshot (tprof/memory.h): the pickle machine opcode by
// opcode on hand-built pickles, its errors and their offsets, hostile
// input, the snapshot shapes of torch 1.13, 2.0 and 2.1+, and the backward
// replay of the totals. The files of tests/data/snapshots/ come from
// make_snapshots.py beside them (synthetic, see PROVENANCE.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/memory.h"

#ifndef TPROF_TEST_DATA
#define TPROF_TEST_DATA "tests/data"
#endif

namespace tprof {
namespace {

// A pickle, opcode by opcode.
class Pk {
 public:
  Pk& op(unsigned char c) {
    b_.push_back(static_cast<char>(c));
    return *this;
  }
  Pk& raw(std::string_view s) {
    b_.append(s);
    return *this;
  }
  Pk& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Pk& proto(int v) { return op(0x80).le(static_cast<std::uint64_t>(v), 1); }
  Pk& mark() { return op('('); }
  Pk& dict() { return op('}'); }
  Pk& list() { return op(']'); }
  Pk& setitems() { return op('u'); }
  Pk& appends() { return op('e'); }
  Pk& stop() { return op('.'); }
  Pk& none() { return op('N'); }
  // A string as Python's protocol 4 writes a short one.
  Pk& s(std::string_view v) { return op(0x8c).le(v.size(), 1).raw(v); }
  // A string as torch's C++ pickler writes every one.
  Pk& bu(std::string_view v) { return op('X').le(v.size(), 4).raw(v); }
  // An int as torch's C++ pickler writes it (pushInt).
  Pk& i(std::int64_t v) {
    if (v >= 0 && v <= 0xff) return op('K').le(static_cast<std::uint64_t>(v), 1);
    if (v >= 0 && v <= 0xffff) return op('M').le(static_cast<std::uint64_t>(v), 2);
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').le(static_cast<std::uint64_t>(v), 4);
    return op(0x8a).le(8, 1).le(static_cast<std::uint64_t>(v), 8);
  }
  std::size_t size() const { return b_.size(); }
  const std::string& bytes() const { return b_; }

 private:
  std::string b_;
};

using Fill = std::function<void(Pk&)>;

// {"action": A, "addr": ADDR, "size": SIZE[, "time_us": T]} in one SETITEMS.
Fill entry(std::string action, std::uint64_t addr, std::int64_t size, std::int64_t time_us = -1,
           Fill frames = nullptr) {
  return [=](Pk& p) {
    p.dict().mark().s("action").s(action).s("addr").i(static_cast<std::int64_t>(addr)).s("size").i(size);
    if (time_us >= 0) p.s("time_us").i(time_us);
    if (frames) {
      p.s("frames");
      frames(p);
    }
    p.setitems();
  };
}

// {"segments": [SEGMENTS], "device_traces": [[ENTRIES]]}
std::string snapshot(const std::vector<Fill>& entries, const Fill& segments = nullptr, int protocol = 4) {
  Pk p;
  p.proto(protocol).dict().mark().s("segments").list();
  if (segments) {
    p.mark();
    segments(p);
    p.appends();
  }
  p.s("device_traces").list().mark().list().mark();
  for (const Fill& e : entries) e(p);
  p.appends().appends().setitems().stop();
  return p.bytes();
}

// A segment of `total` bytes at `address` holding these blocks
// (size, requested_size, state).
struct Blk {
  std::int64_t size, requested;
  std::string state;
};
Fill segment(std::int64_t device, std::uint64_t address, std::int64_t total, std::vector<Blk> blocks) {
  return [=](Pk& p) {
    p.dict().mark().s("device").i(device).s("address").i(static_cast<std::int64_t>(address)).s("total_size").i(total);
    p.s("segment_type").s("large").s("blocks").list().mark();
    for (const Blk& b : blocks) {
      p.dict().mark().s("size").i(b.size).s("requested_size").i(b.requested).s("state").s(b.state).setitems();
    }
    p.appends().setitems();
  };
}

Fill frame(std::string file, std::int64_t line, std::string name) {
  return [=](Pk& p) { p.dict().mark().s("filename").s(file).s("line").i(line).s("name").s(name).setitems(); };
}

Fill frames(std::vector<Fill> fs) {
  return [=](Pk& p) {
    p.list().mark();
    for (const Fill& f : fs) f(p);
    p.appends();
  };
}

MemoryInput read_ok(const std::string& bytes) {
  Result<MemoryInput> r = read_memory_snapshot(bytes, "test.pickle");
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r ? std::move(*r) : MemoryInput{};
}

Error read_error(const std::string& bytes) {
  Result<MemoryInput> r = read_memory_snapshot(bytes, "test.pickle");
  EXPECT_FALSE(r.has_value());
  return r ? Error(ErrorCode::kInternal, "no error") : r.error();
}

const std::vector<MemorySample>& samples(const MemoryInput& in, std::size_t device = 0) {
  static const std::vector<MemorySample> kNone;
  return device < in.devices.size() ? in.devices[device].samples : kNone;
}

std::string data_file(const std::string& name) {
  std::ifstream f(std::string(TPROF_TEST_DATA) + "/snapshots/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const char* const kDataFiles[] = {"train_2x_p4.pickle",      "train_2x_p2.pickle",       "train_2x_cpp.pickle",
                                  "ring_2devices_p2.pickle", "torch20_notime_p4.pickle", "torch113_p4.pickle",
                                  "torch113_p2.pickle"};

// ---------------------------------------------------------------------------

TEST(MemorySnapshot, LooksLikePickle) {
  EXPECT_TRUE(looks_like_pickle(std::string("\x80\x02}", 3)));
  EXPECT_TRUE(looks_like_pickle(std::string("\x80\x05", 2)));
  EXPECT_FALSE(looks_like_pickle(std::string("\x80\x01", 2)));
  EXPECT_FALSE(looks_like_pickle(std::string("\x80\x06", 2)));
  EXPECT_FALSE(looks_like_pickle("{\"traceEvents\": []}"));
  EXPECT_FALSE(looks_like_pickle(std::string("\x80", 1)));
  EXPECT_FALSE(looks_like_pickle(""));
}

TEST(MemorySnapshotPickle, BinaryIntegers) {
  // size through BININT1, BININT2, BININT, LONG1 and LONG4; addr through a
  // 6-byte LONG1 (as Python writes a device address) and a 9-byte one
  // (2^64 - 16: positive, needing a zero sign byte); time_us through a
  // negative BININT.
  const auto e = [](std::uint64_t addr_unused, Fill size, Fill addr, Fill time) -> Fill {
    (void)addr_unused;
    return [=](Pk& p) {
      p.dict().mark().s("action").s("alloc").s("addr");
      addr(p);
      p.s("size");
      size(p);
      p.s("time_us");
      time(p);
      p.setitems();
    };
  };
  const Fill addr6 = [](Pk& p) { p.op(0x8a).le(6, 1).le(0x7f1234567800ull, 6); };
  const Fill addr9 = [](Pk& p) { p.op(0x8a).le(9, 1).le(0xfffffffffffffff0ull, 8).le(0, 1); };
  const Fill t = [](Pk& p) { p.op('J').le(static_cast<std::uint32_t>(-5), 4); };
  const MemoryInput in = read_ok(snapshot({
      e(
          0, [](Pk& p) { p.op('K').le(200, 1); }, addr6, t),
      e(
          0, [](Pk& p) { p.op('M').le(60000, 2); }, addr6, t),
      e(
          0, [](Pk& p) { p.op('J').le(70000, 4); }, addr6, t),
      e(
          0, [](Pk& p) { p.op(0x8a).le(8, 1).le(5'000'000'000ull, 8); }, addr9, t),
      e(
          0, [](Pk& p) { p.op(0x8b).le(3, 4).le(0x010203, 3); }, addr6, t),
      e(
          0, [](Pk& p) { p.op(0x8a).le(0, 1); }, addr6, t),  // LONG1 of no bytes is 0
  }));
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].bytes, 200);
  EXPECT_EQ(s[1].bytes, 60000);
  EXPECT_EQ(s[2].bytes, 70000);
  EXPECT_EQ(s[3].bytes, 5'000'000'000);
  EXPECT_EQ(s[4].bytes, 0x010203);
  EXPECT_EQ(s[5].bytes, 0);
  EXPECT_EQ(s[0].addr, 0x7f1234567800ull);
  EXPECT_EQ(s[3].addr, 0xfffffffffffffff0ull);
  EXPECT_EQ(s[0].ts_ns, -5000);
  EXPECT_TRUE(in.times_recorded);
}

TEST(MemorySnapshotPickle, TextOpcodes) {
  // Protocol 0's text forms: INT, LONG, FLOAT, UNICODE (raw-unicode-escape),
  // PUT and GET with decimal ids.
  Pk p;
  p.dict().mark().raw("Vsegments\n").list().raw("Vdevice_traces\n").list().mark().list().mark();
  p.dict().mark().raw("Vaction\n").raw("V\\u0061lloc\n").raw("p7\n");
  p.raw("Vaddr\n").raw("I4096\n").raw("Vsize\n").raw("L123L\n").raw("Vtime_us\n").raw("F2.5\n").setitems();
  p.dict().mark().raw("Vaction\n").raw("g7\n").raw("Vaddr\n").raw("I8192\n");
  p.raw("Vsize\n").raw("I-0\n").raw("Vtime_us\n").raw("I01\n").setitems();  // INT 01 is True: not a time
  p.appends().appends().setitems().stop();
  Result<MemoryInput> r = read_memory_snapshot(p.bytes(), "t");
  ASSERT_FALSE(r.has_value());  // time_us = True
  EXPECT_NE(r.error().message().find("time_us"), std::string::npos) << r.error().to_string();

  Pk q;
  q.dict().mark().raw("Vsegments\n").list().raw("Vdevice_traces\n").list().mark().list().mark();
  q.dict().mark().raw("Vaction\n").raw("V\\u0061lloc\n").raw("p7\n");
  q.raw("Vaddr\n").raw("I4096\n").raw("Vsize\n").raw("L123L\n").raw("Vtime_us\n").raw("F2.5\n").setitems();
  q.dict().mark().raw("Vaction\n").raw("g7\n").raw("Vaddr\n").raw("I8192\n");
  q.raw("Vsize\n").raw("I+7\n").raw("Vtime_us\n").raw("I3\n").setitems();
  q.appends().appends().setitems().stop();
  const MemoryInput in = read_ok(q.bytes());
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].bytes, 123);
  EXPECT_EQ(s[0].addr, 4096u);
  EXPECT_EQ(s[0].ts_ns, 2500);
  EXPECT_EQ(s[1].bytes, 7);
  EXPECT_EQ(s[1].ts_ns, 3000);
}

TEST(MemorySnapshotPickle, UnicodeEscapes) {
  // An escaped backslash does not start an escape; Latin-1 bytes become
  // UTF-8; \U takes eight digits.
  Pk p;
  p.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
  p.dict().mark().s("action").s("alloc").s("addr").i(1).s("size").i(1).s("frames").list().mark();
  p.dict().mark().s("filename").raw("Vdir\\\\u0041/\xe9t\\U0001F600.py\n").s("line").i(3).s("name").s("f").setitems();
  p.appends().setitems().appends().appends().setitems().stop();
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(in.sites.size(), 1u);
  EXPECT_EQ(in.sites[0].op, "\xc3\xa9t\xf0\x9f\x98\x80.py:3:f");  // basename only
}

TEST(MemorySnapshotPickle, StringOpcodes) {
  const auto with_action = [](Fill action) {
    Pk p;
    p.proto(4).dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
    p.dict().mark().s("action");
    action(p);
    p.s("addr").i(16).s("size").i(32).setitems().appends().appends().setitems().stop();
    return p.bytes();
  };
  for (const Fill& f : std::vector<Fill>{
           [](Pk& p) { p.s("alloc"); }, [](Pk& p) { p.bu("alloc"); },
           [](Pk& p) { p.op(0x8d).le(5, 8).raw("alloc"); },  // BINUNICODE8
       }) {
    const MemoryInput in = read_ok(with_action(f));
    ASSERT_EQ(samples(in).size(), 1u);
    EXPECT_EQ(samples(in)[0].bytes, 32);
  }
  // Bytes are not text: an "action" of b"alloc" is the wrong shape.
  for (const Fill& f : std::vector<Fill>{
           [](Pk& p) { p.op('C').le(5, 1).raw("alloc"); },   // SHORT_BINBYTES
           [](Pk& p) { p.op('B').le(5, 4).raw("alloc"); },   // BINBYTES
           [](Pk& p) { p.op(0x8e).le(5, 8).raw("alloc"); },  // BINBYTES8
           [](Pk& p) { p.op('U').le(5, 1).raw("alloc"); },   // SHORT_BINSTRING
           [](Pk& p) { p.op(0x96).le(5, 8).raw("alloc"); },  // BYTEARRAY8
       }) {
    const Error e = read_error(with_action(f));
    EXPECT_EQ(e.code(), ErrorCode::kFormat) << e.to_string();
    EXPECT_NE(e.message().find("\"action\" is not a string"), std::string::npos) << e.to_string();
  }
}

TEST(MemorySnapshotPickle, FloatsAndConstants) {
  // BINFLOAT is big-endian; NONE, NEWTRUE, NEWFALSE in fields the reader skips.
  Pk p;
  p.proto(2).dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
  p.dict().mark().s("action").s("alloc").s("addr").none().s("size").i(8).s("time_us").op('G');
  const double t = 1.25;
  std::uint64_t bits;
  std::memcpy(&bits, &t, 8);
  for (int k = 7; k >= 0; --k) p.op(static_cast<unsigned char>(bits >> (8 * k)));
  p.s("stream").op(0x88).s("extra").op(0x89).setitems();
  p.appends().appends().setitems().stop();
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(samples(in).size(), 1u);
  EXPECT_EQ(samples(in)[0].ts_ns, 1250);
  EXPECT_EQ(samples(in)[0].addr, 0u);  // addr None: not recorded
}

TEST(MemorySnapshotPickle, MemoOpcodes) {
  // The frames list is stored once and fetched by each opcode family:
  // BINPUT/BINGET, LONG_BINPUT/LONG_BINGET (an id far past the others),
  // MEMOIZE (protocol 4) with BINGET. Every entry gets the same site.
  const Fill stack = frames({frame("/home/u/train.py", 10, "step")});
  for (int variant = 0; variant < 3; ++variant) {
    Pk p;
    p.proto(4).dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
    p.dict().mark().s("action").s("alloc").s("addr").i(1).s("size").i(10).s("frames");
    stack(p);
    if (variant == 0) p.op('q').le(3, 1);
    if (variant == 1) p.op('r').le(0xfffffff0u, 4);
    if (variant == 2) p.op(0x94);
    p.setitems();
    p.dict().mark().s("action").s("free_completed").s("addr").i(1).s("size").i(10).s("frames");
    if (variant == 0) p.op('h').le(3, 1);
    if (variant == 1) p.op('j').le(0xfffffff0u, 4);
    if (variant == 2) p.op('h').le(0, 1);  // the first MEMOIZE of the pickle is id 0
    p.setitems().appends().appends().setitems().stop();
    const MemoryInput in = read_ok(p.bytes());
    ASSERT_EQ(samples(in).size(), 2u) << variant;
    EXPECT_EQ(in.sites.size(), 1u) << variant;
    EXPECT_EQ(samples(in)[0].site, 0u) << variant;
    EXPECT_EQ(samples(in)[1].site, 0u) << variant;
    EXPECT_EQ(in.sites[0].op, "train.py:10:step");
  }
}

TEST(MemorySnapshotPickle, ContainerOpcodes) {
  // Frames in tuples (TUPLE1-3, TUPLE, EMPTY_TUPLE), a trace built with
  // LIST and APPEND, entries with DICT and single SETITEMs, POP, POP_MARK
  // and DUP on the way.
  Pk p;
  p.proto(2).dict().mark().s("segments").list().s("device_traces").mark();
  p.mark();  // LIST of the one device's entries
  // 1: frames as TUPLE1, the entry made by DICT.
  p.mark().s("action").s("alloc").s("addr").i(1).s("size").i(1).s("frames");
  frame("/p/a.py", 1, "a")(p);
  p.op(0x85).op('d');
  // 2: TUPLE2, single SETITEMs into an empty dict.
  p.dict().s("action").s("alloc").op('s').s("addr").i(2).op('s').s("size").i(2).op('s');
  p.s("frames");
  frame("/p/b.py", 2, "b")(p);
  frame("/p/a.py", 1, "a")(p);
  p.op(0x86).op('s');
  // 3: TUPLE3 and TUPLE; POP, POP_MARK and DUP leave the stack as it was.
  p.dict().mark().s("action").s("alloc").s("addr").i(3).s("size").i(3).s("frames");
  p.mark();
  frame("/p/c.py", 3, "c")(p);
  p.none().op('0');            // POP
  p.mark().i(1).i(2).op('1');  // POP_MARK
  p.op('t');
  p.s("junk").s("x").op('2').op('0').setitems();  // DUP, POP
  p.op('l');                                      // LIST of the three
  // 4: EMPTY_TUPLE as frames: no site; APPENDed to the list.
  p.dict().mark().s("action").s("alloc").s("addr").i(4).s("size").i(4).s("frames").op(')').setitems();
  p.op('a');
  p.list();   // a second device, with no entries
  p.op('t');  // device_traces as a TUPLE
  p.setitems().stop();
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(in.devices.size(), 1u);
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(s[k].bytes, k + 1);
  ASSERT_EQ(in.sites.size(), 3u);
  EXPECT_EQ(in.sites[s[0].site].stack, "a.py:1:a");
  EXPECT_EQ(in.sites[s[1].site].stack, "b.py:2:b <- a.py:1:a");
  EXPECT_EQ(in.sites[s[2].site].stack, "c.py:3:c");
  EXPECT_EQ(s[3].site, kNoIndex);
}

TEST(MemorySnapshotPickle, TypeTagsOfTorchsOlderJitPickler) {
  // Every dict and list wrapped in torch.jit._pickle.restore_type_tag(v, "T"),
  // the global memoized and fetched again, strings memoized by value.
  Pk p;
  p.proto(2);
  const auto tagged = [&](const std::function<void()>& value, std::string_view type, bool first) {
    if (first) {
      p.op('c').raw("torch.jit._pickle\nrestore_type_tag\n").op('q').le(0, 1);
    } else {
      p.op('h').le(0, 1);
    }
    value();
    p.bu(type).op(0x86).op('R');
  };
  tagged(
      [&] {
        p.dict().mark().bu("segments");
        tagged([&] { p.list().mark().appends(); }, "List[Any]", false);
        p.bu("device_traces");
        tagged(
            [&] {
              p.list().mark();
              tagged(
                  [&] {
                    p.list().mark();
                    tagged(
                        [&] { p.dict().mark().bu("action").bu("alloc").bu("addr").i(64).bu("size").i(640).setitems(); },
                        "Dict[str, Any]", false);
                    p.appends();
                  },
                  "List[Any]", false);
              p.appends();
            },
            "List[List[Any]]", false);
        p.setitems();
      },
      "Dict[str, Any]", true);
  p.stop();
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(samples(in).size(), 1u);
  EXPECT_EQ(samples(in)[0].bytes, 640);
}

TEST(MemorySnapshotPickle, ObjectsOfUnknownClassesAreOpaque) {
  // GLOBAL + NEWOBJ + BUILD, STACK_GLOBAL + REDUCE, INST, OBJ, EXT1,
  // BINPERSID: values the snapshot does not need; collections.OrderedDict()
  // as the root, filled by SETITEMS.
  Pk p;
  p.proto(4).s("collections").s("OrderedDict").op(0x93).op(')').op('R');
  p.mark().s("segments").list().s("device_traces").list().mark().list().mark();
  p.dict().mark().s("action").s("alloc").s("addr").i(1).s("size").i(5);
  p.s("a").op('c').raw("mod\nCls\n").op(')').op(0x81).dict().op('b');
  p.s("b").s("mod").s("f").op(0x93).op(')').op('R');
  p.s("c").mark().op('i').raw("mod\nCls\n");
  p.s("d").mark().op('c').raw("mod\nCls\n").op('o');
  p.s("e").op(0x82).le(1, 1);
  p.s("f").i(3).op('Q');
  p.setitems().appends().appends().setitems().stop();
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(samples(in).size(), 1u);
  EXPECT_EQ(samples(in)[0].bytes, 5);
}

TEST(MemorySnapshotPickle, ProtocolFourFrames) {
  Pk body;
  body.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
  entry("alloc", 1, 9)(body);
  body.appends().appends().setitems().stop();
  Pk p;
  p.proto(4).op(0x95).le(body.size(), 8).raw(body.bytes());
  const MemoryInput in = read_ok(p.bytes());
  ASSERT_EQ(samples(in).size(), 1u);
  // A FRAME longer than what is left is an error at its own offset.
  Pk q;
  q.proto(4).op(0x95).le(body.size() + 1, 8).raw(body.bytes());
  const Error e = read_error(q.bytes());
  EXPECT_EQ(e.byte_offset(), 2);
  EXPECT_NE(e.message().find("FRAME"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Errors: a code, the file's name, the offset of the opcode, what was expected.

TEST(MemorySnapshotErrors, UnknownOpcode) {
  Pk p;
  p.proto(2).dict();
  const std::size_t at = p.size();
  p.op(0xff).stop();
  const Error e = read_error(p.bytes());
  EXPECT_EQ(e.code(), ErrorCode::kParse);
  EXPECT_EQ(e.byte_offset(), static_cast<std::int64_t>(at));
  EXPECT_EQ(e.path(), "test.pickle");
  EXPECT_NE(e.message().find("unknown pickle opcode 0xff"), std::string::npos);
}

TEST(MemorySnapshotErrors, StackUnderflowAndMarks) {
  struct Case {
    std::string bytes;
    std::size_t at;
    const char* what;
  };
  std::vector<Case> cases;
  const auto add = [&](std::string_view prefix, unsigned char op, const char* what) {
    Pk p;
    p.proto(2).raw(prefix);
    const std::size_t at = p.size();
    p.op(op).stop();
    cases.push_back({p.bytes(), at, what});
  };
  add("", 'a', "underflow");          // APPEND on nothing
  add("]", 'a', "underflow");         // APPEND with the list only
  add("(", 'u', "underflow");         // SETITEMS with nothing under the MARK
  add("](", 'e', "");                 // fine: empty APPENDS ...
  add("", 'u', "no MARK");            // SETITEMS without a MARK
  add("", 't', "no MARK");            // TUPLE without a MARK
  add("", 0x86, "underflow");         // TUPLE2 on nothing
  add("K\x01(", 0x85, "underflow");   // TUPLE1 across a MARK
  add("}(K\x01", 'u', "odd number");  // SETITEMS of a key without a value
  add("K\x01", 's', "underflow");     // SETITEM on one value
  add("K\x01K\x02K\x03", 's', "expected a dict");
  add("K\x01K\x02", 'a', "expected a list");
  add("", 'h', "");  // BINGET: truncated id
  add("", 'R', "underflow");
  add("", '1', "no MARK");
  add("", 0x97, "out-of-band");
  for (const Case& c : cases) {
    if (c.what[0] == '\0') continue;
    const Error e = read_error(c.bytes);
    EXPECT_EQ(e.byte_offset(), static_cast<std::int64_t>(c.at)) << e.to_string();
    EXPECT_NE(e.message().find(c.what), std::string::npos) << e.to_string();
  }
}

TEST(MemorySnapshotErrors, MemoAndProtocol) {
  Pk p;
  p.proto(2);
  const std::size_t at = p.size();
  p.op('h').le(9, 1).stop();
  Error e = read_error(p.bytes());
  EXPECT_EQ(e.byte_offset(), static_cast<std::int64_t>(at));
  EXPECT_NE(e.message().find("memo id 9 was never stored"), std::string::npos);

  e = read_error(std::string("\x80\x06N.", 4));
  EXPECT_EQ(e.byte_offset(), 0);
  EXPECT_NE(e.message().find("protocol 6"), std::string::npos);

  e = read_error(std::string("\x80\x02N", 3));
  EXPECT_EQ(e.byte_offset(), 3);
  EXPECT_NE(e.message().find("before its STOP"), std::string::npos);
}

TEST(MemorySnapshotErrors, WrongShapes) {
  // The root, "segments", blocks and trace entries of the wrong kind are
  // kFormat errors at the offset of the container that is wrong.
  Error e = read_error(std::string("\x80\x02K\x05.", 5));
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_EQ(e.byte_offset(), 4);  // an int has no container: the STOP

  Pk no_segments;
  no_segments.proto(2).dict().mark().s("device_traces").list().setitems().stop();
  e = read_error(no_segments.bytes());
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_EQ(e.byte_offset(), 2);
  EXPECT_NE(e.message().find("\"segments\""), std::string::npos);

  e = read_error(snapshot({}, [](Pk& p) { p.i(3); }));
  EXPECT_NE(e.message().find("segments[0]: expected a dict"), std::string::npos) << e.to_string();

  e = read_error(snapshot({}, [](Pk& p) {
    p.dict()
        .mark()
        .s("total_size")
        .i(512)
        .s("blocks")
        .list()
        .mark()
        .dict()
        .mark()
        .s("size")
        .i(512)
        .setitems()
        .appends()
        .setitems();
  }));
  EXPECT_NE(e.message().find("blocks[0]: expected \"state\""), std::string::npos) << e.to_string();

  e = read_error(snapshot({[](Pk& p) { p.dict().mark().s("addr").i(1).setitems(); }}));
  EXPECT_NE(e.message().find("device_traces[0][0]: expected a trace entry"), std::string::npos) << e.to_string();

  e = read_error(snapshot(
      {entry("alloc", 1, 1), [](Pk& p) { p.dict().mark().s("action").s("alloc").s("addr").i(1).setitems(); }}));
  EXPECT_NE(e.message().find("device_traces[0][1]: expected a \"size\""), std::string::npos) << e.to_string();

  Pk q;
  q.proto(2).dict().mark().s("segments").list().s("device_traces").list().mark().list().mark();
  const std::size_t at = q.size();
  q.dict().mark().s("action").s("alloc").s("addr").i(1).s("size").s("big").setitems();
  q.appends().appends().setitems().stop();
  e = read_error(q.bytes());
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_GT(e.byte_offset(), static_cast<std::int64_t>(at));  // the SETITEMS that gave it
  EXPECT_NE(e.message().find("\"size\" is not a byte count"), std::string::npos) << e.to_string();

  // One trace listed as two devices' (a memo GET of the same list).
  Pk r;
  r.proto(2).dict().mark().s("segments").list().s("device_traces").list().mark().list().op('q').le(1, 1).mark();
  entry("alloc", 1, 1)(r);
  r.appends().op('h').le(1, 1).appends().setitems().stop();
  e = read_error(r.bytes());
  EXPECT_NE(e.message().find("listed twice"), std::string::npos) << e.to_string();
}

// ---------------------------------------------------------------------------
// Hostile input: never a crash, always an Error with an offset inside the file.

void expect_error_or_value(const std::string& bytes, const std::string& what) {
  Result<MemoryInput> r = read_memory_snapshot(bytes, "h");
  if (!r) {
    EXPECT_GE(r.error().byte_offset(), 0) << what << ": " << r.error().to_string();
    EXPECT_LE(r.error().byte_offset(), static_cast<std::int64_t>(bytes.size())) << what;
  }
}

TEST(MemorySnapshotHostile, TruncatedAtEveryByte) {
  std::vector<std::string> inputs;
  for (const char* f : kDataFiles) inputs.push_back(data_file(f));
  inputs.push_back(snapshot({entry("alloc", 1, 1, 5, frames({frame("/a.py", 1, "f")}))},
                            segment(0, 4096, 1024, {{512, 1, "active_allocated"}, {512, 0, "inactive"}})));
  for (const std::string& full : inputs) {
    ASSERT_TRUE(read_memory_snapshot(full, "h").has_value());
    for (std::size_t n = 0; n < full.size(); ++n) {
      Result<MemoryInput> r = read_memory_snapshot(std::string_view(full).substr(0, n), "h");
      ASSERT_FALSE(r.has_value()) << "cut at " << n;  // STOP is the last byte
      EXPECT_GE(r.error().byte_offset(), 0) << n;
      EXPECT_LE(r.error().byte_offset(), static_cast<std::int64_t>(n)) << n << ": " << r.error().to_string();
    }
  }
}

TEST(MemorySnapshotHostile, RandomMutations) {
  std::mt19937_64 rng(41);
  std::vector<std::string> seeds;
  for (const char* f : {"train_2x_p4.pickle", "train_2x_cpp.pickle", "torch113_p2.pickle"})
    seeds.push_back(data_file(f));
  for (int round = 0; round < 3000; ++round) {
    std::string b = seeds[round % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      const std::size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b.erase(at, 1 + rng() % 16); break;
        case 2: b.insert(at, 1, static_cast<char>(rng())); break;
        default: b.insert(at, b.substr(rng() % b.size(), 1 + rng() % 64)); break;
      }
      if (b.empty()) b = "\x80";
    }
    expect_error_or_value(b, "round " + std::to_string(round));
  }
}

TEST(MemorySnapshotHostile, DeepNestingHugeLengthsAndIds) {
  // A million nested lists: no recursion in the reader.
  std::string deep("\x80\x02", 2);
  for (int k = 0; k < 1'000'000; ++k) deep += "](";
  expect_error_or_value(deep + ".", "nested");
  // Lengths far past the end are refused before anything is allocated.
  for (const std::string& b :
       {std::string("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", 12), std::string("\x80\x02X\xff\xff\xff\xff.", 8),
        std::string("\x80\x02\x8b\xff\xff\xff\x7f.", 8), std::string("\x80\x02\x8b\xff\xff\xff\xff.", 8),
        std::string("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff", 11)}) {
    const Error e = read_error(b);
    EXPECT_EQ(e.byte_offset(), 2) << e.to_string();
  }
  // Memo ids far apart go to a map, not a 4-billion-entry vector.
  Pk p;
  p.proto(2).none();
  for (std::uint32_t id : {0xffffffffu, 0x80000000u, 0x7fffffffu, 5u}) p.op('r').le(id, 4);
  p.op('j').le(0xffffffffu, 4).op('0').stop();
  const Error e = read_error(p.bytes());
  EXPECT_EQ(e.code(), ErrorCode::kFormat);  // the root None is the wrong shape, not a crash
  // The same big list referenced by every segment: refused, not walked a million times.
  Pk q;
  q.proto(2).dict().mark().s("segments").list().mark();
  segment(0, 0, 512, {{512, 512, "active_allocated"}})(q);
  q.op('q').le(7, 1);
  for (int k = 0; k < 1000; ++k) q.op('h').le(7, 1);
  q.appends().setitems().stop();
  EXPECT_NE(read_error(q.bytes()).message().find("listed twice"), std::string::npos);
}

// ---------------------------------------------------------------------------
// The replay and the snapshot's shapes.

TEST(MemorySnapshotReplay, AbsoluteTotalsFromTheSegments) {
  // At dump time: one 2 MiB segment holding a block of 512 bytes asked for
  // as 100. The trace made the segment, two allocations, and freed one.
  const MemoryInput in = read_ok(snapshot(
      {entry("segment_alloc", 0x1000, 2 << 20, 10), entry("alloc", 0x1000, 300, 11), entry("alloc", 0x1200, 100, 12),
       entry("free_requested", 0x1000, 300, 13), entry("free_completed", 0x1000, 300, 14)},
      segment(0, 0x1000, 2 << 20,
              {{512, 0, "inactive"}, {512, 100, "active_allocated"}, {(2 << 20) - 1024, 0, "inactive"}})));
  EXPECT_EQ(in.source, "snapshot");
  ASSERT_EQ(in.devices.size(), 1u);
  EXPECT_EQ(in.devices[0].device_type, 1);
  EXPECT_EQ(in.devices[0].device_id, 0);
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 4u);  // free_requested is no sample
  const std::int64_t want_alloc[] = {0, 300, 400, 100};
  const std::uint32_t want_source[] = {0, 1, 2, 4};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(s[k].allocated, want_alloc[k]) << k;
    EXPECT_EQ(s[k].reserved, 2 << 20) << k;
    EXPECT_EQ(s[k].source, want_source[k]) << k;
    EXPECT_EQ(s[k].ts_ns, (10 + want_source[k]) * 1000) << k;
  }
  EXPECT_EQ(s[0].bytes, 0);
  EXPECT_EQ(s[1].bytes, 300);
  EXPECT_EQ(s[3].bytes, -300);
  EXPECT_EQ(s[3].addr, 0x1000u);
  ASSERT_EQ(in.segments.size(), 1u);
  EXPECT_EQ(in.segments[0].total_bytes, 2 << 20);
  EXPECT_EQ(in.segments[0].allocated_bytes, 512);  // the block, as torch's allocated_size counts it
  EXPECT_EQ(in.segments[0].largest_free_bytes, (2 << 20) - 1024);
  EXPECT_EQ(in.segments[0].blocks, 3);
  EXPECT_EQ(in.segments[0].segment_type, "large");
  EXPECT_TRUE(in.times_recorded);
}

TEST(MemorySnapshotReplay, ATraceThatLostItsStart) {
  // The ring dropped the alloc of 50 bytes: its free is the first entry.
  // Totals stay absolute: 50 + 100 were live before the trace.
  const MemoryInput in = read_ok(snapshot(
      {entry("free_completed", 0x10, 50, 1), entry("alloc", 0x20, 70, 2)},
      segment(0, 0, 1 << 20,
              {{512, 100, "active_allocated"}, {512, 70, "active_allocated"}, {(1 << 20) - 1024, 0, "inactive"}})));
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].allocated - s[0].bytes, 150);
  EXPECT_EQ(s[0].allocated, 100);
  EXPECT_EQ(s[1].allocated, 170);
}

TEST(MemorySnapshotReplay, SegmentMapAndUnmapMoveReserved) {
  const MemoryInput in = read_ok(snapshot(
      {entry("segment_map", 0, 4 << 20, 1), entry("alloc", 0, 1000, 2), entry("segment_unmap", 2 << 20, 2 << 20, 3),
       entry("snapshot", 0, 0, 4), entry("oom", 0, 0, 5), entry("annotate", 0, 0, 6)},
      segment(0, 0, 2 << 20, {{1024, 1000, "active_allocated"}, {(2 << 20) - 1024, 0, "inactive"}})));
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 3u);  // snapshot, oom, annotate: no samples
  EXPECT_EQ(s[0].reserved, 4 << 20);
  EXPECT_EQ(s[1].reserved, 4 << 20);
  EXPECT_EQ(s[2].reserved, 2 << 20);
  EXPECT_EQ(s[0].reserved - 0, 4 << 20);
  EXPECT_EQ(s[2].allocated, 1000);
}

TEST(MemorySnapshotReplay, AFreeWaitingOnAnotherStreamIsStillHeld) {
  // free_requested without free_completed: the block is
  // active_pending_free; the replay's totals hold it, the segment's
  // allocated bytes (torch's allocated_size) do not.
  const MemoryInput in = read_ok(
      snapshot({entry("alloc", 0, 600, 1), entry("free_requested", 0, 600, 2)},
               segment(0, 0, 1 << 20, {{1024, 600, "active_pending_free"}, {(1 << 20) - 1024, 0, "inactive"}})));
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].allocated, 600);
  EXPECT_EQ(s[0].allocated - s[0].bytes, 0);
  EXPECT_EQ(in.segments[0].allocated_bytes, 0);
}

TEST(MemorySnapshotReplay, TimesAreEntryIndicesWithoutTimeUs) {
  const MemoryInput in =
      read_ok(snapshot({entry("alloc", 0, 1), entry("free_requested", 0, 1), entry("free_completed", 0, 1)}));
  EXPECT_FALSE(in.times_recorded);
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].ts_ns, 0);
  EXPECT_EQ(s[1].ts_ns, 2);
  // One entry with a time among ones without: no times either.
  EXPECT_FALSE(read_ok(snapshot({entry("alloc", 0, 1, 5), entry("free_completed", 0, 1)})).times_recorded);
}

TEST(MemorySnapshotReplay, ATimeGoingBackIsHeld) {
  const MemoryInput in =
      read_ok(snapshot({entry("alloc", 0, 1, 10), entry("alloc", 8, 1, 9), entry("alloc", 16, 1, 12)}));
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].ts_ns, 10'000);
  EXPECT_EQ(s[2].ts_ns, 12'000);
}

TEST(MemorySnapshotReplay, ADeviceWithoutATraceHasItsDumpState) {
  // Device 1 has segments only; device 0 a trace only.
  const MemoryInput in =
      read_ok(snapshot({entry("alloc", 0, 64, 100)},
                       segment(1, 0, 1 << 20, {{512, 200, "active_allocated"}, {(1 << 20) - 512, 0, "inactive"}})));
  ASSERT_EQ(in.devices.size(), 2u);
  EXPECT_EQ(in.devices[0].device_id, 0);
  EXPECT_EQ(in.devices[1].device_id, 1);
  ASSERT_EQ(samples(in, 1).size(), 1u);
  const MemorySample& x = samples(in, 1)[0];
  EXPECT_EQ(x.bytes, 0);
  EXPECT_EQ(x.allocated, 200);
  EXPECT_EQ(x.reserved, 1 << 20);
  EXPECT_EQ(x.source, kNoIndex);
  EXPECT_EQ(x.ts_ns, 100'000);                // the last time of the trace: the dump came after it
  EXPECT_EQ(samples(in, 0)[0].allocated, 0);  // no segments left on device 0: everything was given back
}

TEST(MemorySnapshotSites, TheInnermostUserFrameAndItsCallers) {
  // Innermost first: the allocator's C++, the interpreter (hidden), torch's
  // Python, then the user's frames. op is the first user frame; the stack
  // holds up to 8 user frames from it.
  std::vector<Fill> fs = {frame("/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1000, "malloc"),
                          frame("/usr/src/Python/ceval.c", 1, "_PyEval_EvalFrameDefault"),
                          frame("/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 114, "forward"),
                          frame("/home/u/proj/model.py", 31, "forward"),
                          frame("/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1501, "_call_impl"),
                          frame("/usr/lib/python3.11/contextlib.py", 81, "inner")};
  for (int k = 0; k < 10; ++k) fs.push_back(frame("/home/u/proj/train.py", 100 + k, "level" + std::to_string(k)));
  const MemoryInput in = read_ok(snapshot({entry("alloc", 0, 1, 1, frames(fs))}));
  ASSERT_EQ(in.sites.size(), 1u);
  EXPECT_EQ(in.sites[0].op, "model.py:31:forward");
  EXPECT_EQ(in.sites[0].stack,
            "model.py:31:forward <- train.py:100:level0 <- train.py:101:level1 <- train.py:102:level2 <- "
            "train.py:103:level3 <- train.py:104:level4 <- train.py:105:level5 <- train.py:106:level6");
  EXPECT_TRUE(in.sites[0].caller.empty());
}

TEST(MemorySnapshotSites, AStackWithoutUserFramesShowsWhatTorchShows) {
  // A backward pass recorded with C++ frames only.
  const MemoryInput in = read_ok(
      snapshot({entry("alloc", 0, 1, 1,
                      frames({frame("??", 0, "unwind::unwind"),
                              frame("/opt/pytorch/torch/csrc/autograd/engine.cpp", 1200, "Engine::thread_main"),
                              frame("/usr/lib/python3/dist-packages/torch/autograd/__init__.py", 200, "backward")}))}));
  ASSERT_EQ(in.sites.size(), 1u);
  EXPECT_EQ(in.sites[0].op, "engine.cpp:1200:Engine::thread_main");
  EXPECT_EQ(in.sites[0].stack, "engine.cpp:1200:Engine::thread_main <- __init__.py:200:backward");
}

TEST(MemorySnapshotSites, SameStacksShareASite) {
  const Fill a = frames({frame("/p/x.py", 1, "f"), frame("/p/y.py", 2, "g")});
  const MemoryInput in =
      read_ok(snapshot({entry("alloc", 0, 1, 1, a), entry("alloc", 8, 1, 2, a), entry("alloc", 16, 1, 3, frames({}))}));
  ASSERT_EQ(in.sites.size(), 1u);
  EXPECT_EQ(samples(in)[0].site, 0u);
  EXPECT_EQ(samples(in)[1].site, 0u);
  EXPECT_EQ(samples(in)[2].site, kNoIndex);
}

TEST(MemorySnapshotSites, AStackSharedByABlockAndTheTrace) {
  // torch ≥ 2.1 symbolizes each traceback once: the block that holds an
  // allocation and the trace entries of it share one list, written inline
  // in the block (segments come first) and fetched from the memo after.
  // A skipped entry's other fields are not read: garbage there is fine.
  Pk p;
  p.proto(4).dict().mark().s("segments").list().mark();
  p.dict().mark().s("device").i(0).s("address").i(0).s("total_size").i(1024).s("blocks").list().mark();
  p.dict().mark().s("size").i(1024).s("requested_size").i(1000).s("state").s("active_allocated").s("frames");
  p.list().op('q').le(200, 1).mark();
  frame("/p/model.py", 7, "forward")(p);
  p.appends().setitems().appends().setitems();
  p.appends();
  p.s("device_traces").list().mark().list().mark();
  p.dict().mark().s("action").s("alloc").s("addr").i(0).s("size").i(1000).s("frames").op('h').le(200, 1).setitems();
  p.dict()
      .mark()
      .s("action")
      .s("free_requested")
      .s("addr")
      .s("?")
      .s("size")
      .s("?")
      .s("frames")
      .op('h')
      .le(200, 1)
      .setitems();
  p.dict()
      .mark()
      .s("action")
      .s("free_completed")
      .s("addr")
      .i(0)
      .s("size")
      .i(1000)
      .s("frames")
      .op('h')
      .le(200, 1)
      .setitems();
  p.dict().mark().s("action").s("alloc").s("addr").i(0).s("size").i(1000).s("frames").op('h').le(200, 1).setitems();
  p.appends().appends().setitems().stop();
  const MemoryInput in = read_ok(p.bytes());
  const auto& s = samples(in);
  ASSERT_EQ(s.size(), 3u);
  ASSERT_EQ(in.sites.size(), 1u);
  for (const MemorySample& x : s) EXPECT_EQ(x.site, 0u);
  EXPECT_EQ(s[1].source, 2u);
  EXPECT_EQ(s[2].source, 3u);
  EXPECT_EQ(s[2].allocated, 1000);
  EXPECT_EQ(s[0].allocated - s[0].bytes, 0);
}

TEST(MemorySnapshotFiles, Torch113SegmentsOnly) {
  for (const char* f : {"torch113_p4.pickle", "torch113_p2.pickle"}) {
    const MemoryInput in = read_ok(data_file(f));
    EXPECT_FALSE(in.times_recorded);
    ASSERT_EQ(in.devices.size(), 1u);
    ASSERT_EQ(samples(in).size(), 1u);
    EXPECT_EQ(in.segments.size(), 3u);
    std::int64_t reserved = 0;
    for (const MemorySegmentState& s : in.segments) reserved += s.total_bytes;
    EXPECT_EQ(samples(in)[0].reserved, reserved);
    // history[0].real_size of the held blocks: 3 weights, 3 kept losses.
    EXPECT_EQ(samples(in)[0].allocated, (4 << 20) + (4 << 20) + 1000 + (64 << 10) + 3000 + 3 * (256 << 10));
  }
}

TEST(MemorySnapshotFiles, OneSnapshotThreeEncodings) {
  // pickle.dump at protocols 4 and 2, and torch's C++ pickler: the same input.
  const MemoryInput a = read_ok(data_file("train_2x_p4.pickle"));
  for (const char* f : {"train_2x_p2.pickle", "train_2x_cpp.pickle"}) {
    const MemoryInput b = read_ok(data_file(f));
    ASSERT_EQ(a.devices.size(), b.devices.size()) << f;
    ASSERT_EQ(samples(a).size(), samples(b).size()) << f;
    for (std::size_t k = 0; k < samples(a).size(); ++k) {
      const MemorySample &x = samples(a)[k], &y = samples(b)[k];
      EXPECT_TRUE(x.ts_ns == y.ts_ns && x.bytes == y.bytes && x.addr == y.addr && x.allocated == y.allocated &&
                  x.reserved == y.reserved && x.source == y.source)
          << f << " sample " << k;
      ASSERT_EQ(x.site == kNoIndex, y.site == kNoIndex) << f;
      if (x.site != kNoIndex) {
        EXPECT_EQ(a.sites[x.site].stack, b.sites[y.site].stack) << f;
      }
    }
    EXPECT_EQ(a.segments.size(), b.segments.size());
  }
}

TEST(MemorySnapshotFiles, ThePlantedLeakAndSpike) {
  const MemoryInput in = read_ok(data_file("train_2x_p4.pickle"));
  const auto& s = samples(in);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front().allocated - s.front().bytes, 0);  // the trace saw the allocator from its start
  std::size_t peak = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (s[k].allocated > s[peak].allocated) peak = k;
  }
  ASSERT_NE(s[peak].site, kNoIndex);
  EXPECT_EQ(in.sites[s[peak].site].op, "train.py:66:debug_dump");
  EXPECT_EQ(s[peak].bytes, 64 << 20);
  int leaks = 0;
  for (const MemorySample& x : s) {
    if (x.bytes == (256 << 10) && x.site != kNoIndex && in.sites[x.site].op == "train.py:61:train_step") ++leaks;
  }
  EXPECT_EQ(leaks, 8);
  // The frames inside torch (linear.py, module.py) are not the op.
  for (const MemorySite& site : in.sites) EXPECT_EQ(site.op.find("module.py"), std::string::npos) << site.op;
}

TEST(MemorySnapshotFiles, TwoDevicesAndAWrappedRing) {
  const MemoryInput in = read_ok(data_file("ring_2devices_p2.pickle"));
  ASSERT_EQ(in.devices.size(), 2u);
  for (std::size_t d = 0; d < 2; ++d) {
    const auto& s = samples(in, d);
    ASSERT_FALSE(s.empty());
    EXPECT_GT(s.front().allocated - s.front().bytes, 0) << d;  // live before the ring's first entry
    EXPECT_EQ(s.back().bytes, 0) << d;                         // empty_cache's segment_free comes last
    std::int64_t reserved = 0;
    for (const MemorySegmentState& g : in.segments)
      reserved += g.device_id == static_cast<std::int16_t>(d) ? g.total_bytes : 0;
    EXPECT_EQ(s.back().reserved, reserved) << d;
  }
}

TEST(MemorySnapshotFiles, Torch20WithoutTimes) {
  const MemoryInput in = read_ok(data_file("torch20_notime_p4.pickle"));
  EXPECT_FALSE(in.times_recorded);
  const auto& s = samples(in);
  ASSERT_FALSE(s.empty());
  for (const MemorySample& x : s) EXPECT_EQ(x.ts_ns, static_cast<std::int64_t>(x.source));
  EXPECT_EQ(s.front().allocated - s.front().bytes, 0);
}

}  // namespace
}  // namespace tprof
