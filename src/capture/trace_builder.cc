// Records of one window -> tprof::Trace.
//
//   records read in place (collect() copies nothing)
//   ── all threads and the device source's memory records: memory totals
//      in time order (allocated, and CUDA's reservations), flows with both ends
//   ── per thread: the window's records (span ends read once; spans still
//      open at stop() left out, counted), in start order (already so but
//      for late-written NVTX ranges: a linear check, else a stable sort),
//      arguments by their scope ── one pass: name/category/kind through
//      per-site caches, ticks -> ns, columns written by index (capacity
//      reserved once), args through one JsonWriter into one buffer that
//      becomes the trace's source
//   ── CUDA graph nodes created in the window -> innermost open scope on
//      their thread ── into the process-wide GraphNodeScopes
//   ── device batch: API calls -> innermost open scope on their thread
//      (External id, user annotation) ── device work -> its launch by
//      correlation id ── ac2g flows ── gpu_user_annotation spans ── work
//      replayed from a graph -> the scope its node was created in
//   ── device memory records -> [memory] instants on the calling thread
//   ── lane metadata (M events) ── assemble_trace (shared with the reader)
//
// stop() pays this once per event, so nothing here allocates, copies or
// hashes a string per event.
#include "src/capture/trace_builder.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "src/base/file.h"
#include "src/base/json_writer.h"
#include "src/base/saturate.h"
#include "src/trace/assemble.h"
#include "src/trace/event_parser.h"
#include "src/trace/kineto_keys.h"
#include "tprof/record_function.h"

namespace tprof::internal {

namespace {

constexpr const char* kVersion = "0.1.0";

// Kineto's keys and names are src/trace/kineto_keys.h's; these are tprof's own.
constexpr JsonKey kVersionKey("version"), kDroppedEvents("droppedEvents"), kDroppedShapes("droppedShapes"),
    kDroppedDeviceRecords("droppedDeviceRecords"), kActivityUnavailable("activityUnavailable"), kValue("value"),
    kUnfinishedScopes("unfinishedScopes");
using kineto::kAddr;
using kineto::kBytes;
using kineto::kDeviceId;
using kineto::kDeviceType;
using kineto::kExternalId;
using kineto::kInputDims;
using kineto::kLabels;
using kineto::kSortIndex;
using kineto::kTotalAllocated;
using kineto::kTotalReserved;
constexpr const JsonKey& kNameKey = kineto::kMetaName;
// The scope categories the recorder's call sites name are Kineto's.
static_assert(std::string_view(kCpuOp) == kineto::kCatCpuOp &&
              std::string_view(kUserAnnotation) == kineto::kCatUserAnnotation);

// What the builder orders a thread's records by: start tick, then the
// longer first (Kineto's op order); equal keys keep recording order.
struct Item {
  std::uint64_t start, end;
  std::uint32_t record;
};

bool starts_before(const Item& x, const Item& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; }

// Records are taken when a span begins and an instant happens, so a
// thread's items arrive in this order already; the check is linear, and
// only records written late (an NVTX start/end range, on the thread that
// ended it) make the stable sort run.
void order_items(std::vector<Item>* items) {
  for (std::size_t j = 1; j < items->size(); ++j) {
    if (starts_before((*items)[j], (*items)[j - 1])) {
      std::stable_sort(items->begin(), items->end(), starts_before);
      return;
    }
  }
}

bool is_span(const Record& r) {
  return r.kind == kRecordScope || r.kind == kRecordDynamicScope || r.kind == kRecordStep;
}

// A memory device, (c10::DeviceType, index), as one map key.
std::uint32_t memory_device_key(std::int16_t type, std::int16_t id) {
  return (static_cast<std::uint32_t>(static_cast<std::uint16_t>(type)) << 16) | static_cast<std::uint16_t>(id);
}

// The totals a device memory record is written with; `written` is false
// for records that are not [memory] events of their own.
struct DeviceMemoryTotals {
  std::int64_t allocated = 0, reserved = 0;
  bool written = false;
};

// What CUDA has reserved on one device, as far as the window saw: the
// bytes of its live allocations outside pools (cudaMalloc: what it
// allocates is what the device gives), plus each pool's reservation as
// CUPTI last gave it (cudaMallocAsync's pools keep freed memory).
struct Reservation {
  std::int64_t plain = 0;
  std::map<std::uint64_t, std::int64_t> pools;  // base address -> bytes
  std::int64_t total() const {
    std::int64_t t = plain;
    for (const auto& [base, bytes] : pools) t = internal::sat_add(t, bytes);
    return t;
  }
};

// A [memory] event's args, in the order torch 1.13-2.0 writes them.
void write_memory_args(JsonWriter& w, const MemoryRecord& m) {
  w.key(kDeviceType);
  w.value_int(m.device_type);
  w.key(kDeviceId);
  w.value_int(m.device_id);
  w.key(kAddr);
  w.value_uint(m.addr);
  w.key(kBytes);
  w.value_int(m.bytes);
  w.key(kTotalAllocated);
  w.value_int(m.total_allocated);
  w.key(kTotalReserved);
  w.value_int(m.total_reserved);
}

class Builder {
 public:
  Builder(const TickConversion& clock, const CaptureInfo& info) : clock_(clock), info_(info), aw_(&args_) {}

  Trace run(const std::vector<ThreadRecords>& threads, const DeviceBatch& device);

 private:
  // A recorded scope, for linking API calls to the scope open around them.
  struct Scope {
    std::int64_t start, end;
    std::int64_t external_id;
    std::uint32_t event;
    bool user_annotation;  // a user_annotation other than ProfilerStep#N
  };
  // What an API call is linked to: the innermost scope open around it, and
  // the innermost user annotation (its gpu_user_annotation span).
  struct Link {
    std::int64_t external_id = -1;
    std::uint32_t scope = kNoIndex;       // event index of the innermost scope
    std::uint32_t annotation = kNoIndex;  // event index of the user annotation
  };
  // A time on a thread to link to the scope open then; `index` is its Link's.
  struct LinkQuery {
    std::int64_t thread, ts;
    std::uint32_t index;
  };
  // Where a graph node was created: its scope's and user annotation's
  // names, the annotation's start (which instance of the name), and its
  // event when it is in this window.
  struct GraphScope {
    StrId scope = kEmptyStr, annotation = kEmptyStr;
    std::int64_t annotation_start_ns = 0;
    std::uint32_t annotation_event = kNoIndex;
  };
  struct NodeCreated {
    std::int64_t thread, ts;
    std::uint64_t node;
  };
  struct Site {
    const ScopeSite* site = nullptr;
    StrId name = kEmptyStr, cat = kEmptyStr;
    EventKind kind = EventKind::kOther;
  };

