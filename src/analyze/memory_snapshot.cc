// PyTorch memory snapshots (tprof/memory.h, docs/memory.md) read natively:
// the pickle that torch.cuda.memory._dump_snapshot writes, run by a small
// pickle machine, without Python.
//
//   bytes ──PickleMachine (protocols 2–5)──▶ values on a stack, a memo
//     │  as SETITEM(S) completes a dict: {filename, line, name} becomes a
//     │  FrameRec, {action, ...} a staged MemorySample (its frames already a
//     │  site) or, for free_requested and the like, nothing; a list of
//     │  frames keeps only the frames a site needs, then only its site
//     ▼
//   root: {segments, device_traces} (torch ≥ 2.0) or [segments] (1.13)
//     segments ──▶ MemorySegmentState; per device, allocated and reserved at dump time
//     device_traces[d] ──▶ samples in trace order ──replayed backwards from
//                          the dump-time totals──▶ allocated, reserved after each
//
// Memory: a snapshot is mostly trace entries and their stacks, so neither is
// ever held as a dict or a list. What stays per entry is its sample (48
// bytes, moved into the result, not copied, for the usual one-device
// trace) and its memo slot (16 bytes); a 1 GB snapshot of 6 million samples
// peaks at 1.5 times its size, the mapped file included
// (bench/memory_snapshot_bench.cc). Hostile input: the machine loops, never
// recurses; every length is checked against what is left before anything is
// allocated; each container is walked once (a second visit is an error);
// memo ids far apart go to a map; site text has a budget.
//
// The formats, from torch's sources:
//   - 1.13: torch.cuda.memory._snapshot() is a list of segments, pickled by
//     the user (1.13 has no _dump_snapshot): Python's pickle, protocol 4 by
//     default. Blocks carry `history` [{addr, real_size, frames}]; no trace.
//   - 2.0: a dict {segments, device_traces}; trace entries without time_us,
//     blocks with `history` still. 2.1+: blocks carry `address`,
//     `requested_size` and `frames`, trace entries `time_us`; later ones add
//     segment_map/segment_unmap (expandable segments), `annotate`,
//     `allocator_settings`, `host_segments`/`host_traces` (the pinned host
//     allocator's, not read here: device memory only). _dump_snapshot uses
//     pickle.dump: protocol 4 (5 from Python 3.14).
//   - torch::cuda::_memory_snapshot_pickled() (C++): the JIT pickler at
//     protocol 2: BINUNICODE strings memoized with BINPUT, EMPTY_DICT MARK …
//     SETITEMS and EMPTY_LIST MARK … APPENDS (one APPENDS for a whole trace),
//     8-byte LONG1 for wide ints, containers memoized after they are written.
//     Older JIT picklers wrap every dict and list in
//     torch.jit._pickle.restore_type_tag(value, "Dict[...]"): that REDUCE
//     gives back its first argument here.
//
// Sizes: CUDACachingAllocator records `alloc` with the size asked for
// (orig_size) and `free_completed` with block->requested_size, so the trace
// counts requested bytes, not the rounded block sizes. The dump-time total
// that the replay starts from therefore sums requested sizes too (what
// _memory_viz's segsum calls total_allocated and MemoryViz.js plots).
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/base/hash.h"
#include "src/base/safe_text.h"
#include "src/base/saturate.h"
#include "tprof/memory.h"