  // The next row. Rows are added 4096 at a time (zero-filled while they
  // are about to be written, so they are still in cache) within the
  // capacity reserved up front.
  std::uint32_t next_row() {
    if (n_ == rows_) {
      rows_ = n_ < capacity_ ? std::min<std::uint32_t>(rows_ + 4096, capacity_) : rows_ + 4096;
      t_.events.resize(rows_);
    }
    return n_++;
  }
  std::uint32_t add_event(Phase ph, StrId name, StrId cat, std::uint32_t lane, std::int64_t ts, std::int64_t dur) {
    const std::uint32_t e = next_row();
    EventColumns& c = t_.events;
    c.ts_ns[e] = ts;
    c.dur_ns[e] = dur;
    c.name[e] = name;
    c.cat[e] = cat;
    c.lane[e] = lane;
    c.phase[e] = ph;
    c.kind[e] = ph == Phase::kMetadata ? EventKind::kMetadata : kind_of(cat);
    return e;
  }
  EventKind kind_of(StrId cat) {
    if (cat >= cat_kinds_.size()) cat_kinds_.resize(cat + 1, -1);
    if (cat_kinds_[cat] < 0) cat_kinds_[cat] = static_cast<std::int8_t>(kind_from_category(t_.str(cat)));
    return static_cast<EventKind>(cat_kinds_[cat]);
  }
  // Writes event e's args object through aw_ as the next element of one
  // array holding every event's args, and points e at it; store_args()
  // makes that array the trace's source. (One array, not a value per
  // event: the writer then copies its stage out every 16 KiB, not per event.)
  template <class Fill>
  void set_args(std::uint32_t e, Fill&& fill) {
    aw_.begin_object();
    const std::uint64_t start = aw_.size() - 1;  // at the '{'
    fill(aw_);
    aw_.end_object();
    t_.events.args_ref[e] = args_ref::make(start, aw_.size() - start, false);
  }
  void store_args();
  // An M event and its payload for assemble_trace (which sets the lane's
  // and process's names and sort indices from it, as for a file).
  void metadata(std::string_view what, std::uint32_t lane, const JsonKey& key, std::string_view value) {
    const std::uint32_t e =
        add_event(Phase::kMetadata, t_.strings.intern(what), kEmptyStr, lane, info_.window_start_ns, 0);
    set_args(e, [&](JsonWriter& w) {
      w.key(key);
      w.value_string(value);
    });
    meta_.push_back({e, t_.strings.intern(value), 0, false});
  }
  void sort_index(std::string_view what, std::uint32_t lane, std::int64_t value) {
    const std::uint32_t e =
        add_event(Phase::kMetadata, t_.strings.intern(what), kEmptyStr, lane, info_.window_start_ns, 0);
    set_args(e, [&](JsonWriter& w) {
      w.key(kSortIndex);
      w.value_int(value);
    });
    meta_.push_back({e, kEmptyStr, value, true});
  }
  // An event with args {"External id": ext (when linked), <members>}.
  // With `graph_scope` (work replayed from a CUDA graph), "graph node
  // scope": its name after them.
  std::uint32_t add_linked_event(Phase ph, StrId name, StrId cat, std::uint32_t lane, std::int64_t ts,
                                 std::int64_t dur, std::int64_t ext, std::string_view members,
                                 StrId graph_scope = kEmptyStr) {
    const std::uint32_t e = add_event(ph, name, cat, lane, ts, dur);
    t_.events.external_id[e] = ext;
    if (ext < 0 && members.empty() && graph_scope == kEmptyStr) return e;
    set_args(e, [&](JsonWriter& w) {
      if (ext >= 0) {
        w.key(kExternalId);
        w.value_int(ext);
      }
      if (!members.empty()) w.members_raw(members);
      if (graph_scope != kEmptyStr) {
        w.key(kineto::kGraphNodeScope);
        w.value_string(t_.str(graph_scope));
      }
    });
    return e;
  }
  void add_flow(Phase ph, std::uint32_t lane, std::int64_t ts, std::uint64_t id) {
    const std::uint32_t e = add_event(ph, ac2g_, ac2g_, lane, ts, 0);
    t_.events.kind[e] = EventKind::kFlow;
    t_.events.flow_id[e] = static_cast<std::int64_t>(id);
    if (ph == Phase::kFlowEnd) t_.events.flags[e] = kFlagBindEnclosing;
  }
  std::uint32_t thread_lane(std::int64_t tid) {
    return t_.lane_for(TraceId{info_.pid, kEmptyStr, false}, TraceId{tid, kEmptyStr, false}, LaneKind::kCpu);
  }
  void link_to_scopes(std::vector<LinkQuery>* queries, std::vector<Link>* links);
  void link_api_calls(const DeviceBatch& d, const std::vector<std::uint32_t>& api, std::vector<Link>* links);
  void link_graph_nodes();
  const GraphScope& graph_scope(std::uint64_t node);
  void add_device(const DeviceBatch& d);
  void add_device_memory(const DeviceBatch& d, const std::vector<DeviceMemoryTotals>& totals);
  const Site& site(const ScopeSite* s);
  std::optional<std::pair<StrId, StrId>> dynamic(std::uint64_t key);
  // The name of a static argument key (TPROF_ARG), interned once per builder.
  StrId arg_key(const ArgKey* k);
  void write_scope_args(std::span<const Record> rs, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& args,
                        std::uint32_t scope, JsonWriter& w);

  const TickConversion& clock_;
  const CaptureInfo& info_;
  Trace t_;
  std::uint32_t n_ = 0;     // events written
  std::uint32_t rows_ = 0;  // rows the columns have
  std::uint32_t capacity_ = 0;  // rows reserved: every record and the metadata
  std::vector<Site> sites_ = std::vector<Site>(64);  // open addressing on the site pointer
  std::size_t site_count_ = 0;
  std::vector<std::int8_t> cat_kinds_;                 // per category id: EventKind, -1 unknown
  struct Dynamic {
    std::uint64_t key = 0;  // the full key the entry was read for
    std::pair<StrId, StrId> name_cat{kEmptyStr, kEmptyStr};
  };
  std::vector<Dynamic> dynamic_;  // per runtime name id (the key's low 32 bits)
  std::unordered_map<const ArgKey*, StrId> arg_keys_;  // static argument keys (TPROF_ARG)
  std::uint64_t stale_names_ = 0;                      // dynamic scopes whose key did not resolve
  std::string args_;
  JsonWriter aw_;
  std::vector<MetaRecord> meta_;
  std::unordered_map<std::int64_t, std::vector<Scope>> scopes_;  // per OS thread id, in start order
  StrId ac2g_ = kEmptyStr;
  // CUDA graph nodes: created in the window (kRecordGraphNode), copies made
  // in it (copy -> original), the scope each created node is linked to,
  // and what each replayed node resolved to.
  std::vector<NodeCreated> nodes_created_;
  std::unordered_map<std::uint64_t, std::uint64_t> node_copies_;
  std::unordered_map<std::uint64_t, Link> node_links_;
  std::unordered_map<std::uint64_t, GraphScope> graph_scopes_;
};

// Hands every event's args to the trace without copying them: args_
// becomes the trace's source buffer (tprof/trace.h: an args_ref without the
// owned bit is an offset into the source), as the reader does with a file.
void Builder::store_args() {
  auto store = std::make_shared<const std::string>(std::move(args_));
  t_.attach_source(store, *store);
}

const Builder::Site& Builder::site(const ScopeSite* s) {
  std::size_t mask = sites_.size() - 1;
  auto slot = [&](const ScopeSite* p) {
    return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(p) >> 3) * 0x9e3779b97f4a7c15ull >> 40) & mask;
  };
  std::size_t i = slot(s);
  for (; sites_[i].site != nullptr; i = (i + 1) & mask) {
    if (sites_[i].site == s) return sites_[i];
  }
  if ((site_count_ + 1) * 2 > sites_.size()) {
    std::vector<Site> bigger(sites_.size() * 2);
    mask = bigger.size() - 1;
    for (const Site& x : sites_) {
      if (x.site == nullptr) continue;
      std::size_t j = slot(x.site);
      while (bigger[j].site != nullptr) j = (j + 1) & mask;
      bigger[j] = x;
    }
    sites_.swap(bigger);
    i = slot(s);
    while (sites_[i].site != nullptr) i = (i + 1) & mask;
  }
  Site& added = sites_[i];
  added.site = s;
  added.name = t_.strings.intern(s->name);
  added.cat = t_.strings.intern(s->category != nullptr ? s->category : kUserAnnotation);
  added.kind = kind_of(added.cat);
  ++site_count_;
  return added;
}