namespace tprof {

namespace {

using internal::sat_add;
using internal::sat_sub;

// ---------------------------------------------------------------------------
// Values

enum class Tag : std::uint8_t {
  kEmpty,  // an unset memo slot; never on the stack
  kNone,
  kBool,       // u: 0 or 1
  kInt,        // u: the bits; n = 1 when the value is unsigned above INT64_MAX
  kBigInt,     // wider than 64 bits: no field of a snapshot is
  kFloat,      // u: the double's bits
  kStr,        // text: u = offset (kOwned: into owned_), n = length
  kBytes,      // as kStr
  kObj,        // u: index into objs_
  kFrame,      // u: index into frames_
  kSample,     // u: index into staged_
  kSampleRun,  // in list storage only: staged_[u, u + n)
  kSkip,       // a trace entry that is no sample (free_requested, snapshot, oom, ...)
  kSite,       // a list of frames, made a site: u = its index in sites_, or kNoIndex
  kGlobal,     // u: Callable
  kOpaque,     // an object of a class this reader does not model
};

struct Value {
  Tag tag = Tag::kEmpty;
  std::uint32_t n = 0;
  std::uint64_t u = 0;
};
static_assert(sizeof(Value) == 16, "the stack and the memo hold millions of these");

constexpr std::uint64_t kOwned = 1ull << 63;

enum class Callable : std::uint64_t {
  kUnknown,
  kFirstArgument,  // torch.jit._pickle.restore_type_tag, build_*list: the value itself
  kNewDict,        // collections.OrderedDict(): a dict whose items SETITEMS adds
};

// torch.jit._pickle's functions that give back their first argument: the
// type tag older JIT picklers put around each dict and list, and the typed
// lists. (build_tensor_from_id needs a tensor table: it stays unknown.)
bool is_type_tag_global(std::string_view name) {
  return name == "restore_type_tag" || name == "build_intlist" || name == "build_doublelist" ||
         name == "build_boollist" || name == "build_tensorlist";
}

enum class ObjKind : std::uint8_t { kFree, kList, kTuple, kSet, kDict, kFramesList, kFrame, kSample, kSkip };

constexpr std::uint8_t kMemoShared = 1;  // stored under more than one memo id
constexpr std::uint8_t kVisited = 2;     // walked once by build(): a second time is a loop or a repeat

struct Obj {
  std::uint64_t offset = 0;       // the opcode that made it, for errors
  std::uint32_t ref = kNoIndex;   // into lists_, dicts_, picks_, frames_ or staged_; kNoIndex: empty
  std::uint32_t memo = kNoIndex;  // the memo id that holds it
  ObjKind kind = ObjKind::kFree;
  std::uint8_t flags = 0;
};

constexpr std::uint32_t kUnresolved = 0xfffffffeu;
constexpr std::uint32_t kBadSite = 0xfffffffdu;
constexpr std::uint32_t kSkipEntry = 0xfffffffcu;

// A list's items. Staged samples are kept as runs (a device's trace of a
// million entries is one value here) and a skipped entry only counts, so
// each sample's position in its list is written to its `source` as it is
// appended, and a container item's to its value's `n`.
struct ListRec {
  std::vector<Value> items;
  std::uint64_t count = 0;           // items appended, skipped ones included
  std::uint32_t site = kUnresolved;  // when used as frames
};

struct DictRec {
  std::vector<Value> items;  // key, value, key, value, ...
};

// A site names the innermost user frame and up to this many user frames.
constexpr std::size_t kSiteFrames = 8;

// What a list of frames keeps: the first user frames (torch-internal ones
// left out) and, for a stack with none, the first frames torch's viewers
// show. A trace with C++ stacks holds a hundred frames per entry; the rest
// are never read, so they are never stored.
struct FramePick {
  std::array<std::uint32_t, kSiteFrames> user{}, any{};
  std::uint8_t n_user = 0, n_any = 0;
  std::uint32_t site = kUnresolved;
};

struct FrameRec {
  Value filename, name;
  std::int64_t line = 0;
  bool hidden = false;    // a frame torch's own viewers leave out
  bool internal = false;  // not the user's code
  std::uint32_t text = kNoIndex;
};

// The dict keys the reductions read.
enum class Key : std::uint8_t { kOther, kAction, kAddr, kSize, kTimeUs, kFrames, kFilename, kName, kLine };

Key key_of(std::string_view k) {
  switch (k.size()) {
    case 4:
      return k == "addr"   ? Key::kAddr
             : k == "size" ? Key::kSize
             : k == "name" ? Key::kName
             : k == "line" ? Key::kLine
                           : Key::kOther;
    case 6: return k == "action" ? Key::kAction : k == "frames" ? Key::kFrames : Key::kOther;
    case 7: return k == "time_us" ? Key::kTimeUs : Key::kOther;
    case 8: return k == "filename" ? Key::kFilename : Key::kOther;
    default: return Key::kOther;
  }
}

// Keys are memoized strings: the same few offsets again and again. A small
// direct-mapped cache from a key's offset to what it names saves comparing
// the text (owned text only grows, so an offset never changes meaning).
struct KeyCacheEntry {
  std::uint64_t u = ~0ull;
  std::uint32_t n = 0;
  Key key = Key::kOther;
};

// What a frame value carries in its `n`, so that a list of frames is
// sorted without reading the frames.
constexpr std::uint32_t kFrameHidden = 1;
constexpr std::uint32_t kFrameInternal = 2;

// Trace actions, kept in a staged sample's `allocated` until the replay.
enum Action : std::int64_t {
  kActNone = 0,
  kActAlloc,
  kActFreeRequested,
  kActFreeCompleted,
  kActSegmentAlloc,
  kActSegmentFree,
  kActSegmentMap,
  kActSegmentUnmap,
  kActOther,  // snapshot, oom, annotate, and names torch may add
};

Action action_of(std::string_view a) {
  if (a == "alloc") return kActAlloc;
  if (a == "free_requested") return kActFreeRequested;
  // "free": the name MemoryViz.js still accepts for a completed free.
  if (a == "free_completed" || a == "free") return kActFreeCompleted;
  if (a == "segment_alloc") return kActSegmentAlloc;
  if (a == "segment_free") return kActSegmentFree;
  if (a == "segment_map") return kActSegmentMap;
  if (a == "segment_unmap") return kActSegmentUnmap;
  return kActOther;
}

// free_requested is not a sample: the bytes stay the allocator's until
// free_completed (a block freed while another stream still uses it waits
// for that stream's events), and both MemoryViz.js and _memory_viz.trace
// take memory back at free_completed only.
bool is_sample(std::int64_t action) {
  return action >= kActAlloc && action <= kActSegmentUnmap && action != kActFreeRequested;
}

// ---------------------------------------------------------------------------
// Frames

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The frames torch's viewers hide (_memory_viz._frame_filter, MemoryViz.js
// frameFilter): the unwinder, the interpreter loop, the dispatcher's boxing.
bool is_hidden_frame(std::string_view filename, std::string_view name) {
  static constexpr std::string_view kNames[] = {"unwind::unwind",    "CapturedTraceback::gather",
                                                "gather_with_cpp",   "_start",
                                                "__libc_start_main", "PyEval_",
                                                "PyObject_",         "PyFunction_"};
  static constexpr std::string_view kFiles[] = {"core/boxing",
                                                "/Register",
                                                "/Redispatch",
                                                "pythonrun.c",
                                                "Modules/main.c",
                                                "Objects/call.c",
                                                "Objects/methodobject.c",
                                                "pycore_ceval.h",
                                                "ceval.c",
                                                "cpython/abstract.h"};
  for (std::string_view x : kNames) {
    if (contains(name, x)) return true;
  }
  for (std::string_view x : kFiles) {
    if (contains(filename, x)) return true;
  }
  return false;
}

// Frames that hold no decision of the user's: torch itself (its Python and
// its C++: torch/, c10/, aten/, code inductor generated), any C or C++
// frame (stacks="all"), Python's own library, and pseudo-files such as
// <frozen runpy> or FX's <eval_with_key>. Third-party packages (a model
// from transformers) count as the user's: they are where the model is.
bool is_internal_frame(std::string_view f) {
  if (f.empty() || f == "??" || f.front() == '<') return true;
  if (f.starts_with("torch/") || contains(f, "/torch/") || f.starts_with("c10/") || contains(f, "/c10/") ||
      f.starts_with("aten/") || contains(f, "/aten/") || contains(f, "torchinductor")) {
    return true;
  }
  static constexpr std::string_view kNative[] = {".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh"};
  for (std::string_view x : kNative) {
    if (f.ends_with(x)) return true;
  }
  // The standard library (/usr/lib/python3.11/contextlib.py), not the
  // packages installed beside it.
  const std::size_t lib = f.find("/lib/python");
  return lib != std::string_view::npos && !contains(f.substr(lib), "-packages/");
}

// A frame's name in a site: torch's own "file.py:line:name" (_frame_fmt),
// each part cut to a length a report can show.
constexpr std::size_t kFramePartBytes = 200;

void append_cut(std::string* out, std::string_view s) {
  if (s.size() <= kFramePartBytes) {
    out->append(s);
    return;
  }
  std::size_t n = kFramePartBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;  // not inside a UTF-8 sequence
  out->append(s.substr(0, n));
  out->append("…");
}

struct SiteKey {
  std::array<std::uint32_t, kSiteFrames> frames{};
  std::uint32_t n = 0;
  bool operator==(const SiteKey& o) const {
    return n == o.n && std::equal(frames.begin(), frames.begin() + n, o.frames.begin());
  }
};
struct SiteKeyHash {
  std::size_t operator()(const SiteKey& k) const {
    // Frames past n are zero: the whole array hashes as one fixed-size key.
    return internal::hash_bytes(reinterpret_cast<const char*>(k.frames.data()), sizeof(k.frames)) ^ k.n;
  }
};

// ---------------------------------------------------------------------------
// Opcodes

enum Op : unsigned char {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kFloat = 'F',
  kInt = 'I',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kLong = 'L',
  kBinInt2 = 'M',
  kNone = 'N',
  kPersId = 'P',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinString = 'T',
  kShortBinString = 'U',
  kUnicode = 'V',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kGet = 'g',
  kBinGet = 'h',
  kInst = 'i',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kObjOp = 'o',
  kPut = 'p',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kProto = 0x80,
  kNewObj = 0x81,
  kExt1 = 0x82,
  kExt2 = 0x83,
  kExt4 = 0x84,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kEmptySet = 0x8f,
  kAddItems = 0x90,
  kFrozenSet = 0x91,
  kNewObjEx = 0x92,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
  kByteArray8 = 0x96,
  kNextBuffer = 0x97,
  kReadonlyBuffer = 0x98,
};

const char* op_name(unsigned char op) {
  switch (op) {
    case kMark: return "MARK";
    case kStop: return "STOP";
    case kPop: return "POP";
    case kPopMark: return "POP_MARK";
    case kDup: return "DUP";
    case kFloat: return "FLOAT";
    case kInt: return "INT";
    case kBinInt: return "BININT";
    case kBinInt1: return "BININT1";
    case kLong: return "LONG";
    case kBinInt2: return "BININT2";
    case kNone: return "NONE";
    case kPersId: return "PERSID";
    case kBinPersId: return "BINPERSID";
    case kReduce: return "REDUCE";
    case kBinString: return "BINSTRING";
    case kShortBinString: return "SHORT_BINSTRING";
    case kUnicode: return "UNICODE";
    case kBinUnicode: return "BINUNICODE";
    case kAppend: return "APPEND";
    case kBuild: return "BUILD";
    case kGlobal: return "GLOBAL";
    case kDict: return "DICT";
    case kEmptyDict: return "EMPTY_DICT";
    case kAppends: return "APPENDS";
    case kGet: return "GET";
    case kBinGet: return "BINGET";
    case kInst: return "INST";
    case kLongBinGet: return "LONG_BINGET";
    case kList: return "LIST";
    case kEmptyList: return "EMPTY_LIST";
    case kObjOp: return "OBJ";
    case kPut: return "PUT";
    case kBinPut: return "BINPUT";
    case kLongBinPut: return "LONG_BINPUT";
    case kSetItem: return "SETITEM";
    case kTuple: return "TUPLE";
    case kEmptyTuple: return "EMPTY_TUPLE";
    case kSetItems: return "SETITEMS";
    case kBinFloat: return "BINFLOAT";
    case kProto: return "PROTO";
    case kNewObj: return "NEWOBJ";
    case kExt1: return "EXT1";
    case kExt2: return "EXT2";
    case kExt4: return "EXT4";
    case kTuple1: return "TUPLE1";
    case kTuple2: return "TUPLE2";
    case kTuple3: return "TUPLE3";
    case kNewTrue: return "NEWTRUE";
    case kNewFalse: return "NEWFALSE";
    case kLong1: return "LONG1";
    case kLong4: return "LONG4";
    case kBinBytes: return "BINBYTES";
    case kShortBinBytes: return "SHORT_BINBYTES";
    case kShortBinUnicode: return "SHORT_BINUNICODE";
    case kBinUnicode8: return "BINUNICODE8";
    case kBinBytes8: return "BINBYTES8";
    case kEmptySet: return "EMPTY_SET";
    case kAddItems: return "ADDITEMS";
    case kFrozenSet: return "FROZENSET";
    case kNewObjEx: return "NEWOBJ_EX";
    case kStackGlobal: return "STACK_GLOBAL";
    case kMemoize: return "MEMOIZE";
    case kFrame: return "FRAME";
    case kByteArray8: return "BYTEARRAY8";
    case kNextBuffer: return "NEXT_BUFFER";
    case kReadonlyBuffer: return "READONLY_BUFFER";
    default: return "?";
  }
}

inline std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// The 4-byte little-endian argument of BINGET's long form and its kin: one
// load where the host is little-endian.
inline std::uint32_t load_u32(const unsigned char* p) {
  if constexpr (std::endian::native == std::endian::little) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  } else {
    return static_cast<std::uint32_t>(load_le(p, 4));
  }
}

// Memo ids are dense (0, 1, 2, ... as Python and torch's pickler number
// them); an id far past the end goes to a map, so a hostile LONG_BINPUT of
// 2^32 - 1 costs one entry, not 64 GiB.
constexpr std::uint64_t kMemoSlack = 1u << 16;

// The most site text a snapshot may make: stacks are short and repeat, but
// a crafted pickle can make every list of frames a new site. Past it a new
// site keeps its innermost frame only.
constexpr std::size_t kMinSiteTextBudget = 64u << 20;

// The machine's stack. Every opcode pushes or pops, so push is a store and
// an increment inlined into the loop (a std::vector's push_back was a call
// there, a seventh of the time); the storage only grows.
class ValueStack {
 public:
  [[gnu::always_inline]] void push_back(const Value& v) {
    if (size_ == buf_.size()) [[unlikely]] {
      grow();
    }
    buf_[size_++] = v;
  }
  std::size_t size() const { return size_; }
  Value& back() { return buf_[size_ - 1]; }
  Value& operator[](std::size_t i) { return buf_[i]; }
  Value* data() { return buf_.data(); }
  Value* begin() { return buf_.data(); }
  Value* end() { return buf_.data() + size_; }
  void pop_back() { --size_; }
  // Shrinks, or grows with values that are overwritten before they are read.
  void resize(std::size_t n) {
    while (n > buf_.size()) grow();
    size_ = n;
  }
  void insert(std::size_t at, const Value& v) {
    push_back(v);
    std::rotate(begin() + at, end() - 1, end());
  }
  void release() {
    std::vector<Value>().swap(buf_);
    size_ = 0;
  }

 private:
  [[gnu::noinline]] void grow() { buf_.resize(std::max<std::size_t>(1024, 2 * buf_.size())); }
  std::vector<Value> buf_;
  std::size_t size_ = 0;
};

// ---------------------------------------------------------------------------

class SnapshotReader {
 public:
  SnapshotReader(std::string_view bytes, const std::string& name) : bytes_(bytes), name_(name) {}
  Result<MemoryInput> read();

 private:
  // The machine.
  Status run();
  Error fail(ErrorCode code, std::string what, std::uint64_t at) const {
    return Error(code, std::move(what), name_, static_cast<std::int64_t>(at));
  }
  std::size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  bool has(std::size_t k) const { return stack_.size() - base() >= k; }
  Status underflow(unsigned char op, std::uint64_t at) const {
    return fail(ErrorCode::kParse, std::string(op_name(op)) + ": the stack holds too few values (underflow)", at);
  }
  Result<std::uint32_t> new_obj(ObjKind kind, std::uint64_t at);
  void memo_put(std::uint64_t id, const Value& v);
  const Value* memo_get(std::uint64_t id) const;
  Value* memo_slot(std::uint64_t id);
  Status set_items(std::size_t target, std::size_t first, unsigned char op, std::uint64_t at);
  Status append_items(std::size_t target, std::size_t first, unsigned char op, std::uint64_t at);
  Result<Value> make_tuple(std::size_t first, std::uint64_t at);
  Result<Value> make_string(Tag tag, std::size_t pos, std::uint64_t len, std::uint64_t at, unsigned char op);
  Status decode_unicode_line(std::string_view line, std::uint64_t at, Value* out);
  void retire(std::uint32_t obj);

  std::string_view str(const Value& v) const {
    if (v.u & kOwned) return std::string_view(owned_).substr(v.u & ~kOwned, v.n);
    return bytes_.substr(v.u, v.n);
  }
  bool key_is(const Value& k, std::string_view s) const { return k.tag == Tag::kStr && k.n == s.size() && str(k) == s; }
  Key key(const Value& k) {
    if (k.tag != Tag::kStr) return Key::kOther;
    KeyCacheEntry& e = key_cache_[(k.u * 0x9e3779b97f4a7c15ull) >> 56];
    if (e.u != k.u || e.n != k.n) e = KeyCacheEntry{k.u, k.n, key_of(str(k))};
    return e.key;
  }
  [[gnu::always_inline]] void push(const Value& v) { stack_.push_back(v); }