StrId Builder::arg_key(const ArgKey* k) {
  auto [it, added] = arg_keys_.try_emplace(k, kEmptyStr);
  if (added) it->second = t_.strings.intern(k->name != nullptr ? k->name : "");
  return it->second;
}

std::optional<std::pair<StrId, StrId>> Builder::dynamic(std::uint64_t key) {
  const auto id = static_cast<std::uint32_t>(key);
  if (id < dynamic_.size() && dynamic_[id].name_cat.second != kEmptyStr && dynamic_[id].key == key) {
    return dynamic_[id].name_cat;
  }
  std::string_view name, category;
  if (!dynamic_lookup(info_.names, key, &name, &category)) return std::nullopt;
  if (id >= dynamic_.size()) dynamic_.resize(id + 1);
  dynamic_[id] = {key, {t_.strings.intern(name), t_.strings.intern(category)}};
  return dynamic_[id].name_cat;
}

// The arguments recorded for the scope at record `scope` (`args` is sorted
// by scope record), in the order they were given.
void Builder::write_scope_args(std::span<const Record> rs,
                               const std::vector<std::pair<std::uint32_t, std::uint32_t>>& args, std::uint32_t scope,
                               JsonWriter& w) {
  auto it = std::lower_bound(args.begin(), args.end(), std::make_pair(scope, std::uint32_t{0}));
  for (; it != args.end() && it->first == scope; ++it) {
    const Record& a = rs[it->second];
    const std::uint16_t type = a.e & kArgTypeMask;
    std::optional<StrId> key;
    if ((a.e & kArgStaticKey) != 0) {
      key = arg_key(reinterpret_cast<const ArgKey*>(static_cast<std::uintptr_t>(a.a)));
    } else if (const auto k = dynamic(a.a)) {
      key = k->first;
    }
    std::optional<std::pair<StrId, StrId>> text;
    if (type == kArgString) text = dynamic(a.b);
    if (!key || (type == kArgString && !text)) {  // interned in an earlier window (cannot happen in one scope's life)
      ++stale_names_;
      continue;
    }
    w.key(t_.str(*key));
    switch (type) {
      case kArgInt:
        w.value_int(static_cast<std::int64_t>(a.b));
        break;
      case kArgUint:
        w.value_uint(a.b);
        break;
      case kArgDouble: {
        double v;
        std::memcpy(&v, &a.b, sizeof v);
        w.value_double(v);
        break;
      }
      case kArgBool:
        w.value_bool(a.b != 0);
        break;
      case kArgString:
        w.value_string(t_.str(text->first));
        break;
      default:
        w.value_null();
        break;
    }
  }
}

Trace Builder::run(const std::vector<ThreadRecords>& threads, const DeviceBatch& device) {
  t_.meta.producer = Producer::kTprof;
  std::uint64_t dropped = 0, refused = 0, dropped_shapes = 0;
  std::size_t total = 4 + 2 * threads.size();  // process and thread metadata
  for (const ThreadRecords& tr : threads) {
    dropped += tr.dropped;
    refused += tr.refused;
    dropped_shapes += tr.dropped_shapes;
    total += tr.records.size();
  }
  // Each device event, its flow, its share of the GPU annotation spans;
  // each device memory record.
  total += 3 * device.events.size() + device.memory.size();
  // Sized once and written by index; trimmed to what was written at the end.
  t_.events.reserve(total, /*prefault=*/true);
  capacity_ = static_cast<std::uint32_t>(std::min<std::size_t>(total, 0xffffffffu));
  args_.reserve(32 * total);  // "External id" args: about 20 bytes
  prefault_for_writing(args_.data(), args_.capacity());
  aw_.begin_array();
  // Kineto's top level as PyTorch 2.x writes it: ts relative to
  // baseTimeNanoseconds (µs with three decimals stay exact as doubles, which
  // epoch µs near 1.8e15 are not), displayTimeUnit, the devices.
  const std::int64_t base = info_.window_start_ns - info_.window_start_ns % 1000000000;
  t_.meta.base_time_ns = base;
  t_.meta.top_level.emplace_back("schemaVersion", "1");
  {
    std::string props = "[";
    for (std::size_t i = 0; i < device.device_properties.size(); ++i) {
      if (i > 0) props += ", ";
      props += device.device_properties[i];
    }
    props += "]";
    t_.meta.top_level.emplace_back("deviceProperties", std::move(props));
  }
  for (const auto& kv : device.top_level) t_.meta.top_level.push_back(kv);
  t_.meta.top_level.emplace_back("displayTimeUnit", "\"ms\"");
  t_.meta.top_level.emplace_back("baseTimeNanoseconds", std::to_string(base));
  // The user's (Profiler::add_metadata); a key the device source wrote wins.
  // Not a structured binding: clang before 16 cannot capture one in the lambda.
  for (const auto& entry : info_.metadata) {
    const bool taken = std::any_of(t_.meta.top_level.begin(), t_.meta.top_level.end(),
                                   [&](const auto& kv) { return kv.first == entry.first; });
    if (!taken) t_.meta.top_level.push_back(entry);
  }

  const TraceId pid{info_.pid, kEmptyStr, false};
  const std::uint32_t process_lane = t_.lane_for(pid, TraceId{0, kEmptyStr, false}, LaneKind::kOther);
  metadata(kineto::kProcessName, process_lane, kNameKey, info_.process_name);
  metadata(kineto::kProcessLabels, process_lane, kLabels, "CPU");
  sort_index(kineto::kProcessSortIndex, process_lane, info_.pid);

  // One pass over every thread's records for what crosses threads:
  // "Total Allocated" is the running sum per device over all threads and
  // the device source's memory records, in time order; a flow is written
  // when both its ends are in the window.
  // Hooks alone (no device memory records) are ordered by tick, as
  // recorded; with device memory records, all by epoch ns.
  constexpr std::uint32_t kDeviceMemory = ~std::uint32_t{0};  // Mem::thread of a device memory record
  const bool device_memory = !device.memory.empty();
  struct Mem {
    std::int64_t ns;               // epoch ns; 0 for hooks without device memory records
    std::uint64_t tick;            // a hook's tick (orders equal ns as recorded); 0 for device memory
    std::uint32_t thread, record;  // kDeviceMemory: record indexes device.memory
  };
  std::vector<Mem> mems;
  std::unordered_map<std::uint64_t, std::uint8_t> flow_ends;  // id -> bit 0 begins, bit 1 ends
  bool graph_nodes = false;  // some thread recorded a CUDA graph node
  for (std::size_t ti = 0; ti < threads.size(); ++ti) {
    const std::span<const Record> rs = threads[ti].records;
    for (std::size_t ri = 0; ri < rs.size(); ++ri) {
      if (rs[ri].kind == kRecordMemory) {
        mems.push_back({device_memory ? clock_(rs[ri].b) : 0, rs[ri].b, static_cast<std::uint32_t>(ti),
                        static_cast<std::uint32_t>(ri)});
      } else if (rs[ri].kind == kRecordFlow && rs[ri].b >= info_.window_start_ticks &&
                 rs[ri].b <= info_.window_end_ticks) {
        flow_ends[rs[ri].a] |= static_cast<std::uint8_t>(rs[ri].e == 0 ? 1 : 2);
      } else if (rs[ri].kind == kRecordGraphNode) {
        graph_nodes = true;
      }
    }
  }
  // The program's own hooks, per device they recorded on (a CUDA device
  // among them: the program reports its allocator's blocks there).
  std::set<std::uint32_t> hooked;
  if (device_memory) {
    for (const Mem& m : mems) {
      const std::uint16_t e = threads[m.thread].records[m.record].e;
      hooked.insert(memory_device_key(static_cast<std::int16_t>(e >> 8), static_cast<std::int8_t>(e & 0xff)));
    }
  }
  for (std::uint32_t i = 0; i < device.memory.size(); ++i) {
    const DeviceMemoryEvent& x = device.memory[i];
    if (x.ts_ns < info_.window_start_monotonic_ns) continue;  // a warmup's
    mems.push_back({clock_.monotonic_to_epoch_ns + x.ts_ns, 0, kDeviceMemory, i});
  }
  std::vector<std::vector<std::int64_t>> total_after(threads.size());     // per thread, per record
  std::vector<std::vector<std::int64_t>> reserved_after(threads.size());  // per thread, per record; empty: 0
  std::vector<DeviceMemoryTotals> device_totals(device.memory.size());
  if (!mems.empty()) {
    std::stable_sort(mems.begin(), mems.end(),
                     [](const Mem& a, const Mem& b) { return a.ns != b.ns ? a.ns < b.ns : a.tick < b.tick; });
    for (std::size_t ti = 0; ti < threads.size(); ++ti) {
      total_after[ti].resize(threads[ti].records.size());
      if (device_memory) reserved_after[ti].resize(threads[ti].records.size());
    }
    std::map<std::uint32_t, std::int64_t> running;
    std::map<std::uint32_t, Reservation> reserved;  // CUDA's, per device, from its memory records
    for (const Mem& m : mems) {
      if (m.thread != kDeviceMemory) {
        const Record& r = threads[m.thread].records[m.record];
        const auto type = static_cast<std::int16_t>(r.e >> 8);
        const std::uint32_t key = memory_device_key(type, static_cast<std::int8_t>(r.e & 0xff));
        std::int64_t& sum = running[key];
        sum = internal::sat_add(sum, static_cast<std::int64_t>(r.c));  // sizes are the caller's: any int64
        total_after[m.thread][m.record] = sum;
        // torch's "Total Reserved" of a CUDA device is what the device gave
        // the allocator: CUDA's allocations there, when they are recorded.
        if (device_memory) {
          const auto it = reserved.find(key);
          reserved_after[m.thread][m.record] = type == 1 && it != reserved.end() ? it->second.total() : 0;
        }
        continue;
      }
      const DeviceMemoryEvent& x = device.memory[m.record];
      const std::uint32_t key = memory_device_key(x.device_type, x.device_id);
      Reservation& rv = reserved[key];
      if (x.pool != 0 && x.pool_bytes >= 0) {
        // An allocation or release from a pool gives the pool's size then;
        // a pool's own record (created, trimmed, destroyed) never grows it.
        auto [it, added] = rv.pools.try_emplace(x.pool, x.pool_bytes);
        if (!added) it->second = x.bytes != 0 ? x.pool_bytes : std::min(it->second, x.pool_bytes);
        if (it->second == 0) rv.pools.erase(it);
      } else {
        rv.plain = internal::sat_add(rv.plain, x.bytes);
      }
      if (x.bytes == 0) continue;  // a pool's reservation changed: no event
      // On a CUDA device the program's allocator reports (record_alloc),
      // CUDA's allocations are that allocator's segments: its reservation,
      // as torch's caching allocator reports blocks as allocated and
      // segments as reserved. Elsewhere they are the allocations.
      if (x.device_type == 1 && hooked.count(key) != 0) continue;
      std::int64_t& sum = running[key];
      sum = internal::sat_add(sum, x.bytes);
      // torch writes 0 for CPU memory's reservation (pinned host memory here).
      device_totals[m.record] = {sum, x.device_type == 1 ? rv.total() : 0, true};
    }
  }

  const StrId user_annotation = t_.strings.intern(kUserAnnotation);
  const StrId memory_name = t_.strings.intern(kineto::kMemoryName);
  const StrId memory_cat = t_.strings.intern(kineto::kCatCpuInstantEvent);
  const EventKind user_annotation_kind = kind_of(user_annotation);
  std::int64_t external_id = 0;
  std::uint64_t unfinished = 0;  // spans still open when the window stopped
  std::vector<Item> items;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> scope_args;  // (scope's record, arg record)
  EventColumns& cols = t_.events;
  const bool link_scopes = !device.events.empty() || graph_nodes;
  for (std::size_t ti = 0; ti < threads.size(); ++ti) {
    const ThreadRecords& tr = threads[ti];
    const std::span<const Record> rs = tr.records;
    // Payload references are word numbers in the window: the spilled words
    // first (restore_spilled), then the arena's chunk in place.
    const std::span<const std::uint64_t> spilled_payload = tr.spilled_payload;
    const std::span<const std::uint64_t> live_payload = tr.payload;
    const std::uint64_t payload_base = tr.payload_base;
    const std::uint64_t payload_size = payload_base + live_payload.size();
    auto payload = [&](std::size_t p) {
      return p < payload_base ? (p < spilled_payload.size() ? spilled_payload[p] : 0) : live_payload[p - payload_base];
    };
    const std::uint32_t lane = thread_lane(tr.tid);
    const std::string thread_label = "thread " + std::to_string(tr.tid) + " (" + tr.name + ")";
    metadata(kineto::kThreadName, lane, kNameKey, thread_label);
    sort_index(kineto::kThreadSortIndex, lane, tr.tid);
    // The scopes are kept only to link GPU API calls and graph nodes to
    // them (add_device, link_graph_nodes): a CPU-only window does not
    // write them (32 bytes an event of fresh memory in a process's first
    // window).
    std::vector<Scope>& scopes = scopes_[tr.tid];
    if (link_scopes) {
      scopes.reserve(scopes.size() + rs.size());
      prefault_for_writing(scopes.data(), scopes.capacity() * sizeof(Scope));
    }
    items.reserve(rs.size());
    prefault_for_writing(items.data(), items.capacity() * sizeof(Item));
    // The window's records of this thread, each span's end read once (its
    // thread may still be writing it: one still open at stop() ends later).
    items.clear();
    scope_args.clear();
    for (std::uint32_t ri = 0; ri < rs.size(); ++ri) {
      const Record& r = rs[ri];
      if (r.kind == kRecordArg) {
        scope_args.emplace_back(static_cast<std::uint32_t>(r.c), ri);
        continue;
      }
      if (r.kind == kRecordSpanEnd) continue;  // restore_spilled put its tick in its span's record
      if (r.kind == kRecordGraphNode) {
        if (r.b < info_.window_start_ticks || r.b > info_.window_end_ticks) continue;
        if (r.e == 0) {
          nodes_created_.push_back({tr.tid, clock_(r.b), r.a});
        } else {
          node_copies_.try_emplace(r.a, r.c);
        }
        continue;
      }
      std::uint64_t end = r.b;
      if (is_span(r)) {
        end = load_end(r);
        if (r.b < info_.window_start_ticks) continue;  // began before the window: not the window's
        if (end == 0 || end > info_.window_end_ticks) {
          ++unfinished;
          continue;
        }
      } else if (r.kind != kRecordMemory && (r.b < info_.window_start_ticks || r.b > info_.window_end_ticks)) {
        continue;
      }
      items.push_back({r.b, end, ri});
    }
    order_items(&items);
    // Arguments by their scope's record, in the order they were given.
    std::stable_sort(scope_args.begin(), scope_args.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const Item& item : items) {
      const std::uint32_t ri = item.record;
      const Record& r = rs[ri];
      if (r.kind == kRecordMemory) {
        const std::uint32_t e = add_event(Phase::kInstant, memory_name, memory_cat, lane, clock_(r.b), 0);
        cols.kind[e] = EventKind::kMemory;
        cols.flags[e] = kFlagInstantThread;
        MemoryRecord m;
        m.event = e;
        m.bytes = static_cast<std::int64_t>(r.c);
        m.addr = r.a;
        m.device_type = static_cast<std::int16_t>(r.e >> 8);
        m.device_id = static_cast<std::int16_t>(static_cast<std::int8_t>(r.e & 0xff));
        m.total_allocated = total_after[ti][ri];
        // 0 but on a CUDA device whose CUDA allocations are recorded: tprof's
        // hooks see no allocator pool of their own.
        m.total_reserved = reserved_after[ti].empty() ? 0 : reserved_after[ti][ri];
        // Written below as torch writes them.
        m.has_total_allocated = m.has_total_reserved = true;
        t_.memory.push_back(m);
        set_args(e, [&](JsonWriter& w) { write_memory_args(w, m); });
        continue;
      }
      if (r.kind == kRecordInstant || r.kind == kRecordCounter) {
        StrId name = kEmptyStr, cat = kEmptyStr;
        if (r.e == 0) {
          const Site& s = site(reinterpret_cast<const ScopeSite*>(static_cast<std::uintptr_t>(r.a)));
          name = s.name;
          cat = s.cat;
        } else if (const auto d = dynamic(r.a)) {
          std::tie(name, cat) = *d;
        } else {
          ++stale_names_;
          continue;
        }
        if (r.kind == kRecordInstant) {
          const std::uint32_t e = add_event(Phase::kInstant, name, cat, lane, clock_(r.b), 0);
          cols.flags[e] = kFlagInstantThread;
        } else {
          const std::uint32_t e = add_event(Phase::kCounter, name, cat, lane, clock_(r.b), 0);
          double value;
          std::memcpy(&value, &r.c, sizeof value);
          set_args(e, [&](JsonWriter& w) {
            w.key(kValue);
            w.value_double(value);
          });
        }
        continue;
      }
      if (r.kind == kRecordFlow) {
        auto it = flow_ends.find(r.a);
        if (it == flow_ends.end() || it->second != 3) continue;  // its other end is in another window
        const auto d = dynamic(r.c);
        if (!d) continue;  // named in an earlier window: its begin is not in this one
        const std::uint32_t e =
            add_event(r.e == 0 ? Phase::kFlowStart : Phase::kFlowEnd, d->first, d->second, lane, clock_(r.b), 0);
        cols.kind[e] = EventKind::kFlow;
        cols.flow_id[e] = static_cast<std::int64_t>(r.a & 0x7fffffffffffffffull);
        cols.flags[e] = kFlagBindEnclosing;
        continue;
      }
      StrId name = kEmptyStr, cat = user_annotation;
      EventKind kind = user_annotation_kind;
      if (r.kind == kRecordScope) {
        const Site& s = site(reinterpret_cast<const ScopeSite*>(static_cast<std::uintptr_t>(r.a)));
        name = s.name;
        cat = s.cat;
        kind = s.kind;
      } else if (r.kind == kRecordDynamicScope) {
        const auto d = dynamic(r.a);
        if (!d) {  // a stale key (a race with the previous window's release) or no memory to intern
          ++stale_names_;
          continue;
        }
        std::tie(name, cat) = *d;
        kind = kind_of(cat);
      } else if (r.kind == kRecordStep) {
        name = t_.strings.intern("ProfilerStep#" + std::to_string(static_cast<std::int64_t>(r.a)));
      } else {
        continue;
      }
      const std::int64_t ts = clock_(r.b);
      const std::uint32_t e = next_row();
      cols.ts_ns[e] = ts;
      cols.dur_ns[e] = clock_(item.end) - ts;
      cols.name[e] = name;
      cols.cat[e] = cat;
      cols.lane[e] = lane;
      cols.phase[e] = Phase::kComplete;
      cols.kind[e] = kind;
      cols.external_id[e] = ++external_id;
      const bool annotation = kind == EventKind::kUserAnnotation && r.kind != kRecordStep;
      if (link_scopes) scopes.push_back({ts, cols.ts_ns[e] + cols.dur_ns[e], external_id, e, annotation});
      set_args(e, [&](JsonWriter& w) {
        w.key(kExternalId);
        w.value_int(external_id);
        if (r.d != 0 && r.d - 1 < payload_size) {
          // [count][rank][dims...]...
          std::size_t p = r.d - 1;
          const std::uint64_t count = payload(p++);
          w.key(kInputDims);
          w.begin_array();
          for (std::uint64_t s = 0; s < count && p < payload_size; ++s) {
            w.begin_array();
            const std::uint64_t rank = payload(p++);
            for (std::uint64_t k = 0; k < rank && p < payload_size; ++k) {
              w.value_int(static_cast<std::int64_t>(payload(p++)));
            }
            w.end_array();
          }
          w.end_array();
        }
        if (!scope_args.empty()) write_scope_args(rs, scope_args, ri, w);
      });
    }
  }
  link_graph_nodes();
  add_device(device);
  add_device_memory(device, device_totals);
  t_.meta.dropped_events = dropped + refused + device.dropped + stale_names_ + info_.lost_events;
  // Why a requested activity, or another recorder's events, are missing:
  // diagnostics on this trace, and kept in the file (the "tprof" key) for
  // every reader of it.
  std::vector<std::string> unavailable = device.problems;
  unavailable.insert(unavailable.end(), info_.unrecordable.begin(), info_.unrecordable.end());
  if (info_.cuda_requested && !info_.cuda_available) {
    unavailable.insert(unavailable.begin(),
                       "CUDA activity was requested, but this tprof was built without CUPTI: CPU only");
  }
  {
    std::string tprof_key;
    JsonWriter w(&tprof_key);
    w.begin_object();
    w.key(kVersionKey);
    w.value_string(kVersion);
    w.key(kDroppedEvents);
    w.value_uint(t_.meta.dropped_events);
    w.key(kDroppedShapes);
    w.value_uint(dropped_shapes);
    w.key(kDroppedDeviceRecords);
    w.value_uint(device.dropped);
    w.key(kUnfinishedScopes);
    w.value_uint(unfinished);
    if (!unavailable.empty()) {
      w.key(kActivityUnavailable);
      w.begin_array();
      for (const std::string& why : unavailable) w.value_string(why);
      w.end_array();
    }
    w.end_object();
    t_.meta.top_level.emplace_back("tprof", std::move(tprof_key));
  }
  for (const std::string& why : unavailable) t_.diagnostics.add(DiagnosticCode::kActivityUnavailable, -1, why);
  t_.events.resize(n_);
  aw_.end_array();  // complete: all of it is in args_
  store_args();
  if (dropped > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(dropped) + " events dropped: thread buffers were full "
                                                 "(raise ProfilerOptions::buffer_events_per_thread)");
  }
  for (const std::string& why : info_.capture_problems) t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1, why);
  if (refused > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(refused) +
                           " events dropped: recorded from a signal handler that interrupted tprof's recorder on "
                           "its thread");
  }
  t_.meta.dropped_shapes = dropped_shapes;
  t_.meta.unfinished_scopes = unfinished;
  if (dropped_shapes > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(dropped_shapes) + " kept scopes lost their input shapes: payload arenas were full "
                                                        "(raise ProfilerOptions::payload_words_per_thread)");
  }
  if (unfinished > 0) {
    t_.diagnostics.add(DiagnosticCode::kUnfinishedScopes, -1,
                       std::to_string(unfinished) + " scopes were still open when the window ended: left out of the trace");
  }
  if (device.dropped > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(device.dropped) + " GPU activity records dropped by the tracer (buffers full)");
  }
  if (stale_names_ > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(stale_names_) +
                           " scopes with runtime names dropped: named across a window boundary, or no memory to "
                           "intern the name");
  }
  assemble_trace(&t_, meta_, {});
  return std::move(t_);
}