  // Reductions.
  enum class Shape { kGeneric, kTrace, kFrame };
  Shape shape_of(const Value* kv, std::size_t pairs);
  Result<std::uint32_t> stage_sample(const Value* kv, std::size_t pairs, std::uint64_t at);
  void apply_trace_field(std::uint32_t s, const Value& k, const Value& v, std::uint64_t at);
  Result<std::uint32_t> make_frame(const Value* kv, std::size_t pairs, std::uint64_t at);
  void apply_frame_field(std::uint32_t f, const Value& k, const Value& v);
  void classify(FrameRec& f) const;
  void specialize(Value& v, Tag tag, std::uint32_t idx, std::uint32_t n = 0);
  void collapse_frames(std::uint32_t obj, std::uint32_t site);
  std::uint32_t frame_of(const Value& v);
  std::uint32_t sample_of(const Value& v, std::uint32_t index, std::uint64_t at);
  void add_frame(FramePick& pick, const Value& item);
  static std::uint32_t frame_flags(const FrameRec& f) {
    return (f.hidden ? kFrameHidden : 0) | (f.internal ? kFrameInternal : 0);
  }
  std::uint32_t site_of(const Value& v);
  std::uint32_t intern_site(const FramePick& pick);
  const std::string& frame_text(std::uint32_t frame);
  void bad(std::uint32_t s, std::uint64_t at, std::string what) { bad_.try_emplace(s, at, std::move(what)); }

  // The result.
  Result<MemoryInput> build(const Value& root, std::uint64_t stop_at);
  const Value* find(const DictRec& d, std::string_view key) const;
  const DictRec* dict_of(const Value& v) const;
  const ListRec* list_of(const Value& v, bool* is_list) const;
  std::uint64_t offset_of(const Value& v, std::uint64_t fallback) const {
    return v.tag == Tag::kObj ? objs_[v.u].offset : fallback;
  }

  std::string_view bytes_;
  const std::string& name_;
  std::string owned_;  // text decoded from UNICODE's escapes
  std::array<KeyCacheEntry, 256> key_cache_{};

  ValueStack stack_;
  std::vector<std::size_t> marks_;
  std::vector<Value> memo_;
  std::unordered_map<std::uint64_t, Value> memo_far_;
  std::uint64_t memo_count_ = 0;
  std::uint64_t stop_at_ = 0;  // errors about a value that is no container point at STOP

  std::vector<Obj> objs_;
  std::vector<std::uint32_t> free_objs_;
  std::vector<ListRec> lists_;
  std::vector<std::uint32_t> free_lists_;
  std::vector<DictRec> dicts_;
  std::vector<FramePick> picks_;
  std::vector<std::uint32_t> free_picks_;
  std::vector<FrameRec> frames_;
  std::vector<std::string> frame_texts_;
  std::uint32_t empty_tuple_ = kNoIndex;

  std::vector<MemorySample> staged_;
  std::unordered_map<std::uint32_t, std::pair<std::uint64_t, std::string>> bad_;