void Builder::link_to_scopes(std::vector<LinkQuery>* queries, std::vector<Link>* links) {
  // Per thread, the times in order against the scopes in start order: a
  // stack of the scopes open at that time.
  std::stable_sort(queries->begin(), queries->end(), [](const LinkQuery& a, const LinkQuery& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.ts < b.ts;
  });
  std::vector<std::uint32_t> open;        // indices into the thread's scopes
  std::vector<std::uint32_t> annotation;  // innermost user annotation at each depth, or kNoIndex
  for (std::size_t q = 0; q < queries->size();) {
    const std::int64_t tid = (*queries)[q].thread;
    std::size_t end = q;
    while (end < queries->size() && (*queries)[end].thread == tid) ++end;
    auto it = scopes_.find(tid);
    if (it == scopes_.end()) {
      q = end;
      continue;
    }
    const std::vector<Scope>& scopes = it->second;
    open.clear();
    annotation.clear();
    std::size_t next = 0;
    for (; q < end; ++q) {
      const std::int64_t m = (*queries)[q].ts;
      while (next < scopes.size() && scopes[next].start <= m) {
        while (!open.empty() && scopes[open.back()].end <= scopes[next].start) {
          open.pop_back();
          annotation.pop_back();
        }
        const std::uint32_t below = annotation.empty() ? kNoIndex : annotation.back();
        annotation.push_back(scopes[next].user_annotation ? static_cast<std::uint32_t>(next) : below);
        open.push_back(static_cast<std::uint32_t>(next++));
      }
      while (!open.empty() && scopes[open.back()].end <= m) {
        open.pop_back();
        annotation.pop_back();
      }
      if (open.empty()) continue;
      Link& l = (*links)[(*queries)[q].index];
      l.external_id = scopes[open.back()].external_id;
      l.scope = scopes[open.back()].event;
      if (annotation.back() != kNoIndex) l.annotation = scopes[annotation.back()].event;
    }
  }
}

void Builder::link_api_calls(const DeviceBatch& d, const std::vector<std::uint32_t>& api, std::vector<Link>* links) {
  // By midpoint, not start: scope times are calibrated ticks and API times
  // CLOCK_MONOTONIC, which agree to well under the microseconds a launch
  // call lasts.
  links->assign(d.events.size(), Link{});
  const std::int64_t shift = clock_.monotonic_to_epoch_ns;
  std::vector<LinkQuery> queries;
  queries.reserve(api.size());
  for (const std::uint32_t i : api) {
    const DeviceEvent& x = d.events[i];
    queries.push_back({x.thread, shift + x.start_ns + (x.end_ns - x.start_ns) / 2, i});
  }
  link_to_scopes(&queries, links);
}

void Builder::link_graph_nodes() {
  // A node's creation is a record of its thread (the recorder's tick, the
  // scopes' clock): the scope open at that tick is exact.
  if (nodes_created_.empty() && node_copies_.empty()) return;
  std::vector<LinkQuery> queries;
  queries.reserve(nodes_created_.size());
  for (std::uint32_t k = 0; k < nodes_created_.size(); ++k) {
    queries.push_back({nodes_created_[k].thread, nodes_created_[k].ts, k});
  }
  std::vector<Link> links(nodes_created_.size());
  link_to_scopes(&queries, &links);
  for (std::uint32_t k = 0; k < nodes_created_.size(); ++k) {
    if (links[k].scope != kNoIndex) node_links_.try_emplace(nodes_created_[k].node, links[k]);
  }
  // For later windows: the names, not the events (those are this trace's).
  // A copy's own creation (inside cudaGraphInstantiate) is not where its
  // work was captured: its original's is.
  if (info_.graph_nodes == nullptr) return;
  for (const auto& [copy, original] : node_copies_) info_.graph_nodes->add_clone(copy, original);
  for (const auto& [node, link] : node_links_) {
    if (node_copies_.count(node) != 0) continue;
    const bool annotated = link.annotation != kNoIndex;
    info_.graph_nodes->add_node(node, t_.str(t_.events.name[link.scope]),
                                annotated ? t_.str(t_.events.name[link.annotation]) : std::string_view(),
                                annotated ? t_.events.ts_ns[link.annotation] : 0);
  }
}