  std::vector<MemorySite> sites_;
  std::unordered_map<SiteKey, std::uint32_t, SiteKeyHash> site_by_frames_;
  // Before site_by_frames_: most stacks of a trace are a few call paths
  // repeated, so a small direct-mapped cache answers nearly every lookup.
  std::array<std::pair<SiteKey, std::uint32_t>, 1024> site_cache_{};
  std::unordered_map<std::string, std::uint32_t> site_by_stack_;
  std::size_t site_text_bytes_ = 0;
};

Result<std::uint32_t> SnapshotReader::new_obj(ObjKind kind, std::uint64_t at) {
  std::uint32_t i;
  if (!free_objs_.empty()) {
    i = free_objs_.back();
    free_objs_.pop_back();
  } else {
    if (objs_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion containers", at);
    i = static_cast<std::uint32_t>(objs_.size());
    objs_.emplace_back();
  }
  Obj& o = objs_[i];
  o = Obj{};
  o.offset = at;
  o.kind = kind;
  return i;
}

// Gives a container's slot back once nothing the pickle can still name holds
// it (a dict turned into a sample or a frame; REDUCE's argument tuple). A
// stale copy that a crafted pickle kept would see another container: wrong,
// but in bounds, which is all such a pickle can ask.
void SnapshotReader::retire(std::uint32_t obj) {
  Obj& o = objs_[obj];
  if (o.flags & kMemoShared) return;
  if ((o.kind == ObjKind::kTuple || o.kind == ObjKind::kList) && o.ref != kNoIndex) {
    lists_[o.ref] = ListRec{};
    free_lists_.push_back(o.ref);
  } else if (o.kind == ObjKind::kFramesList) {
    free_picks_.push_back(o.ref);
  }
  o.kind = ObjKind::kFree;
  o.ref = kNoIndex;
  free_objs_.push_back(obj);
}

Value* SnapshotReader::memo_slot(std::uint64_t id) {
  if (id < memo_.size()) return &memo_[id];
  auto it = memo_far_.find(id);
  return it == memo_far_.end() ? nullptr : &it->second;
}

const Value* SnapshotReader::memo_get(std::uint64_t id) const {
  const Value* v = nullptr;
  if (id < memo_.size()) {
    v = &memo_[id];
  } else if (auto it = memo_far_.find(id); it != memo_far_.end()) {
    v = &it->second;
  }
  return v != nullptr && v->tag != Tag::kEmpty ? v : nullptr;
}

void SnapshotReader::memo_put(std::uint64_t id, const Value& v) {
  Value* slot;
  if (id < memo_.size()) {
    slot = &memo_[id];
  } else if (id == memo_.size() && memo_far_.empty()) {
    slot = &memo_.emplace_back();
  } else if (id < memo_.size() + kMemoSlack && memo_far_.empty()) {
    memo_.resize(id + 1);
    slot = &memo_[id];
  } else {
    slot = &memo_far_[id];
  }
  if (slot->tag == Tag::kEmpty) ++memo_count_;
  *slot = v;
  if (v.tag == Tag::kObj) {
    Obj& o = objs_[v.u];
    if (o.memo == kNoIndex && id < kUnresolved) {
      o.memo = static_cast<std::uint32_t>(id);
    } else if (o.memo != id) {
      o.flags |= kMemoShared;
    }
  }
}

SnapshotReader::Shape SnapshotReader::shape_of(const Value* kv, std::size_t pairs) {
  bool filename = false, name = false;
  for (std::size_t i = 0; i < pairs; ++i) {
    const Key k = key(kv[2 * i]);
    if (k == Key::kAction) return Shape::kTrace;
    filename |= k == Key::kFilename;
    name |= k == Key::kName;
  }
  return filename && name ? Shape::kFrame : Shape::kGeneric;
}

// Stages a trace entry as a sample; one that is no sample (its action a
// string naming no change of memory) is not kept at all: kSkipEntry. Its
// other fields are never read, so they are not checked either.
Result<std::uint32_t> SnapshotReader::stage_sample(const Value* kv, std::size_t pairs, std::uint64_t at) {
  for (std::size_t i = pairs; i-- > 0;) {
    if (key(kv[2 * i]) != Key::kAction) continue;
    if (kv[2 * i + 1].tag == Tag::kStr && !is_sample(action_of(str(kv[2 * i + 1])))) return kSkipEntry;
    break;
  }
  if (staged_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion trace entries", at);
  const auto s = static_cast<std::uint32_t>(staged_.size());
  MemorySample& x = staged_.emplace_back();
  x.ts_ns = kMemoryAbsent;  // no time_us
  x.bytes = -1;             // no size
  x.allocated = kActNone;
  for (std::size_t i = 0; i < pairs; ++i) apply_trace_field(s, kv[2 * i], kv[2 * i + 1], at);
  return s;
}

void SnapshotReader::apply_trace_field(std::uint32_t s, const Value& k, const Value& v, std::uint64_t at) {
  MemorySample& x = staged_[s];
  const Key field = key(k);
  if (field == Key::kAction) {
    if (v.tag == Tag::kStr) {
      x.allocated = action_of(str(v));
    } else {
      bad(s, at, "\"action\" is not a string");
    }
  } else if (field == Key::kAddr) {
    if (v.tag == Tag::kInt) {
      x.addr = v.u;
    } else if (v.tag != Tag::kNone) {
      bad(s, at, "\"addr\" is not an integer");
    }
  } else if (field == Key::kSize) {
    if (v.tag == Tag::kInt && v.n == 0 && static_cast<std::int64_t>(v.u) >= 0) {
      x.bytes = static_cast<std::int64_t>(v.u);
    } else {
      bad(s, at, "\"size\" is not a byte count");
    }
  } else if (field == Key::kTimeUs) {
    if (v.tag == Tag::kInt && v.n == 0) {
      x.ts_ns = internal::sat_mul(static_cast<std::int64_t>(v.u), 1000);
    } else if (v.tag == Tag::kFloat) {
      const double us = std::bit_cast<double>(v.u);
      if (!std::isfinite(us)) {
        bad(s, at, "\"time_us\" is not finite");
      } else {
        const double ns = std::clamp(us * 1000.0, -9.2e18, 9.2e18);
        x.ts_ns = static_cast<std::int64_t>(std::llround(ns));
      }
    } else {
      bad(s, at, "\"time_us\" is not a number");
    }
    // kMemoryAbsent marks "no time_us" until the replay: a time that
    // saturated down to it is still a time.
    if (x.ts_ns == kMemoryAbsent) x.ts_ns = kMemoryAbsent + 1;
  } else if (field == Key::kFrames) {
    const std::uint32_t site = site_of(v);  // reads frames only: `x` stays valid
    if (site == kBadSite) {
      bad(s, at, "\"frames\" is not a list of frames");
    } else {
      x.site = site;
      if (v.tag == Tag::kObj && objs_[v.u].kind == ObjKind::kFramesList)
        collapse_frames(static_cast<std::uint32_t>(v.u), site);
    }
  }
}

Result<std::uint32_t> SnapshotReader::make_frame(const Value* kv, std::size_t pairs, std::uint64_t at) {
  if (frames_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion frames", at);
  const auto f = static_cast<std::uint32_t>(frames_.size());
  frames_.emplace_back();
  for (std::size_t i = 0; i < pairs; ++i) apply_frame_field(f, kv[2 * i], kv[2 * i + 1]);
  return f;
}

void SnapshotReader::apply_frame_field(std::uint32_t f, const Value& k, const Value& v) {
  const Key field = key(k);
  FrameRec& r = frames_[f];
  if (field == Key::kFilename && v.tag == Tag::kStr) {
    r.filename = v;
  } else if (field == Key::kName && v.tag == Tag::kStr) {
    r.name = v;
  } else if (field == Key::kLine && v.tag == Tag::kInt) {
    r.line = static_cast<std::int64_t>(v.u);
  } else {
    return;
  }
  r.text = kNoIndex;
  classify(r);
}

void SnapshotReader::classify(FrameRec& f) const {
  const std::string_view file = f.filename.tag == Tag::kStr ? str(f.filename) : std::string_view();
  const std::string_view name = f.name.tag == Tag::kStr ? str(f.name) : std::string_view();
  f.hidden = is_hidden_frame(file, name);
  f.internal = is_internal_frame(file);
}

// Turns the dict at v (its only copies: v, on the stack, and its memo slot)
// into a sample or a frame, and frees its container slot.
void SnapshotReader::specialize(Value& v, Tag tag, std::uint32_t idx, std::uint32_t n) {
  const auto obj = static_cast<std::uint32_t>(v.u);
  Obj& o = objs_[obj];
  const Value repl{tag, n, idx};
  if (o.memo != kNoIndex) {
    Value* m = memo_slot(o.memo);
    if (m != nullptr && m->tag == Tag::kObj && m->u == obj) *m = repl;
  }
  v = repl;
  if (o.flags & kMemoShared) {
    // Other memo ids still name the container: it forwards to the record.
    o.kind = tag == Tag::kSample ? ObjKind::kSample : tag == Tag::kSkip ? ObjKind::kSkip : ObjKind::kFrame;
    o.ref = idx;
  } else {
    retire(obj);
  }
}

// A list of frames whose site is known is only that site from then on: its
// memo slot (where free_requested and free_completed fetch it again) holds
// the site, and its container goes back. A trace keeps one such list per
// allocation: this is most of what it would otherwise hold.
void SnapshotReader::collapse_frames(std::uint32_t obj, std::uint32_t site) {
  Obj& o = objs_[obj];
  if (o.memo != kNoIndex) {
    Value* m = memo_slot(o.memo);
    if (m != nullptr && m->tag == Tag::kObj && m->u == obj) *m = Value{Tag::kSite, 0, site};
  }
  retire(obj);
}

std::uint32_t SnapshotReader::frame_of(const Value& v) {
  if (v.tag == Tag::kFrame) return static_cast<std::uint32_t>(v.u);
  if (v.tag != Tag::kObj) return kNoIndex;
  Obj& o = objs_[v.u];
  if (o.kind == ObjKind::kFrame) return o.ref;
  if (o.kind != ObjKind::kDict || o.ref == kNoIndex) return kNoIndex;
  // A frame whose dict was filled by single SETITEMs: made a frame on first use.
  const std::uint32_t dict = o.ref;
  if (shape_of(dicts_[dict].items.data(), dicts_[dict].items.size() / 2) != Shape::kFrame) return kNoIndex;
  const std::vector<Value> kv = std::move(dicts_[dict].items);
  auto f = make_frame(kv.data(), kv.size() / 2, o.offset);
  if (!f) return kNoIndex;
  Obj& again = objs_[v.u];
  again.kind = ObjKind::kFrame;
  again.ref = *f;
  return *f;
}

// The staged sample a list item of a device trace is (kSkipEntry: an entry
// that is no sample), staging a dict that single SETITEMs filled now, as
// entry `index` of its list; kNoIndex when it is no trace entry.
std::uint32_t SnapshotReader::sample_of(const Value& v, std::uint32_t index, std::uint64_t at) {
  if (v.tag == Tag::kSample) return static_cast<std::uint32_t>(v.u);
  if (v.tag == Tag::kSkip) return kSkipEntry;
  if (v.tag != Tag::kObj) return kNoIndex;
  Obj& o = objs_[v.u];
  if (o.kind == ObjKind::kSample) return o.ref;
  if (o.kind == ObjKind::kSkip) return kSkipEntry;
  if (o.kind != ObjKind::kDict || o.ref == kNoIndex) return kNoIndex;
  const DictRec& d = dicts_[o.ref];
  if (shape_of(d.items.data(), d.items.size() / 2) != Shape::kTrace) return kNoIndex;
  const std::vector<Value> kv = std::move(dicts_[o.ref].items);
  auto s = stage_sample(kv.data(), kv.size() / 2, at);
  if (!s) return kNoIndex;
  Obj& again = objs_[v.u];
  if (*s == kSkipEntry) {
    again.kind = ObjKind::kSkip;
    return kSkipEntry;
  }
  again.kind = ObjKind::kSample;
  again.ref = *s;
  staged_[*s].source = index;
  return *s;
}

// Adds the list item `item` to a pick when it is a frame.
void SnapshotReader::add_frame(FramePick& pick, const Value& item) {
  std::uint32_t frame, flags;
  if (item.tag == Tag::kFrame) {
    frame = static_cast<std::uint32_t>(item.u);
    flags = item.n;
  } else {
    frame = frame_of(item);
    if (frame == kNoIndex) return;
    flags = frame_flags(frames_[frame]);
  }
  if (flags & kFrameHidden) return;
  if (pick.n_any < kSiteFrames) pick.any[pick.n_any++] = frame;
  if (!(flags & kFrameInternal) && pick.n_user < kSiteFrames) pick.user[pick.n_user++] = frame;
}

std::uint32_t SnapshotReader::site_of(const Value& v) {
  if (v.tag == Tag::kNone) return kNoIndex;
  if (v.tag == Tag::kSite) return static_cast<std::uint32_t>(v.u);
  if (v.tag != Tag::kObj) return kBadSite;
  Obj& o = objs_[v.u];
  if (o.kind == ObjKind::kFramesList) {
    FramePick& pick = picks_[o.ref];
    if (pick.site == kUnresolved) pick.site = intern_site(pick);
    return pick.site;
  }
  if (o.kind != ObjKind::kList && o.kind != ObjKind::kTuple) return kBadSite;
  if (o.ref == kNoIndex) return kNoIndex;  // []
  const std::uint32_t list = o.ref;
  if (lists_[list].site == kUnresolved) {
    FramePick pick;
    for (std::size_t i = 0; i < lists_[list].items.size() && pick.n_user < kSiteFrames; ++i) {
      add_frame(pick, lists_[list].items[i]);
    }
    lists_[list].site = intern_site(pick);
  }
  return lists_[list].site;
}

const std::string& SnapshotReader::frame_text(std::uint32_t frame) {
  FrameRec& r = frames_[frame];
  if (r.text == kNoIndex) {
    std::string t;
    std::string_view file = r.filename.tag == Tag::kStr ? str(r.filename) : std::string_view();
    if (const std::size_t slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
    append_cut(&t, file);
    t += ':';
    t += std::to_string(r.line);
    t += ':';
    append_cut(&t, r.name.tag == Tag::kStr ? str(r.name) : std::string_view());
    r.text = static_cast<std::uint32_t>(frame_texts_.size());
    frame_texts_.push_back(std::move(t));
  }
  return frame_texts_[r.text];
}

// A site is the innermost user frame (op) and the user frames from it
// outwards, innermost first (stack, the op included). A stack without user
// frames (a backward pass recorded without C++ frames has none; one with
// them has only torch's) falls back to the frames torch's viewers show.
std::uint32_t SnapshotReader::intern_site(const FramePick& pick) {
  const bool user = pick.n_user > 0;
  SiteKey key;
  key.n = user ? pick.n_user : pick.n_any;
  if (key.n == 0) return kNoIndex;
  std::copy_n(user ? pick.user.begin() : pick.any.begin(), key.n, key.frames.begin());
  auto& cached = site_cache_[SiteKeyHash()(key) % site_cache_.size()];
  if (cached.first.n != 0 && cached.first == key) return cached.second;
  if (auto it = site_by_frames_.find(key); it != site_by_frames_.end()) {
    cached = {key, it->second};
    return it->second;
  }
  const std::size_t budget = std::max(kMinSiteTextBudget, 8 * bytes_.size());
  const std::uint32_t frames = site_text_bytes_ > budget ? 1 : key.n;
  std::string stack;
  for (std::uint32_t i = 0; i < frames; ++i) {
    if (i > 0) stack += " <- ";
    stack += frame_text(key.frames[i]);
  }
  auto [it, inserted] = site_by_stack_.try_emplace(stack, static_cast<std::uint32_t>(sites_.size()));
  if (inserted) {
    site_text_bytes_ += 2 * stack.size();
    MemorySite site;  // no `caller`: a snapshot records frames, not ops
    site.op = frame_text(key.frames[0]);
    site.stack = std::move(stack);
    sites_.push_back(std::move(site));
  }
  site_by_frames_.emplace(key, it->second);
  cached = {key, it->second};
  return it->second;
}

Status SnapshotReader::set_items(std::size_t target, std::size_t first, unsigned char op, std::uint64_t at) {
  const std::size_t count = stack_.size() - first;
  if (count % 2 != 0) {
    return fail(ErrorCode::kParse,
                std::string(op_name(op)) + ": expected key, value pairs, found an odd number of values", at);
  }
  const std::size_t pairs = count / 2;
  const Value* kv = stack_.data() + first;
  Value& t = stack_[target];
  std::uint32_t sample = kNoIndex, frame = kNoIndex;
  if (t.tag == Tag::kSample) {
    sample = static_cast<std::uint32_t>(t.u);
  } else if (t.tag == Tag::kFrame) {
    frame = static_cast<std::uint32_t>(t.u);
  } else if (t.tag == Tag::kOpaque || t.tag == Tag::kSkip) {
    return {};  // an object this reader does not model, or a trace entry it skips: the items do not matter
  } else if (t.tag != Tag::kObj) {
    return fail(ErrorCode::kParse, std::string(op_name(op)) + ": expected a dict to set items in", at);
  } else {
    Obj& o = objs_[t.u];
    if (o.kind == ObjKind::kSkip) return {};
    if (o.kind == ObjKind::kSample) {
      sample = o.ref;
    } else if (o.kind == ObjKind::kFrame) {
      frame = o.ref;
    } else if (o.kind != ObjKind::kDict) {
      return fail(ErrorCode::kParse, std::string(op_name(op)) + ": expected a dict to set items in", at);
    }
  }
  if (sample != kNoIndex) {
    for (std::size_t i = 0; i < pairs; ++i) apply_trace_field(sample, kv[2 * i], kv[2 * i + 1], at);
    return {};
  }
  if (frame != kNoIndex) {
    for (std::size_t i = 0; i < pairs; ++i) apply_frame_field(frame, kv[2 * i], kv[2 * i + 1]);
    return {};
  }
  if (objs_[t.u].ref == kNoIndex) {
    // The dict's first items say what it is. Python and torch write a
    // frame's or a trace entry's items in one SETITEMS (Python batches
    // 1000), so most of a snapshot's dicts never exist as dicts here.
    switch (shape_of(kv, pairs)) {
      case Shape::kTrace: {
        auto s = stage_sample(kv, pairs, at);
        if (!s) return s.error();
        specialize(t, *s == kSkipEntry ? Tag::kSkip : Tag::kSample, *s == kSkipEntry ? 0 : *s);
        return {};
      }
      case Shape::kFrame: {
        auto f = make_frame(kv, pairs, at);
        if (!f) return f.error();
        // The frame's kind rides in the value; a crafted pickle that changes
        // the frame afterwards leaves the copies made before as they were.
        specialize(t, Tag::kFrame, *f, frame_flags(frames_[*f]));
        return {};
      }
      case Shape::kGeneric: break;
    }
    if (pairs == 0) return {};
    if (dicts_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion dicts", at);
    objs_[t.u].ref = static_cast<std::uint32_t>(dicts_.size());
    dicts_.emplace_back();
  }
  std::vector<Value>& items = dicts_[objs_[t.u].ref].items;
  items.insert(items.end(), kv, kv + count);
  return {};
}

Status SnapshotReader::append_items(std::size_t target, std::size_t first, unsigned char op, std::uint64_t at) {
  const std::size_t count = stack_.size() - first;
  const Value* items = stack_.data() + first;
  const Value& t = stack_[target];
  if (t.tag == Tag::kOpaque) return {};
  if (t.tag != Tag::kObj)
    return fail(ErrorCode::kParse, std::string(op_name(op)) + ": expected a list to append to", at);
  const auto obj = static_cast<std::uint32_t>(t.u);
  {
    const ObjKind k = objs_[obj].kind;
    const bool ok = op == kAddItems ? k == ObjKind::kSet : (k == ObjKind::kList || k == ObjKind::kFramesList);
    if (!ok)
      return fail(ErrorCode::kParse,
                  std::string(op_name(op)) +
                      (op == kAddItems ? ": expected a set to add to" : ": expected a list to append to"),
                  at);
  }
  if (count == 0) return {};
  if (objs_[obj].kind == ObjKind::kList && objs_[obj].ref == kNoIndex && frame_of(items[0]) != kNoIndex) {
    std::uint32_t pick;
    if (!free_picks_.empty()) {
      pick = free_picks_.back();
      free_picks_.pop_back();
      picks_[pick] = FramePick{};
    } else {
      if (picks_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion stacks", at);
      pick = static_cast<std::uint32_t>(picks_.size());
      picks_.emplace_back();
    }
    objs_[obj].kind = ObjKind::kFramesList;
    objs_[obj].ref = pick;
  }
  if (objs_[obj].kind == ObjKind::kFramesList) {
    // Anything but a frame in a list of frames is dropped: only sites read it.
    FramePick& pick = picks_[objs_[obj].ref];
    pick.site = kUnresolved;
    for (std::size_t i = 0; i < count && pick.n_user < kSiteFrames; ++i) add_frame(pick, items[i]);
    return {};
  }
  if (objs_[obj].ref == kNoIndex) {
    if (!free_lists_.empty()) {
      objs_[obj].ref = free_lists_.back();
      free_lists_.pop_back();
    } else {
      if (lists_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion lists", at);
      objs_[obj].ref = static_cast<std::uint32_t>(lists_.size());
      lists_.emplace_back();
    }
  }
  ListRec& l = lists_[objs_[obj].ref];
  l.site = kUnresolved;
  for (std::size_t i = 0; i < count; ++i) {
    const Value& x = items[i];
    const std::uint32_t index = l.count < kNoIndex ? static_cast<std::uint32_t>(l.count) : kNoIndex;
    ++l.count;
    if (x.tag == Tag::kSample) {
      staged_[x.u].source = index;
      if (!l.items.empty() && l.items.back().tag == Tag::kSampleRun && l.items.back().u + l.items.back().n == x.u &&
          l.items.back().n < kUnresolved) {
        ++l.items.back().n;
      } else {
        l.items.push_back(Value{Tag::kSampleRun, 1, x.u});
      }
    } else if (x.tag != Tag::kSkip) {
      Value y = x;
      if (y.tag == Tag::kObj) y.n = index;
      l.items.push_back(y);
    }
  }
  return {};
}

Result<Value> SnapshotReader::make_tuple(std::size_t first, std::uint64_t at) {
  const std::size_t count = stack_.size() - first;
  if (count == 0) {
    // () is immutable: one container serves every EMPTY_TUPLE.
    if (empty_tuple_ == kNoIndex) {
      auto t = new_obj(ObjKind::kTuple, at);
      if (!t) return t.error();
      empty_tuple_ = *t;
      objs_[empty_tuple_].flags |= kMemoShared;  // never retired
    }
    return Value{Tag::kObj, 0, empty_tuple_};
  }
  auto t = new_obj(ObjKind::kTuple, at);
  if (!t) return t.error();
  std::uint32_t list;
  if (!free_lists_.empty()) {
    list = free_lists_.back();
    free_lists_.pop_back();
  } else {
    if (lists_.size() >= kUnresolved) return fail(ErrorCode::kUnsupported, "more than 4 billion lists", at);
    list = static_cast<std::uint32_t>(lists_.size());
    lists_.emplace_back();
  }
  lists_[list].items.assign(stack_.begin() + first, stack_.end());
  lists_[list].count = count;
  for (std::size_t i = 0; i < count; ++i) {
    Value& x = lists_[list].items[i];
    const auto index = static_cast<std::uint32_t>(std::min<std::size_t>(i, kNoIndex));
    if (x.tag == Tag::kSample) staged_[x.u].source = index;
    if (x.tag == Tag::kObj) x.n = index;
  }
  objs_[*t].ref = list;
  return Value{Tag::kObj, 0, *t};
}

Result<Value> SnapshotReader::make_string(Tag tag, std::size_t pos, std::uint64_t len, std::uint64_t at,
                                          unsigned char op) {
  if (len > bytes_.size() - pos) {
    return fail(
        ErrorCode::kParse,
        std::string(op_name(op)) + ": expected " + std::to_string(len) + " bytes of data, the pickle ends first", at);
  }
  if (len >= kUnresolved)
    return fail(ErrorCode::kUnsupported, std::string(op_name(op)) + ": a string of 4 GiB or more", at);
  return Value{tag, static_cast<std::uint32_t>(len), pos};
}


// UNICODE's text is raw-unicode-escape: bytes are Latin-1 code points, and
// \uXXXX, \UXXXXXXXX after an odd run of backslashes are escapes (Python's
// pickler writes '\' and '\n' this way); a lone surrogate becomes U+FFFD.
Status SnapshotReader::decode_unicode_line(std::string_view line, std::uint64_t at, Value* out) {
  const std::size_t start = owned_.size();
  std::size_t backslashes = 0;  // just before i: an escaped backslash does not start an escape
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c == '\\' && backslashes % 2 == 0 && i + 1 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
      const std::size_t digits = line[i + 1] == 'u' ? 4 : 8;
      if (line.size() - i - 2 < digits) return fail(ErrorCode::kParse, "UNICODE: a truncated \\u escape", at);
      std::uint32_t cp = 0;
      const char* b = line.data() + i + 2;
      auto r = std::from_chars(b, b + digits, cp, 16);
      if (r.ec != std::errc() || r.ptr != b + digits)
        return fail(ErrorCode::kParse, "UNICODE: a \\u escape that is not hex", at);
      if (cp > 0x10ffff) return fail(ErrorCode::kParse, "UNICODE: a code point past U+10FFFF", at);
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
      internal::append_utf8(&owned_, cp);
      i += 1 + digits;
      backslashes = 0;
    } else {
      internal::append_utf8(&owned_, c);
      backslashes = c == '\\' ? backslashes + 1 : 0;
    }
  }
  if (owned_.size() - start >= kUnresolved)
    return fail(ErrorCode::kUnsupported, "UNICODE: a string of 4 GiB or more", at);
  *out = Value{Tag::kStr, static_cast<std::uint32_t>(owned_.size() - start), kOwned | start};
  return {};
}

// Decodes a little-endian two's complement integer of n bytes (LONG1,
// LONG4). A value that needs a ninth byte only to say it is positive
// (2^63 .. 2^64-1, as Python writes a large address) stays an integer,
// marked unsigned; a wider one is kBigInt.
Value decode_long(const unsigned char* p, std::size_t n) {
  if (n == 0) return Value{Tag::kInt, 0, 0};
  std::size_t len = n;
  const bool negative = (p[n - 1] & 0x80) != 0;
  const unsigned char fill = negative ? 0xff : 0x00;
  while (len > 1 && p[len - 1] == fill && ((p[len - 2] & 0x80) != 0) == negative) --len;
  if (len <= 8) {
    std::uint64_t v = load_le(p, len);
    if (negative && len < 8) v |= ~0ull << (8 * len);
    return Value{Tag::kInt, 0, v};
  }
  if (len == 9 && !negative && p[8] == 0) return Value{Tag::kInt, 1, load_le(p, 8)};
  return Value{Tag::kBigInt, 0, 0};
}

Status SnapshotReader::run() {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes_.data());
  const std::size_t n = bytes_.size();
  std::size_t pos = 0;
  // Room for what a snapshot with stacks needs (a trace entry and its
  // stack take 150 bytes and more; every 60 bytes or so get a memo id), so
  // that the two big arrays seldom double: a doubling copies the array and
  // holds both copies at once. Reserved pages that are never written cost
  // address space only; where even that is refused, the arrays just grow.
  try {
    staged_.reserve(n / 128);
    memo_.reserve(n / 64);
  } catch (const std::bad_alloc&) {
  }

  const auto truncated = [&](unsigned char op, std::uint64_t at) {
    return fail(ErrorCode::kParse, std::string(op_name(op)) + ": the pickle ends inside this opcode", at);
  };
  // A text argument: the bytes up to the next newline.
  const auto line = [&](std::string_view* out) {
    const void* nl = std::memchr(p + pos, '\n', n - pos);
    if (nl == nullptr) return false;
    const std::size_t end = static_cast<const unsigned char*>(nl) - p;
    *out = bytes_.substr(pos, end - pos);
    pos = end + 1;
    return true;
  };
  const auto parse_decimal = [](std::string_view s, std::uint64_t* out) {
    auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  const auto push_obj = [&](ObjKind kind, std::uint64_t at) -> Status {
    auto o = new_obj(kind, at);
    if (!o) return o.error();
    push(Value{Tag::kObj, 0, *o});
    return {};
  };

  for (;;) {
    if (pos >= n) return fail(ErrorCode::kParse, "the pickle ends before its STOP opcode", n);
    const std::uint64_t at = pos;
    const unsigned char op = p[pos++];
    switch (op) {
      case kProto: {
        if (pos >= n) return truncated(op, at);
        const unsigned v = p[pos++];
        if (v > 5)
          return fail(ErrorCode::kParse, "pickle protocol " + std::to_string(v) + " (this reader knows 0 to 5)", at);
        break;
      }
      case kFrame: {
        // Framing only groups opcodes for buffered reads: the length is
        // checked, the frame is read like the rest.
        if (n - pos < 8) return truncated(op, at);
        const std::uint64_t len = load_le(p + pos, 8);
        pos += 8;
        if (len > n - pos) return fail(ErrorCode::kParse, "FRAME: its length runs past the end of the pickle", at);
        break;
      }
      case kStop:
        if (!has(1)) return fail(ErrorCode::kParse, "STOP: no value on the stack", at);
        stop_at_ = at;
        return {};
      case kMark: marks_.push_back(stack_.size()); break;
      case kPop:
        if (has(1)) {
          stack_.pop_back();
        } else if (!marks_.empty()) {
          stack_.resize(marks_.back());
          marks_.pop_back();
        } else {
          return underflow(op, at);
        }
        break;
      case kPopMark:
        if (marks_.empty()) return fail(ErrorCode::kParse, "POP_MARK: no MARK to pop", at);
        stack_.resize(marks_.back());
        marks_.pop_back();
        break;
      case kDup:
        if (!has(1)) return underflow(op, at);
        push(Value(stack_.back()));  // a copy: growing the stack moves the original
        break;

      case kNone: push(Value{Tag::kNone, 0, 0}); break;
      case kNewTrue: push(Value{Tag::kBool, 0, 1}); break;
      case kNewFalse: push(Value{Tag::kBool, 0, 0}); break;
      case kBinInt: {
        if (n - pos < 4) return truncated(op, at);
        const auto v = static_cast<std::int64_t>(static_cast<std::int32_t>(load_u32(p + pos)));  // signed
        push(Value{Tag::kInt, 0, static_cast<std::uint64_t>(v)});
        pos += 4;
        break;
      }
      case kBinInt1:
        if (n - pos < 1) return truncated(op, at);
        push(Value{Tag::kInt, 0, p[pos]});
        pos += 1;
        break;
      case kBinInt2:
        if (n - pos < 2) return truncated(op, at);
        push(Value{Tag::kInt, 0, load_le(p + pos, 2)});
        pos += 2;
        break;
      case kLong1:
      case kLong4: {
        const std::size_t w = op == kLong1 ? 1 : 4;
        if (n - pos < w) return truncated(op, at);
        std::uint64_t len = load_le(p + pos, w);
        if (op == kLong4 && (len & 0x80000000u)) return fail(ErrorCode::kParse, "LONG4: a negative length", at);
        pos += w;
        if (len > n - pos) return truncated(op, at);
        push(decode_long(p + pos, len));
        pos += len;
        break;
      }
      case kInt:
      case kLong: {
        std::string_view s;
        if (!line(&s)) return truncated(op, at);
        // Protocol 0 writes True and False as INT 01 and 00.
        if (op == kInt && s == "01") {
          push(Value{Tag::kBool, 0, 1});
          break;
        }
        if (op == kInt && s == "00") {
          push(Value{Tag::kBool, 0, 0});
          break;
        }
        if (op == kLong && s.ends_with('L')) s.remove_suffix(1);
        if (!s.empty() && s.front() == '+') s.remove_prefix(1);
        std::int64_t v = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ptr != s.data() + s.size() || s.empty()) {
          return fail(ErrorCode::kParse, std::string(op_name(op)) + ": expected a decimal integer", at);
        }
        if (r.ec == std::errc::result_out_of_range) {
          push(Value{Tag::kBigInt, 0, 0});
        } else if (r.ec != std::errc()) {
          return fail(ErrorCode::kParse, std::string(op_name(op)) + ": expected a decimal integer", at);
        } else {
          push(Value{Tag::kInt, 0, static_cast<std::uint64_t>(v)});
        }
        break;
      }
      case kBinFloat: {
        if (n - pos < 8) return truncated(op, at);
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[pos + i];  // big-endian
        pos += 8;
        push(Value{Tag::kFloat, 0, bits});
        break;
      }
      case kFloat: {
        std::string_view s;
        if (!line(&s)) return truncated(op, at);
        double v = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
          return fail(ErrorCode::kParse, "FLOAT: expected a decimal number", at);
        }
        push(Value{Tag::kFloat, 0, std::bit_cast<std::uint64_t>(v)});
        break;
      }

      case kShortBinUnicode:
      case kShortBinBytes:
      case kShortBinString:
      case kBinUnicode:
      case kBinBytes:
      case kBinString:
      case kBinUnicode8:
      case kBinBytes8:
      case kByteArray8: {
        const std::size_t w = (op == kShortBinUnicode || op == kShortBinBytes || op == kShortBinString) ? 1
                              : (op == kBinUnicode || op == kBinBytes || op == kBinString)              ? 4
                                                                                                        : 8;
        if (n - pos < w) return truncated(op, at);
        const std::uint64_t len = load_le(p + pos, w);
        if (op == kBinString && (len & 0x80000000u)) return fail(ErrorCode::kParse, "BINSTRING: a negative length", at);
        pos += w;
        const Tag tag = (op == kShortBinUnicode || op == kBinUnicode || op == kBinUnicode8) ? Tag::kStr : Tag::kBytes;
        auto v = make_string(tag, pos, len, at, op);
        if (!v) return v.error();
        push(*v);
        pos += len;
        break;
      }
      case kUnicode: {
        std::string_view s;
        if (!line(&s)) return truncated(op, at);
        Value v;
        TPROF_TRY(decode_unicode_line(s, at, &v));
        push(v);
        break;
      }

      case kEmptyDict: TPROF_TRY(push_obj(ObjKind::kDict, at)); break;
      case kEmptyList: TPROF_TRY(push_obj(ObjKind::kList, at)); break;
      case kEmptySet: TPROF_TRY(push_obj(ObjKind::kSet, at)); break;
      case kEmptyTuple: {
        auto t = make_tuple(stack_.size(), at);
        if (!t) return t.error();
        push(*t);
        break;
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const std::size_t k = op - kTuple1 + 1;
        if (!has(k)) return underflow(op, at);
        auto t = make_tuple(stack_.size() - k, at);
        if (!t) return t.error();
        stack_.resize(stack_.size() - k);
        push(*t);
        break;
      }
      case kTuple:
      case kFrozenSet: {
        if (marks_.empty()) return fail(ErrorCode::kParse, std::string(op_name(op)) + ": no MARK before it", at);
        const std::size_t m = marks_.back();
        auto t = make_tuple(m, at);
        if (!t) return t.error();
        if (op == kFrozenSet && t->u != empty_tuple_) objs_[t->u].kind = ObjKind::kSet;
        stack_.resize(m);
        marks_.pop_back();
        push(*t);
        break;
      }
      case kList:
      case kDict: {
        if (marks_.empty()) return fail(ErrorCode::kParse, std::string(op_name(op)) + ": no MARK before it", at);
        const std::size_t m = marks_.back();
        auto o = new_obj(op == kList ? ObjKind::kList : ObjKind::kDict, at);
        if (!o) return o.error();
        // The new container goes under the items, where APPENDS or
        // SETITEMS would find it, and takes them the same way.
        stack_.insert(m, Value{Tag::kObj, 0, *o});
        TPROF_TRY(op == kList ? append_items(m, m + 1, kAppends, at) : set_items(m, m + 1, kSetItems, at));
        stack_.resize(m + 1);
        marks_.pop_back();
        break;
      }
      case kAppend:
        if (!has(2)) return underflow(op, at);
        TPROF_TRY(append_items(stack_.size() - 2, stack_.size() - 1, op, at));
        stack_.pop_back();
        break;
      case kAppends:
      case kAddItems: {
        if (marks_.empty()) return fail(ErrorCode::kParse, std::string(op_name(op)) + ": no MARK before it", at);
        const std::size_t m = marks_.back();
        marks_.pop_back();
        // The list sits just under the MARK, in the enclosing frame.
        if (m <= base()) return underflow(op, at);
        TPROF_TRY(append_items(m - 1, m, op, at));
        stack_.resize(m);
        break;
      }
      case kSetItem:
        if (!has(3)) return underflow(op, at);
        TPROF_TRY(set_items(stack_.size() - 3, stack_.size() - 2, op, at));
        stack_.resize(stack_.size() - 2);
        break;
      case kSetItems: {
        if (marks_.empty()) return fail(ErrorCode::kParse, "SETITEMS: no MARK before it", at);
        const std::size_t m = marks_.back();
        marks_.pop_back();
        if (m <= base()) return underflow(op, at);
        TPROF_TRY(set_items(m - 1, m, op, at));
        stack_.resize(m);
        break;
      }

      case kPut: {
        std::string_view s;
        std::uint64_t id = 0;
        if (!line(&s)) return truncated(op, at);
        if (!parse_decimal(s, &id)) return fail(ErrorCode::kParse, "PUT: expected a decimal memo id", at);
        if (!has(1)) return underflow(op, at);
        memo_put(id, stack_.back());
        break;
      }
      case kBinPut:
      case kLongBinPut: {
        const std::size_t w = op == kBinPut ? 1 : 4;
        if (n - pos < w) return truncated(op, at);
        const std::uint64_t id = w == 1 ? p[pos] : load_u32(p + pos);
        pos += w;
        if (!has(1)) return underflow(op, at);
        memo_put(id, stack_.back());
        break;
      }
      case kMemoize:
        if (!has(1)) return underflow(op, at);
        memo_put(memo_count_, stack_.back());
        break;
      case kGet:
      case kBinGet:
      case kLongBinGet: {
        std::uint64_t id = 0;
        if (op == kGet) {
          std::string_view s;
          if (!line(&s)) return truncated(op, at);
          if (!parse_decimal(s, &id)) return fail(ErrorCode::kParse, "GET: expected a decimal memo id", at);
        } else {
          const std::size_t w = op == kBinGet ? 1 : 4;
          if (n - pos < w) return truncated(op, at);
          id = w == 1 ? p[pos] : load_u32(p + pos);
          pos += w;
        }
        const Value* v = memo_get(id);
        if (v == nullptr) {
          return fail(ErrorCode::kParse,
                      std::string(op_name(op)) + ": memo id " + std::to_string(id) + " was never stored", at);
        }
        push(*v);
        break;
      }

      case kGlobal: {
        std::string_view module, name;
        if (!line(&module) || !line(&name)) return truncated(op, at);
        Callable c = Callable::kUnknown;
        if (module == "torch.jit._pickle" && is_type_tag_global(name)) {
          c = Callable::kFirstArgument;
        } else if (module == "collections" && name == "OrderedDict") {
          c = Callable::kNewDict;
        }
        push(Value{Tag::kGlobal, 0, static_cast<std::uint64_t>(c)});
        break;
      }
      case kStackGlobal: {
        if (!has(2)) return underflow(op, at);
        const Value name = stack_.back();
        const Value module = stack_[stack_.size() - 2];
        if (name.tag != Tag::kStr || module.tag != Tag::kStr) {
          return fail(ErrorCode::kParse, "STACK_GLOBAL: expected a module and a name as strings", at);
        }
        Callable c = Callable::kUnknown;
        if (str(module) == "torch.jit._pickle" && is_type_tag_global(str(name))) {
          c = Callable::kFirstArgument;
        } else if (str(module) == "collections" && str(name) == "OrderedDict") {
          c = Callable::kNewDict;
        }
        stack_.resize(stack_.size() - 2);
        push(Value{Tag::kGlobal, 0, static_cast<std::uint64_t>(c)});
        break;
      }
      case kReduce: {
        if (!has(2)) return underflow(op, at);
        const Value args = stack_.back();
        const Value fn = stack_[stack_.size() - 2];
        stack_.resize(stack_.size() - 2);
        Value result{Tag::kOpaque, 0, 0};
        const auto c = fn.tag == Tag::kGlobal ? static_cast<Callable>(fn.u) : Callable::kUnknown;
        if (c == Callable::kFirstArgument && args.tag == Tag::kObj && objs_[args.u].kind == ObjKind::kTuple &&
            objs_[args.u].ref != kNoIndex && !lists_[objs_[args.u].ref].items.empty()) {
          result = lists_[objs_[args.u].ref].items.front();
          // A type tag's argument tuple dies here; torch's older pickler
          // made one per dict and list.
          if (objs_[args.u].memo == kNoIndex && args.u != empty_tuple_) retire(static_cast<std::uint32_t>(args.u));
        } else if (c == Callable::kNewDict) {
          auto o = new_obj(ObjKind::kDict, at);
          if (!o) return o.error();
          result = Value{Tag::kObj, 0, *o};
        }
        push(result);
        break;
      }
      case kNewObj:
        if (!has(2)) return underflow(op, at);
        stack_.resize(stack_.size() - 2);
        push(Value{Tag::kOpaque, 0, 0});
        break;
      case kNewObjEx:
        if (!has(3)) return underflow(op, at);
        stack_.resize(stack_.size() - 3);
        push(Value{Tag::kOpaque, 0, 0});
        break;
      case kBuild:
        // The state of an object this reader does not model: dropped.
        if (!has(2)) return underflow(op, at);
        stack_.pop_back();
        break;
      case kInst:
      case kObjOp: {
        if (op == kInst) {
          std::string_view module, name;
          if (!line(&module) || !line(&name)) return truncated(op, at);
        }
        if (marks_.empty()) return fail(ErrorCode::kParse, std::string(op_name(op)) + ": no MARK before it", at);
        const std::size_t m = marks_.back();
        if (op == kObjOp && stack_.size() == m) return underflow(op, at);
        stack_.resize(m);
        marks_.pop_back();
        push(Value{Tag::kOpaque, 0, 0});
        break;
      }
      case kExt1:
      case kExt2:
      case kExt4: {
        const std::size_t w = op == kExt1 ? 1 : op == kExt2 ? 2 : 4;
        if (n - pos < w) return truncated(op, at);
        pos += w;
        push(Value{Tag::kOpaque, 0, 0});
        break;
      }
      case kPersId: {
        std::string_view s;
        if (!line(&s)) return truncated(op, at);
        push(Value{Tag::kOpaque, 0, 0});
        break;
      }
      case kBinPersId:
        if (!has(1)) return underflow(op, at);
        stack_.back() = Value{Tag::kOpaque, 0, 0};
        break;
      case kReadonlyBuffer:
        if (!has(1)) return underflow(op, at);
        break;
      case kNextBuffer:
        return fail(ErrorCode::kUnsupported, "NEXT_BUFFER: out-of-band buffers (pickle protocol 5) are not supported",
                    at);

      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string what = "unknown pickle opcode 0x";
        what += kHex[op >> 4];
        what += kHex[op & 15];
        return fail(ErrorCode::kParse, std::move(what), at);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The snapshot's structure

const Value* SnapshotReader::find(const DictRec& d, std::string_view key) const {
  const Value* found = nullptr;  // the last one wins, as in Python's dict
  for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
    if (key_is(d.items[i], key)) found = &d.items[i + 1];
  }
  return found;
}

const DictRec* SnapshotReader::dict_of(const Value& v) const {
  static const DictRec kEmpty;
  if (v.tag != Tag::kObj || objs_[v.u].kind != ObjKind::kDict) return nullptr;
  return objs_[v.u].ref == kNoIndex ? &kEmpty : &dicts_[objs_[v.u].ref];
}

const ListRec* SnapshotReader::list_of(const Value& v, bool* is_list) const {
  static const ListRec kEmpty;
  *is_list = v.tag == Tag::kObj && (objs_[v.u].kind == ObjKind::kList || objs_[v.u].kind == ObjKind::kTuple);
  if (!*is_list) return nullptr;
  return objs_[v.u].ref == kNoIndex ? &kEmpty : &lists_[objs_[v.u].ref];
}

bool as_int(const Value* v, std::int64_t* out) {
  if (v == nullptr || v->tag != Tag::kInt || v->n != 0) return false;
  *out = static_cast<std::int64_t>(v->u);
  return true;
}

struct DeviceBuild {
  bool has_segments = false;
  std::int64_t allocated = 0;                                 // requested bytes of active blocks at dump time
  std::int64_t reserved = 0;                                  // segment bytes at dump time
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;  // staged_[first, first + count), in trace order
  std::size_t kept = 0;
};

Result<MemoryInput> SnapshotReader::build(const Value& root, std::uint64_t stop_at) {
  MemoryInput in;
  in.source = "snapshot";
  const Value* segments = nullptr;
  const Value* traces = nullptr;
  bool root_is_list = false;
  list_of(root, &root_is_list);
  if (root_is_list) {
    segments = &root;  // torch 1.13: the segments alone
  } else if (const DictRec* d = dict_of(root)) {
    segments = find(*d, "segments");
    traces = find(*d, "device_traces");
    if (segments == nullptr) {
      return fail(ErrorCode::kFormat, "expected the snapshot dict to have \"segments\"", offset_of(root, stop_at));
    }
  } else {
    return fail(
        ErrorCode::kFormat,
        "expected a dict with \"segments\" (torch.cuda.memory._snapshot, torch 2) or a list of segments (torch 1.13)",
        offset_of(root, stop_at));
  }

  std::map<std::int16_t, DeviceBuild> devices;

  // Segments: the allocator's state when the snapshot was taken.
  bool is_list = false;
  const ListRec* seg_list = list_of(*segments, &is_list);
  if (!is_list)
    return fail(ErrorCode::kFormat, "expected \"segments\" to be a list",
                offset_of(*segments, offset_of(root, stop_at)));
  for (std::size_t i = 0; i < seg_list->items.size(); ++i) {
    const Value& sv = seg_list->items[i];
    const std::uint64_t seg_at = offset_of(sv, offset_of(*segments, stop_at));
    const std::string where = "segments[" + std::to_string(i) + "]";
    const DictRec* seg = dict_of(sv);
    if (seg == nullptr) return fail(ErrorCode::kFormat, where + ": expected a dict", seg_at);
    if (objs_[sv.u].flags & kVisited)
      return fail(ErrorCode::kFormat, where + ": the same segment is listed twice", seg_at);
    objs_[sv.u].flags |= kVisited;
    MemorySegmentState st;
    std::int64_t v = 0;
    if (const Value* x = find(*seg, "device"); x != nullptr) {
      if (!as_int(x, &v) || v < 0 || v > std::numeric_limits<std::int16_t>::max()) {
        return fail(ErrorCode::kFormat, where + ": expected \"device\" to be a device index", seg_at);
      }
      st.device_id = static_cast<std::int16_t>(v);
    }
    if (const Value* x = find(*seg, "address"); x != nullptr) {
      if (x->tag != Tag::kInt)
        return fail(ErrorCode::kFormat, where + ": expected \"address\" to be an integer", seg_at);
      st.address = x->u;
    }
    if (!as_int(find(*seg, "total_size"), &st.total_bytes) || st.total_bytes < 0) {
      return fail(ErrorCode::kFormat, where + ": expected \"total_size\" to be a byte count", seg_at);
    }
    if (const Value* x = find(*seg, "segment_type"); x != nullptr && x->tag == Tag::kStr) {
      st.segment_type = std::string(str(*x).substr(0, 32));
    }
    const Value* blocks_v = find(*seg, "blocks");
    const ListRec* blocks = blocks_v != nullptr ? list_of(*blocks_v, &is_list) : nullptr;
    if (blocks == nullptr) return fail(ErrorCode::kFormat, where + ": expected \"blocks\" to be a list", seg_at);
    if (blocks_v->tag == Tag::kObj && objs_[blocks_v->u].ref != kNoIndex) {
      if (objs_[blocks_v->u].flags & kVisited)
        return fail(ErrorCode::kFormat, where + ": its blocks are another segment's", seg_at);
      objs_[blocks_v->u].flags |= kVisited;
    }
    DeviceBuild& dev = devices[st.device_id];
    dev.has_segments = true;
    dev.reserved = sat_add(dev.reserved, st.total_bytes);
    for (std::size_t b = 0; b < blocks->items.size(); ++b) {
      const Value& bv = blocks->items[b];
      const auto bwhere = [&] { return where + ".blocks[" + std::to_string(b) + "]"; };
      const DictRec* blk = dict_of(bv);
      if (blk == nullptr) return fail(ErrorCode::kFormat, bwhere() + ": expected a dict", seg_at);
      std::int64_t size = 0;
      if (!as_int(find(*blk, "size"), &size) || size < 0) {
        return fail(ErrorCode::kFormat, bwhere() + ": expected \"size\" to be a byte count", offset_of(bv, seg_at));
      }
      const Value* state_v = find(*blk, "state");
      if (state_v == nullptr || state_v->tag != Tag::kStr) {
        return fail(ErrorCode::kFormat, bwhere() + ": expected \"state\" to be a string", offset_of(bv, seg_at));
      }
      const std::string_view state = str(*state_v);
      ++st.blocks;
      const bool allocated = state == "active_allocated";
      // "active_awaiting_free" is how torch's docstring spells the state
      // its code writes as "active_pending_free".
      const bool pending = state == "active_pending_free" || state == "active_awaiting_free";
      if (allocated || pending) {
        // The bytes the program asked for, as the trace counts them:
        // requested_size (2.1+), else the newest history entry's real_size
        // (1.13, 2.0: history[0] is the allocation that holds the block,
        // as _memory_viz's _block_extra_legacy reads it), else the block.
        std::int64_t requested = size, r = 0;
        if (as_int(find(*blk, "requested_size"), &r) && r >= 0) {
          requested = r;
        } else if (const Value* h = find(*blk, "history"); h != nullptr) {
          bool hl = false;
          const ListRec* hist = list_of(*h, &hl);
          if (hist != nullptr && !hist->items.empty()) {
            if (const DictRec* h0 = dict_of(hist->items.front());
                h0 != nullptr && as_int(find(*h0, "real_size"), &r) && r >= 0) {
              requested = r;
            }
          }
        }
        // A block whose free waits on another stream's work is still held:
        // the trace gives it back at free_completed, so the replay's total
        // counts it, while the segment's allocated bytes (torch's
        // allocated_size, _memory_viz's calc_active) do not.
        dev.allocated = sat_add(dev.allocated, requested);
        if (allocated) st.allocated_bytes = sat_add(st.allocated_bytes, size);
      } else if (state == "inactive") {
        st.largest_free_bytes = std::max(st.largest_free_bytes, size);
      }
    }
    in.segments.push_back(std::move(st));
  }

  // Device traces: which staged samples each device's list holds, in order.
  if (traces != nullptr && traces->tag != Tag::kNone) {
    const ListRec* per_device = list_of(*traces, &is_list);
    if (!is_list)
      return fail(ErrorCode::kFormat, "expected \"device_traces\" to be a list", offset_of(*traces, stop_at));
    std::vector<std::uint8_t> used(staged_.size(), 0);
    for (std::size_t d = 0; d < per_device->items.size(); ++d) {
      const Value& lv = per_device->items[d];
      const std::uint64_t list_at = offset_of(lv, offset_of(*traces, stop_at));
      const std::string where = "device_traces[" + std::to_string(d) + "]";
      const ListRec* entries = list_of(lv, &is_list);
      if (!is_list) return fail(ErrorCode::kFormat, where + ": expected a list of trace entries", list_at);
      if (entries->items.empty()) continue;
      if (d > static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max())) {
        return fail(ErrorCode::kFormat, where + ": a device index past 32767", list_at);
      }
      if (objs_[lv.u].flags & kVisited)
        return fail(ErrorCode::kFormat, where + ": the same trace is listed twice", list_at);
      objs_[lv.u].flags |= kVisited;
      DeviceBuild& dev = devices[static_cast<std::int16_t>(d)];
      const auto take = [&](std::uint32_t first, std::uint32_t count) -> Status {
        for (std::uint32_t k = 0; k < count; ++k) {
          const std::uint32_t s = first + k;
          if (s >= used.size()) used.resize(staged_.size(), 0);  // staged from a dict just now
          if (used[s]) return fail(ErrorCode::kFormat, where + ": a trace entry that is listed twice", list_at);
          used[s] = 1;
          const MemorySample& x = staged_[s];
          const auto entry = [&] { return where + "[" + std::to_string(x.source) + "]"; };
          if (!bad_.empty()) {
            if (auto b = bad_.find(s); b != bad_.end())
              return fail(ErrorCode::kFormat, entry() + ": " + b->second.second, b->second.first);
          }
          if (is_sample(x.allocated)) {
            if (x.bytes < 0) return fail(ErrorCode::kFormat, entry() + ": expected a \"size\"", list_at);
            ++dev.kept;
          }
        }
        if (!dev.runs.empty() && dev.runs.back().first + dev.runs.back().second == first) {
          dev.runs.back().second += count;
        } else {
          dev.runs.emplace_back(first, count);
        }
        return {};
      };
      for (const Value& x : entries->items) {
        if (x.tag == Tag::kSampleRun) {
          TPROF_TRY(take(static_cast<std::uint32_t>(x.u), x.n));
          continue;
        }
        const std::uint32_t index = x.tag == Tag::kObj ? x.n : 0;
        const std::uint32_t s = sample_of(x, index, offset_of(x, list_at));
        if (s == kSkipEntry) continue;
        if (s == kNoIndex) {
          return fail(ErrorCode::kFormat,
                      where + "[" + std::to_string(index) + "]: expected a trace entry (a dict with \"action\")",
                      offset_of(x, list_at));
        }
        TPROF_TRY(take(s, 1));
      }
    }
  }

  // What build() needs from here on is in `devices`, `staged_` and
  // `sites_`: the machine's memory goes back before the samples are made.
  stack_.release();
  std::vector<Value>().swap(memo_);
  std::unordered_map<std::uint64_t, Value>().swap(memo_far_);
  std::vector<Obj>().swap(objs_);
  std::vector<ListRec>().swap(lists_);
  std::vector<DictRec>().swap(dicts_);
  std::vector<FramePick>().swap(picks_);
  std::vector<FrameRec>().swap(frames_);
  std::vector<std::string>().swap(frame_texts_);
  decltype(site_by_frames_)().swap(site_by_frames_);
  decltype(site_by_stack_)().swap(site_by_stack_);

  // Times: time_us on every sample (torch ≥ 2.1), else the entry's
  // position. A mix cannot be ordered, so it counts as no times.
  bool timed = false;
  std::int64_t last_ns = 0;
  {
    bool all = true, any = false;
    last_ns = std::numeric_limits<std::int64_t>::min();
    for (const auto& [id, dev] : devices) {
      for (const auto& [first, count] : dev.runs) {
        for (std::uint32_t k = 0; k < count; ++k) {
          const MemorySample& x = staged_[first + k];
          if (!is_sample(x.allocated)) continue;
          any = true;
          if (x.ts_ns == kMemoryAbsent) {
            all = false;
          } else {
            last_ns = std::max(last_ns, x.ts_ns);
          }
        }
      }
    }
    timed = any && all;
  }
  in.times_recorded = timed;

  // One device may take staged_ as its own vector: the usual snapshot has
  // one device whose trace is every staged entry, in order.
  std::int16_t mover = -1;
  for (const auto& [id, dev] : devices) {
    if (dev.runs.size() == 1 && dev.runs[0].first == 0 && dev.runs[0].second == staged_.size()) {
      mover = id;
      break;
    }
  }

  // Turns the device's staged entries into samples: the entry's position
  // in its trace is its source (and, without times, its time); a time
  // that goes back is clock jitter (the allocator records under its lock,
  // in order), so it is held at the previous one rather than reordering.
  const auto emit = [&](const DeviceBuild& dev, std::vector<MemorySample>* out, bool in_place) {
    std::int64_t prev = std::numeric_limits<std::int64_t>::min();
    std::size_t w = 0;
    for (const auto& [first, count] : dev.runs) {
      for (std::uint32_t k = 0; k < count; ++k) {
        const MemorySample x = staged_[first + k];
        if (!is_sample(x.allocated)) continue;
        MemorySample y;
        y.ts_ns = timed ? std::max(prev, x.ts_ns) : static_cast<std::int64_t>(x.source);
        prev = y.ts_ns;
        y.addr = x.addr;
        y.site = x.site;
        y.source = x.source;
        // reserved holds the change of reserved bytes until the replay.
        switch (x.allocated) {
          case kActAlloc:
            y.bytes = x.bytes;
            y.reserved = 0;
            break;
          case kActFreeCompleted:
            y.bytes = -x.bytes;
            y.reserved = 0;
            break;
          case kActSegmentAlloc:
          case kActSegmentMap:
            y.bytes = 0;
            y.reserved = x.bytes;
            break;
          default:
            y.bytes = 0;
            y.reserved = -x.bytes;
            break;  // segment_free, segment_unmap
        }
        if (in_place) {
          (*out)[w++] = y;
        } else {
          out->push_back(y);
        }
      }
    }
    if (in_place) out->resize(w);
  };

  // The replay: the totals after the last entry are the dump-time state;
  // each entry's are those after it minus its own change. The trace ring
  // may have dropped its oldest entries: the totals stay absolute anyway.
  const auto replay = [](const DeviceBuild& dev, std::vector<MemorySample>* s) {
    std::int64_t allocated = dev.allocated, reserved = dev.reserved;
    for (std::size_t k = s->size(); k-- > 0;) {
      MemorySample& x = (*s)[k];
      const std::int64_t dr = x.reserved;
      x.allocated = allocated;
      x.reserved = reserved;
      allocated = sat_sub(allocated, x.bytes);
      reserved = sat_sub(reserved, dr);
    }
  };

  std::vector<MemoryDeviceInput> out;
  for (auto& [id, dev] : devices) {
    if (id == mover) continue;
    MemoryDeviceInput di;
    di.device_type = 1;  // c10::DeviceType::CUDA: the caching allocator's snapshots are CUDA's (and ROCm's)
    di.device_id = id;
    di.samples.reserve(dev.kept);
    emit(dev, &di.samples, false);
    replay(dev, &di.samples);
    out.push_back(std::move(di));
  }
  if (mover >= 0) {
    DeviceBuild& dev = devices[mover];
    MemoryDeviceInput di;
    di.device_type = 1;
    di.device_id = mover;
    emit(dev, &staged_, true);
    di.samples = std::move(staged_);
    replay(dev, &di.samples);
    out.push_back(std::move(di));
  }
  std::vector<MemorySample>().swap(staged_);
  // A device without trace samples (torch 1.13, or history not recorded)
  // still has its dump-time state: one sample of it, not an empty device,
  // so that its totals are reported.
  for (MemoryDeviceInput& di : out) {
    if (!di.samples.empty()) continue;
    const DeviceBuild& dev = devices[di.device_id];
    MemorySample x;
    x.ts_ns = timed ? last_ns : 0;
    x.allocated = dev.allocated;
    x.reserved = dev.reserved;
    di.samples.push_back(x);
  }
  std::sort(out.begin(), out.end(),
            [](const MemoryDeviceInput& a, const MemoryDeviceInput& b) { return a.device_id < b.device_id; });
  in.devices = std::move(out);
  in.sites = std::move(sites_);
  return in;
}

Result<MemoryInput> SnapshotReader::read() {
  TPROF_TRY(run());
  const Value root = stack_.back();
  return build(root, stop_at_);
}

}  // namespace

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 &&
         static_cast<unsigned char>(bytes[1]) >= 2 && static_cast<unsigned char>(bytes[1]) <= 5;
}

Result<MemoryInput> read_memory_snapshot(std::string_view bytes, const std::string& name) {
  try {
    SnapshotReader reader(bytes, name);
    return reader.read();
  } catch (const std::bad_alloc&) {
    // What the reader holds grows with the snapshot (1.5 times its size
    // with the file's pages, bench/memory_snapshot_bench.cc).
    return Error(ErrorCode::kUnsupported,
                 "not enough memory to read this " + std::to_string(bytes.size() >> 20) + " MB snapshot", name, -1);
  }
}

}  // namespace tprof