const Builder::GraphScope& Builder::graph_scope(std::uint64_t node) {
  auto [it, added] = graph_scopes_.try_emplace(node);
  if (!added) return it->second;
  GraphScope& g = it->second;
  // The node a replayed activity names is usually the executable graph's
  // copy: its original was created where the work was captured.
  std::uint64_t root = node;
  for (int i = 0; i < GraphNodeScopes::kMaxCopies; ++i) {
    const auto copy = node_copies_.find(root);
    const std::uint64_t next = copy != node_copies_.end() ? copy->second
                               : info_.graph_nodes != nullptr ? info_.graph_nodes->original(root)
                                                              : root;
    if (next == root) break;
    root = next;
  }
  if (const auto link = node_links_.find(root); link != node_links_.end()) {
    g.scope = t_.events.name[link->second.scope];
    if (link->second.annotation != kNoIndex) {
      g.annotation = t_.events.name[link->second.annotation];
      g.annotation_start_ns = t_.events.ts_ns[link->second.annotation];
      g.annotation_event = link->second.annotation;
    }
    return g;
  }
  // Created before this window (while an earlier one recorded): by name.
  GraphNodeScopes::Names names;
  if (info_.graph_nodes != nullptr && info_.graph_nodes->find(root, &names)) {
    if (!names.scope.empty()) g.scope = t_.strings.intern(names.scope);
    if (!names.annotation.empty()) g.annotation = t_.strings.intern(names.annotation);
    g.annotation_start_ns = names.annotation_start_ns;
  }
  return g;
}

void Builder::add_device(const DeviceBatch& d) {
  if (d.events.empty()) return;
  ac2g_ = t_.strings.intern(kineto::kCatAc2g);
  const std::int64_t shift = clock_.monotonic_to_epoch_ns;
  std::vector<std::uint32_t> api, work;
  for (std::uint32_t i = 0; i < d.events.size(); ++i) {
    const DeviceEvent& x = d.events[i];
    if (x.start_ns < info_.window_start_monotonic_ns) continue;  // a warmup's
    const bool host = x.kind == DeviceEventKind::kRuntime || x.kind == DeviceEventKind::kDriver;
    (host ? api : work).push_back(i);
  }
  auto by_start = [&](std::uint32_t a, std::uint32_t b) {
    const DeviceEvent &x = d.events[a], &y = d.events[b];
    return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
  };
  // Kineto logs a "Stream Wait Event" only on a stream that shows device
  // work in the window (CuptiActivityProfiler::logDeferredEvents).
  std::set<std::pair<std::int32_t, std::int64_t>> work_streams;
  for (const std::uint32_t i : work) {
    const DeviceEvent& x = d.events[i];
    if (x.kind == DeviceEventKind::kKernel || x.kind == DeviceEventKind::kMemcpy ||
        x.kind == DeviceEventKind::kMemset) {
      work_streams.emplace(x.device, x.stream);
    }
  }
  std::erase_if(work, [&](std::uint32_t i) {
    const DeviceEvent& x = d.events[i];
    return x.kind == DeviceEventKind::kSync && d.name(x) == "Stream Wait Event" &&
           work_streams.count({x.device, x.stream}) == 0;
  });
  std::stable_sort(api.begin(), api.end(), by_start);
  std::stable_sort(work.begin(), work.end(), by_start);
  std::vector<Link> links;
  link_api_calls(d, api, &links);

  // The launch of each piece of device work: the API call with its
  // correlation id (one call may launch many: a graph launch).
  std::unordered_map<std::uint64_t, std::uint32_t> launch_of;
  for (const std::uint32_t i : api) {
    if (d.events[i].correlation != 0) launch_of.emplace(d.events[i].correlation, i);
  }
  // Looked up once per piece of work: the API pass writes flow starts for
  // the calls that launched something, the work pass the flow ends.
  std::vector<std::uint32_t> launch(work.size(), kNoIndex);
  std::vector<std::uint8_t> launched(d.events.size(), 0);
  for (std::size_t w = 0; w < work.size(); ++w) {
    const std::uint64_t corr = d.events[work[w]].correlation;
    auto it = corr != 0 ? launch_of.find(corr) : launch_of.end();
    if (it == launch_of.end()) continue;
    launch[w] = it->second;
    launched[it->second] = 1;
  }

  // By DeviceEventKind.
  static constexpr std::string_view kCategory[] = {
      kineto::kCatKernel,      kineto::kCatGpuMemcpy,  kineto::kCatGpuMemset, kineto::kCatCudaSync,
      kineto::kCatCudaRuntime, kineto::kCatCudaDriver, kineto::kCatOverhead};
  StrId cats[std::size(kCategory)];
  for (std::size_t k = 0; k < std::size(kCategory); ++k) cats[k] = t_.strings.intern(kCategory[k]);
  std::unordered_map<std::string_view, StrId> names;
  auto name_of = [&](const DeviceEvent& x) {
    const std::string_view n = d.name(x);
    auto [it, added] = names.try_emplace(n, kEmptyStr);
    if (added) it->second = t_.strings.intern(n);
    return it->second;
  };
  auto set_correlation = [&](std::uint32_t e, const DeviceEvent& x) {
    if (x.correlation != 0) t_.events.correlation[e] = static_cast<std::int64_t>(x.correlation);
  };

  for (const std::uint32_t i : api) {
    const DeviceEvent& x = d.events[i];
    const std::uint32_t lane = thread_lane(x.thread);
    const std::int64_t ts = shift + x.start_ns;
    const std::uint32_t e = add_linked_event(Phase::kComplete, name_of(x), cats[static_cast<int>(x.kind)], lane, ts,
                                             x.end_ns - x.start_ns, links[i].external_id, d.args(x));
    set_correlation(e, x);
    if (launched[i]) add_flow(Phase::kFlowStart, lane, ts, x.correlation);
  }

  // GPU user annotation spans: per (annotation, device, stream), from the
  // first to the last device activity its launches started (Kineto's).
  struct Span {
    std::int64_t start, end;
  };
  std::map<std::tuple<std::uint32_t, std::int32_t, std::int64_t>, Span> spans;
  // Work replayed from graphs: per (capture's annotation: name and start,
  // device, stream, graph launch), with the annotation's External id in
  // this window (-1: captured in an earlier one). By name and start, not
  // by name alone: two ranges of one name (a GEMM, an add, a GEMM) are two
  // spans around their own work.
  struct ReplaySpan {
    Span span;
    std::int64_t external_id;
  };
  std::map<std::tuple<StrId, std::int64_t, std::int32_t, std::int64_t, std::uint64_t>, ReplaySpan> replay_spans;
  std::vector<std::int32_t> devices;
  std::set<std::uint32_t> stream_lanes;  // lanes Kineto names "stream N" (its recordStream)
  for (std::size_t w = 0; w < work.size(); ++w) {
    const DeviceEvent& x = d.events[work[w]];
    const bool overhead = x.kind == DeviceEventKind::kOverhead;
    // A context synchronization has no stream (-1): Kineto writes its tid
    // as a positive number (output_json.cpp sanitizeTid: 1) and names no
    // row for it.
    const bool streamless = x.kind == DeviceEventKind::kSync && x.stream < 0;
    // Overhead: where Kineto puts it (pid -1, tid 0: no device).
    const std::uint32_t lane =
        overhead ? t_.lane_for(TraceId{-1, kEmptyStr, false}, TraceId{0, kEmptyStr, false}, LaneKind::kOther)
                 : t_.lane_for(TraceId{x.device, kEmptyStr, false},
                               TraceId{streamless ? -x.stream : x.stream, kEmptyStr, false}, LaneKind::kGpu);
    if (!overhead && !streamless) stream_lanes.insert(lane);
    if (!overhead && x.device >= 0 && std::find(devices.begin(), devices.end(), x.device) == devices.end()) {
      devices.push_back(x.device);
    }
    const Link link = launch[w] != kNoIndex ? links[launch[w]] : Link{};
    const std::int64_t ts = shift + x.start_ns;
    // Replayed from a CUDA graph: its launch is the graph launch (External
    // id, flow); the scope it was captured in is an arg and, for a user
    // annotation, a span of its own per replay, never an External id (the
    // capture's op may be in another window, and its time is not this).
    const GraphScope* captured = x.graph_node != 0 && !overhead ? &graph_scope(x.graph_node) : nullptr;
    const std::uint32_t e =
        add_linked_event(Phase::kComplete, name_of(x), cats[static_cast<int>(x.kind)], lane, ts,
                         x.end_ns - x.start_ns, link.external_id, d.args(x),
                         captured != nullptr ? captured->scope : kEmptyStr);
    set_correlation(e, x);
    if (launch[w] != kNoIndex) add_flow(Phase::kFlowEnd, lane, ts, x.correlation);
    if (link.annotation != kNoIndex && !overhead && x.kind != DeviceEventKind::kSync) {
      auto [s, added] = spans.try_emplace({link.annotation, x.device, x.stream}, Span{ts, ts + x.end_ns - x.start_ns});
      if (!added) {
        s->second.start = std::min(s->second.start, ts);
        s->second.end = std::max(s->second.end, ts + x.end_ns - x.start_ns);
      }
    }
    // The capture's annotation: one span per replay (the graph launch's
    // correlation id), unless it is the launch's own annotation (captured
    // and replayed inside the same range: that span is already there).
    if (captured != nullptr && captured->annotation != kEmptyStr && x.kind != DeviceEventKind::kSync &&
        (captured->annotation_event == kNoIndex || captured->annotation_event != link.annotation)) {
      const std::int64_t ext =
          captured->annotation_event != kNoIndex ? t_.events.external_id[captured->annotation_event] : -1;
      auto [s, added] = replay_spans.try_emplace(
          {captured->annotation, captured->annotation_start_ns, x.device, x.stream, x.correlation},
          ReplaySpan{Span{ts, ts + x.end_ns - x.start_ns}, ext});
      if (!added) {
        s->second.span.start = std::min(s->second.span.start, ts);
        s->second.span.end = std::max(s->second.span.end, ts + x.end_ns - x.start_ns);
      }
    }
  }
  const StrId gpu_annotation = t_.strings.intern(kineto::kCatGpuUserAnnotation);
  for (const auto& [key, span] : spans) {
    const auto& [annotation, dev, stream] = key;
    const std::uint32_t lane =
        t_.lane_for(TraceId{dev, kEmptyStr, false}, TraceId{stream, kEmptyStr, false}, LaneKind::kGpu);
    // Kineto starts the span 1 ns early and ends it 1 ns late, so that
    // viewers draw it around its first and last activity.
    add_linked_event(Phase::kComplete, t_.events.name[annotation], gpu_annotation, lane, span.start - 1,
                     span.end - span.start + 2, t_.events.external_id[annotation], {});
  }
  for (const auto& [key, replay] : replay_spans) {
    const auto& [name, annotation_start, dev, stream, correlation] = key;
    const std::uint32_t lane =
        t_.lane_for(TraceId{dev, kEmptyStr, false}, TraceId{stream, kEmptyStr, false}, LaneKind::kGpu);
    add_linked_event(Phase::kComplete, name, gpu_annotation, lane, replay.span.start - 1,
                     replay.span.end - replay.span.start + 2, replay.external_id, {});
  }

  // Lane metadata as Kineto writes it: a process per device, a row per stream.
  std::sort(devices.begin(), devices.end());
  for (const std::int32_t dev : devices) {
    const std::uint32_t lane =
        t_.lane_for(TraceId{dev, kEmptyStr, false}, TraceId{0, kEmptyStr, false}, LaneKind::kOther);
    metadata(kineto::kProcessName, lane, kNameKey, info_.process_name);
    metadata(kineto::kProcessLabels, lane, kLabels, "GPU " + std::to_string(dev));
    sort_index(kineto::kProcessSortIndex, lane, 5000000 + dev);
  }
  for (const std::uint32_t l : stream_lanes) {
    const Lane& lane = t_.lanes[l];
    const std::int64_t stream = lane.tid.num;
    // "stream 7 " with Kineto's trailing space.
    metadata(kineto::kThreadName, l, kNameKey, "stream " + std::to_string(stream) + " ");
    sort_index(kineto::kThreadSortIndex, l, stream);
  }
  // API calls on threads that recorded no scope: name their rows too.
  for (const std::uint32_t i : api) {
    const std::int64_t tid = d.events[i].thread;
    if (scopes_.count(tid) != 0) continue;
    scopes_[tid];  // once per thread
    const std::uint32_t lane = thread_lane(tid);
    metadata(kineto::kThreadName, lane, kNameKey, "thread " + std::to_string(tid));
    sort_index(kineto::kThreadSortIndex, lane, tid);
  }
}

// Each device memory record that is a [memory] event of its own: an
// instant on the thread that made the call (its API record's, by
// correlation id). A record whose call was not recorded goes to the
// process's main thread (tid = pid), where a program's setup allocates and
// where its rows begin: still in the device's totals and views, only not
// under the op that made it.
void Builder::add_device_memory(const DeviceBatch& d, const std::vector<DeviceMemoryTotals>& totals) {
  const StrId name = t_.strings.intern(kineto::kMemoryName);
  const StrId cat = t_.strings.intern(kineto::kCatCpuInstantEvent);
  const std::int64_t shift = clock_.monotonic_to_epoch_ns;
  for (std::uint32_t i = 0; i < d.memory.size(); ++i) {
    if (!totals[i].written) continue;
    const DeviceMemoryEvent& x = d.memory[i];
    const std::int64_t tid = x.thread != 0 ? x.thread : info_.pid;
    const std::uint32_t lane = thread_lane(tid);
    const std::uint32_t e = add_event(Phase::kInstant, name, cat, lane, shift + x.ts_ns, 0);
    t_.events.kind[e] = EventKind::kMemory;
    t_.events.flags[e] = kFlagInstantThread;
    MemoryRecord m;
    m.event = e;
    m.bytes = x.bytes;
    m.addr = x.addr;
    m.device_type = x.device_type;
    m.device_id = x.device_id;
    m.total_allocated = totals[i].allocated;
    m.total_reserved = totals[i].reserved;
    m.has_total_allocated = m.has_total_reserved = true;
    t_.memory.push_back(m);
    set_args(e, [&](JsonWriter& w) { write_memory_args(w, m); });
    // A thread that recorded nothing else: its row is named too.
    if (scopes_.count(tid) == 0) {
      scopes_[tid];
      metadata(kineto::kThreadName, lane, kNameKey, "thread " + std::to_string(tid));
      sort_index(kineto::kThreadSortIndex, lane, tid);
    }
  }
}

}  // namespace

Trace build_trace(const std::vector<ThreadRecords>& threads, const DeviceBatch& device, const TickConversion& clock,
                  const CaptureInfo& info) {
  return Builder(clock, info).run(threads, device);
}

}  // namespace tprof::internal
