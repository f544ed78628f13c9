// tprof._tprof: the C++ half of the Python module `tprof` (pybind11).
//
// It reads traces (GIL released), hands out the Trace's columns as
// read-only NumPy views that keep the Trace alive, and runs the library's
// analyses (GIL released), returning what the CLI returns: the reports'
// JSON text (the stable contract of `--format json`, parsed on the Python
// side) or the text itself. The DataFrames are built in tprof/*.py from
// these arrays and documents; no Python code loops over events.
//
//   import tprof._tprof as _t
//   t = _t.read("trace.json")            # raises tprof.TraceError
//   ts = t.column("ts_ns")               # numpy int64 view, base is t
//   _t.table(t, format="json")
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python/trace_object.h"
#include "src/analyze/diagnose_context.h"
#include "src/analyze/nesting.h"
#include "src/base/json_writer.h"
#include "src/base/radix_sort.h"
#include "src/base/safe_text.h"
#include "src/trace/json_value.h"
#include "src/trace/select.h"
#include "tprof/causal.h"
#include "tprof/compare.h"
#include "tprof/diagnose.h"
#include "tprof/info.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/memory.h"
#include "tprof/ranks.h"
#include "tprof/read.h"
#include "tprof/step_events.h"
#include "tprof/steps.h"
#include "tprof/table.h"
#include "tprof/write.h"

namespace py = pybind11;

namespace tprof::python {

namespace {

PyObject* g_trace_error = nullptr;  // tprof.TraceError (a ValueError)

std::string_view error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kFormat: return "format";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

// `s` with every byte that is not part of well-formed UTF-8 replaced by
// U+FFFD, one per byte: the rule of the CLI's text filter and of the JSON
// writer (src/base/safe_text.h, json_writer.h), so a name reads the same
// in Python as in `tprof ... --format json`. Python's own "replace" handler
// would differ (one U+FFFD per maximal invalid subpart). True when
// something was replaced.
bool replace_invalid_utf8(std::string_view s, std::string* out) {
  const char* p = s.data();
  const char* end = p + s.size();
  const char* copied = p;
  bool replaced = false;
  while (p < end) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      continue;
    }
    const int n = internal::utf8_sequence_length(p, end);
    if (n > 0) {
      p += n;
      continue;
    }
    if (!replaced) out->clear();
    out->append(copied, static_cast<std::size_t>(p - copied)).append("\xef\xbf\xbd");
    replaced = true;
    copied = ++p;
  }
  if (replaced) out->append(copied, static_cast<std::size_t>(end - copied));
  return replaced;
}

// Text as a Python str, never raising UnicodeDecodeError: trace names are
// whatever the program wrote; an invalid byte becomes U+FFFD (above).
py::str to_str(std::string_view s) {
  std::string fixed;
  if (replace_invalid_utf8(s, &fixed)) s = fixed;
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// A report's text as the CLI prints it: through the CLI's filter (control
// characters escaped, invalid UTF-8 as U+FFFD), so t.table(text=True) is
// `tprof table`'s output byte for byte whatever the names hold.
py::str text_str(const std::string& text) {
  return internal::needs_safe_text(text) ? to_str(internal::safe_text(text)) : to_str(text);
}

// A file name as Python spells it (os.fsdecode: undecodable bytes as
// surrogate escapes, so os.fsencode gives the name back).
py::str fs_str(const std::string& path) {
  PyObject* o = PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// A path argument (str, bytes or os.PathLike) as the bytes the kernel gets,
// converted as os.open converts it: a NUL byte raises ValueError ("embedded
// null byte") instead of cutting the name short, and a str is encoded with
// the file system encoding (surrogate escapes included).
std::string fs_path(const py::handle& path) {
  PyObject* bytes = nullptr;
  if (PyUnicode_FSConverter(path.ptr(), &bytes) == 0) throw py::error_already_set();
  const py::bytes owned = py::reinterpret_steal<py::bytes>(bytes);
  return std::string(PyBytes_AS_STRING(bytes), static_cast<std::size_t>(PyBytes_GET_SIZE(bytes)));
}

// The name a trace read from memory goes by in errors and Trace.path
// (a file object's `name`: str, bytes, os.PathLike, or anything str() of
// which names it), as bytes like a path's; only a label, so a NUL is kept.
std::string name_bytes(const py::handle& name) {
  py::object o = py::reinterpret_borrow<py::object>(name);
  if (!PyBytes_Check(o.ptr()) && !PyUnicode_Check(o.ptr())) {
    PyObject* fs = PyOS_FSPath(o.ptr());
    if (fs != nullptr) {
      o = py::reinterpret_steal<py::object>(fs);
    } else {
      PyErr_Clear();
      o = py::str(o);
    }
  }
  if (PyUnicode_Check(o.ptr())) {
    PyObject* b = PyUnicode_EncodeFSDefault(o.ptr());
    if (b == nullptr) throw py::error_already_set();
    o = py::reinterpret_steal<py::object>(b);
  }
  return std::string(PyBytes_AS_STRING(o.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(o.ptr())));
}

// Raises the Error as tprof.TraceError (kInvalidArgument as ValueError),
// with the file, byte offset and code as attributes. Holds the GIL. The
// text quotes bytes of the file: invalid UTF-8 in it becomes U+FFFD; the
// path attribute is the file's name as os.fsdecode gives it.
[[noreturn]] void raise_error(const Error& e) {
  if (e.code() == ErrorCode::kInvalidArgument) {
    PyErr_SetObject(PyExc_ValueError, to_str(e.to_string()).ptr());
    throw py::error_already_set();
  }
  py::object type = py::reinterpret_borrow<py::object>(g_trace_error);
  py::object exc = type(to_str(e.to_string()));
  exc.attr("path") = e.path().empty() ? py::object(py::none()) : py::object(fs_str(e.path()));
  exc.attr("offset") = e.byte_offset() < 0 ? py::object(py::none()) : py::object(py::int_(e.byte_offset()));
  exc.attr("code") = py::str(std::string(error_code_name(e.code())));
  exc.attr("reason") = to_str(e.message());
  PyErr_SetObject(g_trace_error, exc.ptr());
  throw py::error_already_set();
}

// A read-only 1-D view of `n` values of type T at `data`, keeping `owner`
// (the Python Trace) alive: NumPy's `base` is the owner.
template <typename T>
py::array view(const py::object& owner, const void* data, std::size_t n) {
  static const T kEmpty{};
  if (data == nullptr) data = &kEmpty;  // an empty column: NumPy wants a pointer
  py::array a(py::dtype::of<T>(), {static_cast<py::ssize_t>(n)}, {static_cast<py::ssize_t>(sizeof(T))},
              static_cast<const T*>(data), owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

ReadOptions read_options(int threads, bool strict, const std::string& step_range) {
  ReadOptions o;
  o.threads = threads;
  o.strict = strict;
  o.step_range = step_range;
  return o;
}

// A trace read, or its error raised; a step_range the trace lacks is a
// ValueError that lists the repeated ranges it has.
std::shared_ptr<PyTrace> wrap(Result<Trace> r, std::string path) {
  if (!r) raise_error(r.error().with_path(path));
  if (const std::string problem = step_range_problem(*r); !problem.empty()) {
    throw py::value_error(path + ": step_range \"" + r->meta.step_range + "\": " + problem);
  }
  return std::make_shared<PyTrace>(std::move(*r), std::move(path));
}

std::shared_ptr<PyTrace> read_path(const py::object& path_arg, int threads, bool strict,
                                   const std::string& step_range) {
  const std::string path = fs_path(path_arg);
  std::optional<Result<Trace>> r;
  {
    py::gil_scoped_release nogil;
    r.emplace(read_trace(path, read_options(threads, strict, step_range)));
  }
  return wrap(std::move(*r), path);
}

// A buffer export (PEP 3118) held until destruction: while it is held, the
// exporter keeps the memory where it is (a bytearray refuses to resize with
// BufferError, a memoryview to be released).
class BufferExport {
 public:
  explicit BufferExport(const py::handle& obj) {
    // Any exporter answers a request for strides, suboffsets and format
    // (PyBUF_FULL_RO), so what it is, not how it would refuse a simpler
    // request, decides below. A released memoryview raises ValueError here.
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_FULL_RO) != 0) throw py::error_already_set();
    held_ = true;
  }
  ~BufferExport() { release(); }
  BufferExport(const BufferExport&) = delete;
  BufferExport& operator=(const BufferExport&) = delete;
  void release() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
  }
  const Py_buffer& view() const { return view_; }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// True when nothing can change the exported bytes while the GIL is
// released: a bytes object, or a memoryview over one (the memoryview's own
// read-only flag does not say that: memoryview(bytearray).toreadonly()).
bool immutable_bytes(const py::handle& obj) {
  if (PyBytes_Check(obj.ptr())) return true;
  return PyMemoryView_Check(obj.ptr()) && PyMemoryView_GET_BASE(obj.ptr()) != nullptr &&
         PyBytes_Check(PyMemoryView_GET_BASE(obj.ptr()));
}

// Reads the bytes of any C-contiguous buffer: its memory as laid out, of
// whatever item size, format and dimensions (an array('I'), a 2-D NumPy
// array). A buffer that is not C-contiguous (a strided or reversed
// memoryview, a Fortran-order or sliced array) is refused with ValueError,
// as the standard library refuses it (hashlib, zlib, file.write); its
// `ptr` and `len` do not describe its bytes. The Trace keeps no reference
// to the buffer (read_trace_bytes copies what it keeps). Bytes are read in
// place without the GIL; any other buffer may be changed by another thread
// meanwhile, so its bytes are copied first, with the GIL held.
std::shared_ptr<PyTrace> read_buffer(const py::object& data, const py::object& name_arg, int threads, bool strict,
                                     const std::string& step_range) {
  const std::string name = name_bytes(name_arg);
  if (PyObject_CheckBuffer(data.ptr()) == 0) {
    throw py::type_error(std::string("tprof.read: expected a path, a bytes-like object or a binary file object, not ") +
                         Py_TYPE(data.ptr())->tp_name);
  }
  BufferExport buffer(data);
  const Py_buffer& view = buffer.view();
  if (PyBuffer_IsContiguous(&view, 'C') == 0) {
    throw py::value_error(
        "tprof.read: the buffer is not C-contiguous (a strided or reversed view, or an array in Fortran order); "
        "pass bytes(buffer) to read a copy of its items in order");
  }
  std::string copy;
  std::string_view bytes(static_cast<const char*>(view.buf), static_cast<std::size_t>(view.len));
  if (!immutable_bytes(data)) {
    copy.assign(bytes);
    bytes = copy;
    buffer.release();
  }
  std::optional<Result<Trace>> r;
  {
    py::gil_scoped_release nogil;
    r.emplace(read_trace_bytes(bytes, name, read_options(threads, strict, step_range)));
  }
  return wrap(std::move(*r), name);
}

// Reads several files at once: a pool of up to one worker per hardware
// thread, each file parsed by the threads left over. The first failure
// (in path order) is raised once all have finished.
std::vector<std::shared_ptr<PyTrace>> read_many(const std::vector<py::object>& path_args, int threads, bool strict,
                                                const std::string& step_range) {
  std::vector<std::string> paths;
  for (const py::object& p : path_args) paths.push_back(fs_path(p));
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t budget = threads > 0 ? static_cast<std::size_t>(threads) : hw;
  const std::size_t workers = std::max<std::size_t>(1, std::min(budget, paths.size()));
  const int per_file = static_cast<int>(std::max<std::size_t>(1, budget / workers));
  std::vector<std::optional<Result<Trace>>> results(paths.size());
  {
    py::gil_scoped_release nogil;
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < paths.size();) {
        results[i].emplace(read_trace(paths[i], read_options(per_file, strict, step_range)));
      }
    };
    std::vector<std::thread> pool;
    for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
  }
  std::vector<std::shared_ptr<PyTrace>> out;
  for (std::size_t i = 0; i < paths.size(); ++i) out.push_back(wrap(std::move(*results[i]), paths[i]));
  return out;
}

// The column `name` of the event table as a zero-copy view.
py::array column(const py::object& self, const std::string& name) {
  const EventColumns& ev = self.cast<PyTrace&>().trace.events;
  const std::size_t n = ev.size();
  if (name == "ts_ns") return view<std::int64_t>(self, ev.ts_ns.data(), n);
  if (name == "dur_ns") return view<std::int64_t>(self, ev.dur_ns.data(), n);
  if (name == "name") return view<std::uint32_t>(self, ev.name.data(), n);
  if (name == "cat") return view<std::uint32_t>(self, ev.cat.data(), n);
  if (name == "lane") return view<std::uint32_t>(self, ev.lane.data(), n);
  if (name == "phase") return view<std::uint8_t>(self, ev.phase.data(), n);
  if (name == "kind") return view<std::uint8_t>(self, ev.kind.data(), n);
  if (name == "flags") return view<std::uint8_t>(self, ev.flags.data(), n);
  if (name == "external_id") return view<std::int64_t>(self, ev.external_id.data(), n);
  if (name == "correlation") return view<std::int64_t>(self, ev.correlation.data(), n);
  if (name == "flow_id") return view<std::int64_t>(self, ev.flow_id.data(), n);
  if (name == "args_ref") return view<std::uint64_t>(self, ev.args_ref.data(), n);
  if (name == "src_offset") return view<std::uint64_t>(self, ev.src_offset.data(), n);
  throw py::key_error("no event column '" + name + "'");
}

// The string ids of `ids` as dense codes 0..k-1 in order of first
// appearance, in the narrowest type pandas keeps for k categories (int8
// below 127, int16 below 32767, else int32: pandas.Categorical.from_codes
// then takes them without a copy), and the k strings. Names that differ
// only in bytes that are not UTF-8 ("a\xff", "a\xfe") read the same once
// those are U+FFFD: they become one category (pandas wants them distinct).
template <typename Code>
py::tuple dense_codes(const Trace& trace, const std::vector<StrId>& ids) {
  py::array_t<Code> codes(static_cast<py::ssize_t>(ids.size()));
  Code* out = codes.mutable_data();
  std::vector<std::string> text;
  {
    py::gil_scoped_release nogil;
    std::vector<StrId> used;
    std::vector<std::int32_t> code_of(trace.strings.size(), -1);
    for (std::size_t e = 0; e < ids.size(); ++e) {
      std::int32_t& c = code_of[ids[e]];
      if (c < 0) {
        c = static_cast<std::int32_t>(used.size());
        used.push_back(ids[e]);
      }
      out[e] = static_cast<Code>(c);
    }
    bool replaced = false;
    text.resize(used.size());
    for (std::size_t i = 0; i < used.size(); ++i) {
      const std::string_view s = trace.str(used[i]);
      if (replace_invalid_utf8(s, &text[i])) {
        replaced = true;
      } else {
        text[i].assign(s);
      }
    }
    if (replaced) {
      std::unordered_map<std::string, Code> first;
      std::vector<Code> merged(text.size());
      std::vector<std::string> kept;
      for (std::size_t i = 0; i < text.size(); ++i) {
        const auto [it, inserted] = first.try_emplace(text[i], static_cast<Code>(kept.size()));
        if (inserted) kept.push_back(text[i]);
        merged[i] = it->second;
      }
      if (kept.size() < text.size()) {
        for (std::size_t e = 0; e < ids.size(); ++e) out[e] = merged[static_cast<std::size_t>(out[e])];
        text = std::move(kept);
      }
    }
  }
  py::list strings(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) strings[i] = to_str(text[i]);
  return py::make_tuple(codes, strings);
}

py::tuple string_codes(const Trace& trace, const std::vector<StrId>& ids) {
  std::vector<char> seen(trace.strings.size(), 0);
  std::size_t distinct = 0;
  {
    py::gil_scoped_release nogil;
    for (StrId id : ids) {
      distinct += seen[id] == 0 ? 1 : 0;
      seen[id] = 1;
    }
  }
  if (distinct < 127) return dense_codes<std::int8_t>(trace, ids);
  if (distinct < 32767) return dense_codes<std::int16_t>(trace, ids);
  return dense_codes<std::int32_t>(trace, ids);
}

py::tuple string_codes_of(PyTrace& t, const std::string& which) {
  const EventColumns& ev = t.trace.events;
  if (which == "name") return string_codes(t.trace, ev.name);
  if (which == "cat") return string_codes(t.trace, ev.cat);
  throw py::key_error("no string column '" + which + "'");
}

// The numeric columns of Trace.events() as one C-contiguous int64 block,
// one row per column (kEventsBlock order): pandas wraps it as the frame's
// int64 block without copying, so the frame costs its own size and no
// intermediate arrays. Per-lane values (pid, tid, device, stream) are
// looked up here, an id written as a string being -1. The last three rows
// (parent, depth, step) only with `derived` (event_tree).
constexpr const char* kEventsBlock[] = {"ts_ns", "dur_ns", "pid", "tid", "device", "stream", "correlation",
                                        "external_id", "flow_id", "parent", "depth", "step"};
constexpr std::size_t kEventsBlockRows = sizeof(kEventsBlock) / sizeof(kEventsBlock[0]);
constexpr std::size_t kEventsDerivedRows = 3;

// Trace.events(derived=True)'s columns, by event index: the enclosing
// event (-1 at the top) and the depth in that tree, from the nesting the
// SQL export writes as events.parent_id (src/analyze/nesting.h), and the
// ProfilerStep number the event falls in (-1 outside steps), from the
// DiagnoseContext (the SQL export's kernels.step for device activity).
// Not kept with the trace, and only computed for a frame that asks: they
// cost several times the plain frame (bench/gen_trace's 100 MB trace:
// ~0.10 s against ~0.02 s, a peak 17 MB higher), and the plain frame's
// time and memory are bench/README.md's targets against json+pandas.
struct EventTree {
  std::vector<std::uint32_t> parent;
  std::vector<std::int32_t> depth;
  std::vector<std::int64_t> step;
};

EventTree event_tree(PyTrace& t) {
  std::lock_guard<std::mutex> lock(t.mu);  // the DiagnoseContext may read args
  EventTree tree;
  {
    const internal::Nesting nest = internal::build_nesting(t.trace);
    tree.parent = internal::event_parents(t.trace, nest);
    tree.depth = internal::event_depths(t.trace, nest, tree.parent);
  }
  tree.step = internal::DiagnoseContext(t.trace).event_step_numbers();
  return tree;
}

// A JSON value as Python's json module decodes it (ints exact at any size,
// other numbers as floats, objects as dicts where a repeated key keeps its
// last value), strings through to_str as every name is.
py::object json_object(const internal::JsonValue& v) {
  using Type = internal::JsonValue::Type;
  switch (v.type()) {
    case Type::kNull:
      return py::none();
    case Type::kBool:
      return py::bool_(v.as_bool());
    case Type::kNumber: {
      const std::string& text = v.text();
      if (text.find_first_of(".eE") == std::string::npos) {
        PyObject* o = PyLong_FromString(text.c_str(), nullptr, 10);
        if (o != nullptr) return py::reinterpret_steal<py::object>(o);
        PyErr_Clear();  // NaN, Infinity: Python's json reads them as floats
      }
      return py::float_(std::strtod(text.c_str(), nullptr));
    }
    case Type::kString:
      return to_str(v.text());
    case Type::kArray: {
      py::list out(v.items().size());
      for (std::size_t i = 0; i < v.items().size(); ++i) out[i] = json_object(v.items()[i]);
      return out;
    }
    case Type::kObject: {
      py::dict out;
      for (const auto& [key, value] : v.members()) out[to_str(key)] = json_object(value);
      return out;
    }
  }
  return py::none();
}

// Trace.events(sort, args, derived): the frame's columns as arrays, rows in
// file order or, with sort, by ts_ns (stably: equal times in file order;
// then "index" holds each row's event index); with derived, the block's
// rows parent, depth and step too. Per key of `args`, a NumPy object
// array: the event's args value for that key decoded (json_object), None
// where absent; the args are read under t.mu without the GIL and only the
// objects are made with it.
py::dict events_frame(PyTrace& t, bool sort, const std::vector<std::string>& args, bool derived) {
  const Trace& tr = t.trace;
  const EventColumns& ev = tr.events;
  const std::size_t n = ev.size();
  const std::size_t rows = derived ? kEventsBlockRows : kEventsBlockRows - kEventsDerivedRows;
  py::array_t<std::int64_t> block({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(n)});
  py::array_t<std::int8_t> ph(static_cast<py::ssize_t>(n)), kind(static_cast<py::ssize_t>(n));
  py::array_t<std::int64_t> index(static_cast<py::ssize_t>(sort ? n : 0));
  std::int64_t* b = block.mutable_data();
  std::int8_t* ph_out = ph.mutable_data();
  std::int8_t* kind_out = kind.mutable_data();
  std::int64_t* index_out = index.mutable_data();
  std::vector<std::uint32_t> order;  // row -> event, with sort
  std::vector<StrId> names, cats;    // the string ids in row order, with sort
  // Per key, per row: an index into `values`, or -1 when the event has no such arg.
  std::vector<std::vector<std::int32_t>> slot(args.size());
  std::vector<internal::JsonValue> values;
  {
    py::gil_scoped_release nogil;
    const EventTree tree = derived ? event_tree(t) : EventTree{};
    if (sort) {
      order.resize(n);
      for (std::uint32_t e = 0; e < n; ++e) order[e] = e;
      internal::sort_by_time(ev.ts_ns, &order);
      names.resize(n);
      cats.resize(n);
      for (std::size_t r = 0; r < n; ++r) {
        names[r] = ev.name[order[r]];
        cats[r] = ev.cat[order[r]];
        index_out[r] = order[r];
      }
    }
    auto event_at = [&](std::size_t r) -> std::uint32_t { return sort ? order[r] : static_cast<std::uint32_t>(r); };
    std::vector<std::array<std::int64_t, 4>> per_lane;  // pid, tid, device, stream
    for (const Lane& l : tr.lanes) {
      per_lane.push_back({l.pid.is_str ? -1 : l.pid.num, l.tid.is_str ? -1 : l.tid.num, l.device, l.stream});
    }
    // The Phase characters in tprof's order (tprof/__init__.py, _PHASES).
    std::array<std::int8_t, 256> phase_code;
    phase_code.fill(-1);
    const char phases[] = {'X', 'i', 'C', 's', 't', 'f', 'M'};
    for (std::size_t i = 0; i < sizeof(phases); ++i) phase_code[static_cast<unsigned char>(phases[i])] = static_cast<std::int8_t>(i);
    std::int64_t* row[kEventsBlockRows];
    for (std::size_t r = 0; r < rows; ++r) row[r] = b + r * n;
    // The model's own int64 columns: copied whole in file order, gathered by
    // row when sorted.
    const std::vector<std::int64_t>* own[] = {&ev.ts_ns, &ev.dur_ns, nullptr, nullptr, nullptr, nullptr,
                                              &ev.correlation, &ev.external_id, &ev.flow_id};
    for (std::size_t c = 0; c < sizeof(own) / sizeof(own[0]); ++c) {
      if (own[c] == nullptr) continue;
      if (sort) {
        for (std::size_t r = 0; r < n; ++r) row[c][r] = (*own[c])[order[r]];
      } else {
        std::copy(own[c]->begin(), own[c]->end(), row[c]);
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint32_t e = event_at(r);
      const std::array<std::int64_t, 4>& l = per_lane[ev.lane[e]];
      row[2][r] = l[0];
      row[3][r] = l[1];
      row[4][r] = l[2];
      row[5][r] = l[3];
      if (derived) {
        row[9][r] = tree.parent[e] == kNoIndex ? std::int64_t{-1} : std::int64_t{tree.parent[e]};
        row[10][r] = tree.depth[e];
        row[11][r] = tree.step[e];
      }
      ph_out[r] = phase_code[static_cast<std::uint8_t>(ev.phase[e])];
      kind_out[r] = static_cast<std::int8_t>(ev.kind[e]);
    }
    if (!args.empty()) {
      std::lock_guard<std::mutex> lock(t.mu);  // args_json pages the source in and out
      const std::vector<std::string_view> keys(args.begin(), args.end());
      std::vector<std::string_view> found(keys.size());
      for (auto& s : slot) s.assign(n, -1);
      for (std::size_t r = 0; r < n; ++r) {
        const std::uint32_t e = event_at(r);
        if (ev.args_ref[e] == 0) continue;
        const std::string_view json = tr.args_json(e);
        if (json.empty()) continue;
        if (internal::member_values(json, keys, found)) {
          for (std::size_t k = 0; k < keys.size(); ++k) {
            if (found[k].empty()) continue;
            Result<internal::JsonValue> v = internal::JsonValue::parse(found[k]);
            if (!v) continue;
            slot[k][r] = static_cast<std::int32_t>(values.size());
            values.push_back(std::move(*v));
          }
          continue;
        }
        // A text member_values does not read in one pass: parse it whole.
        Result<internal::JsonValue> whole = internal::JsonValue::parse(json);
        if (!whole || !whole->is_object()) continue;
        for (std::size_t k = 0; k < keys.size(); ++k) {
          const internal::JsonValue* v = whole->find(keys[k]);
          if (v == nullptr) continue;
          slot[k][r] = static_cast<std::int32_t>(values.size());
          values.push_back(*v);
        }
      }
    }
  }
  py::dict d;
  d["block"] = block;
  py::list columns;
  for (std::size_t r = 0; r < rows; ++r) columns.append(kEventsBlock[r]);
  d["block_columns"] = columns;
  d["ph_codes"] = ph;
  d["kind_codes"] = kind;
  py::tuple name_codes = string_codes(tr, sort ? names : ev.name);
  d["name_codes"] = name_codes[0];
  d["names"] = name_codes[1];
  py::tuple cat_codes = string_codes(tr, sort ? cats : ev.cat);
  d["cat_codes"] = cat_codes[0];
  d["cats"] = cat_codes[1];
  if (sort) d["index"] = index;
  py::list arg_columns;
  const py::object empty = py::module_::import("numpy").attr("empty");
  for (std::size_t k = 0; k < args.size(); ++k) {
    py::array column = empty(n, py::arg("dtype") = "object");  // filled with None
    auto** cell = static_cast<PyObject**>(column.mutable_data());
    for (std::size_t r = 0; r < n; ++r) {
      if (slot[k][r] < 0) continue;
      PyObject* o = json_object(values[static_cast<std::size_t>(slot[k][r])]).release().ptr();
      Py_XDECREF(cell[r]);
      cell[r] = o;
    }
    arg_columns.append(column);
  }
  d["args"] = arg_columns;
  return d;
}

py::object id_value(const Trace& t, const TraceId& id) {
  return id.is_str ? py::object(to_str(t.str(id.str))) : py::object(py::int_(id.num));
}

// One entry per lane: pid, tid (int, or str as the file wrote them), kind,
// device, stream, thread_name.
py::dict lanes(PyTrace& t) {
  const Trace& tr = t.trace;
  py::list pid, tid, kind, device, stream, thread_name;
  for (const Lane& l : tr.lanes) {
    pid.append(id_value(tr, l.pid));
    tid.append(id_value(tr, l.tid));
    kind.append(py::str(std::string(lane_kind_name(l.kind))));
    device.append(l.device);
    stream.append(l.stream);
    thread_name.append(to_str(tr.str(l.thread_name)));
  }
  py::dict d;
  d["pid"] = pid;
  d["tid"] = tid;
  d["kind"] = kind;
  d["device"] = device;
  d["stream"] = stream;
  d["thread_name"] = thread_name;
  return d;
}

py::dict metadata(PyTrace& t) {
  const TraceMetadata& m = t.trace.meta;
  py::dict d;
  d["format"] = m.format == TraceFormat::kLegacyArray ? "legacy_array" : "kineto_object";
  d["producer"] = std::string(producer_name(m.producer));
  d["gzip"] = m.gzip;
  d["base_time_ns"] = m.base_time_ns ? py::object(py::int_(*m.base_time_ns)) : py::object(py::none());
  py::dict top;
  for (const auto& [k, v] : m.top_level) top[to_str(k)] = to_str(v);
  d["top_level"] = top;
  d["dropped_events"] = m.dropped_events;
  return d;
}

py::list diagnostics(PyTrace& t) {
  py::list out;
  for (const Diagnostic& d : t.trace.diagnostics.items()) {
    py::dict x;
    x["code"] = std::string(diagnostic_code_name(d.code));
    x["severity"] = d.severity == Severity::kError ? "error" : d.severity == Severity::kWarning ? "warning" : "info";
    x["event"] = d.event == kNoIndex ? py::object(py::none()) : py::object(py::int_(d.event));
    x["byte_offset"] = d.byte_offset < 0 ? py::object(py::none()) : py::object(py::int_(d.byte_offset));
    x["message"] = to_str(d.message);
    out.append(x);
  }
  return out;
}

py::dict diagnostic_counts(PyTrace& t) {
  py::dict out;
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    const auto code = static_cast<DiagnosticCode>(c);
    if (t.trace.diagnostics.count(code) > 0) {
      out[py::str(std::string(diagnostic_code_name(code)))] = t.trace.diagnostics.count(code);
    }
  }
  return out;
}

// Runs fn() on the trace without the GIL, one analysis at a time.
template <typename Fn>
auto locked(PyTrace& t, Fn fn) {
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(t.mu);
  return fn();
}

// torch's key_averages(...).table(...) for the trace, as `tprof table`
// computes it (tools/tprof/table_cmd.cc): text, json or csv.
py::str table(PyTrace& t, const std::string& sort_by, int row_limit, int max_name_column_width,
                  int max_src_column_width, int max_shapes_column_width, const std::optional<std::string>& header,
                  bool top_level_events_only, bool group_by_input_shape, int group_by_stack_n,
                  const std::string& memory, const std::string& times, bool events, const std::string& format) {
  if (memory != "auto" && memory != "on" && memory != "off") throw py::value_error("memory: auto, on or off");
  if (times != "auto" && times != "us" && times != "ns") throw py::value_error("times: auto, us or ns");
  if (format != "text" && format != "json" && format != "csv") throw py::value_error("format: text, json or csv");
  if (group_by_stack_n < 0) throw py::value_error("group_by_stack_n must be >= 0");
  Result<std::string> out = locked(t, [&]() -> Result<std::string> {
    EventListOptions lo;
    lo.time = times == "us"   ? TimeSemantics::kTruncatedMicros
              : times == "ns" ? TimeSemantics::kExactNanos
                              : TimeSemantics::kAuto;
    lo.with_shapes = group_by_input_shape || events;
    lo.with_stacks = group_by_stack_n > 0 || events;
    lo.with_memory = memory != "off" || sort_by.find("memory") != std::string::npos;
    const EventList list = EventList::build(t.trace, lo);
    TableOptions to;
    to.sort_by = sort_by;
    to.row_limit = row_limit;
    to.max_name_column_width = max_name_column_width;
    to.max_src_column_width = max_src_column_width;
    to.max_shapes_column_width = max_shapes_column_width;
    to.has_header = header.has_value();
    to.header = header.value_or("");
    to.top_level_events_only = top_level_events_only;
    to.profile_memory = memory == "on" || (memory == "auto" && list.has_memory_records());
    to.dropped_events = t.trace.meta.dropped_events;
    to.device_name = device_name_of(t.trace);
    const std::vector<StatRow> rows =
        events ? list.event_rows() : list.key_averages(group_by_input_shape, group_by_stack_n);
    return format == "json"  ? format_table_json(rows, to)
           : format == "csv" ? format_table_csv(rows, to)
                             : format_table(rows, to);
  });
  if (!out) raise_error(out.error());
  return format == "json" ? to_str(*out) : text_str(*out);
}

py::str steps(PyTrace& t, bool text) {
  const std::string out = locked(t, [&] {
    const StepsSummary s = compute_steps(t.trace);
    return text ? format_steps_text(t.trace, s) : format_steps_json(t.trace, s);
  });
  return text ? text_str(out) : to_str(out);
}

py::str kernels(PyTrace& t, bool text) {
  const std::string out = locked(t, [&] {
    const KernelsSummary k = compute_kernels(t.trace);
    return text ? format_kernels_text(k) : format_kernels_json(k);
  });
  return text ? text_str(out) : to_str(out);
}

// tprof memory's views: "csv" (one row per record), "json" or "text".
py::str memory(PyTrace& t, const std::string& format, std::optional<int> device) {
  if (format != "text" && format != "json" && format != "csv") throw py::value_error("format: text, json or csv");
  if (device && (*device < -1 || *device > 32767)) throw py::value_error("device: an index (0, 1, ...), -1 for the CPU");
  const std::string out = locked(t, [&] {
    const MemoryInput in = memory_input(t.trace);
    MemoryOptions o;
    if (device) o.device = static_cast<std::int16_t>(*device);
    const MemoryReport r = analyze_memory(in, o);
    return format == "csv" ? format_memory_csv(in, r) : format == "json" ? format_memory_json(r) : format_memory_text(r);
  });
  return format == "text" ? text_str(out) : to_str(out);
}

py::str diagnose_trace(PyTrace& t, const std::vector<std::string>& only, const std::string& format,
                           bool verbose) {
  if (format != "text" && format != "json" && format != "md") throw py::value_error("format: text, json or md");
  const std::vector<std::string> known = rule_ids();
  for (const std::string& id : only) {
    if (std::find(known.begin(), known.end(), id) == known.end()) {
      throw py::value_error("unknown rule id '" + id + "' (tprof.rule_ids() lists them)");
    }
  }
  const std::string out = locked(t, [&] {
    DiagnoseOptions o;
    o.only = only;
    const Diagnosis d = diagnose(t.trace, o);
    return format == "json" ? format_diagnosis_json(t.trace, d)
           : format == "md" ? format_diagnosis_md(t.trace, d)
                            : format_diagnosis_text(t.trace, d, {.verbose = verbose});
  });
  return format == "json" ? to_str(out) : text_str(out);
}

py::str compare(PyTrace& a, PyTrace& b, const std::string& format, const std::string& label_a,
                    const std::string& label_b, std::size_t top) {
  if (format != "text" && format != "json" && format != "md") throw py::value_error("format: text, json or md");
  const CompareFormat f{.label_a = label_a, .label_b = label_b, .top = top};
  const auto formatted = [&](const Comparison& c) {
    return format == "json" ? format_comparison_json(c, f) : format == "md" ? format_comparison_md(c, f)
                                                                            : format_comparison_text(c, f);
  };
  std::string out;
  if (&a == &b) {
    // One trace against itself: one lock (the analyses only read).
    out = locked(a, [&] { return formatted(compare_traces(a.trace, a.trace)); });
  } else {
    py::gil_scoped_release nogil;
    std::scoped_lock lock(a.mu, b.mu);
    out = formatted(compare_traces(a.trace, b.trace));
  }
  return format == "json" ? to_str(out) : text_str(out);
}

// HTA's figures of one rank as Python objects (times in ns; tprof/hta.py
// converts to HTA's µs). `queue` holds NumPy arrays.
py::dict hta_dict(const PyTrace& t, const HtaRank& r) {
  const internal::HtaFigures& f = r.figures;
  py::dict d;
  d["rank"] = r.rank;
  d["has_rank"] = r.has_rank;
  d["has_rows"] = f.temporal.has_value();
  const HtaTemporal h = f.temporal.value_or(HtaTemporal{});
  d["kernel_time_ns"] = h.kernel_time_ns;
  d["idle_time_ns"] = h.idle_time_ns;
  d["compute_time_ns"] = h.compute_time_ns;
  d["non_compute_time_ns"] = h.non_compute_time_ns;
  d["trace_duration_ns"] = f.trace_duration_ns;
  // Per stream: (stream, [per category (rows, sum_ns, count, mean, std,
  // min, 25%, 50%, 75%, max)] in HTA's category order).
  py::list idle;
  for (const internal::HtaIdleStream& s : f.idle) {
    py::list cats;
    for (const internal::HtaIdleCategory& k : s.categories) {
      cats.append(py::make_tuple(k.rows, k.sum_ns, k.count, k.mean_ns, k.std_ns, k.min_ns, k.p25_ns, k.p50_ns,
                                 k.p75_ns, k.max_ns));
    }
    idle.append(py::make_tuple(s.stream, cats));
  }
  d["idle"] = idle;
  d["comm_comp_overlap_ns"] = f.kernel_types.comm_comp_overlap_ns;
  d["comm_ns"] = f.kernel_types.comm_ns;
  py::list types;
  for (const auto& [label, ns] : f.kernel_types.kernel_types) types.append(py::make_tuple(to_str(label), ns));
  d["kernel_types"] = types;
  py::list kernels;
  for (const internal::HtaKernel& k : f.kernels) {
    kernels.append(py::make_tuple(to_str(t.trace.str(k.name)), std::string(k.kernel_type), k.count, k.sum_ns,
                                  k.max_ns, k.min_ns, k.mean_ns, k.std_ns));
  }
  d["kernels"] = kernels;
  // The queue lengths and memory bandwidth series as NumPy arrays; pid and
  // tid are the lane's of the device activity (HTA takes them from it), an
  // id written as a string -1.
  auto lane_ids = [&](std::uint32_t e) {
    const Lane& l = t.trace.lanes[t.trace.events.lane[e]];
    return std::make_pair(l.pid.is_str ? -1 : l.pid.num, l.tid.is_str ? -1 : l.tid.num);
  };
  const auto n = static_cast<py::ssize_t>(f.queue.size());
  py::array_t<std::int64_t> ts(n), pid(n), tid(n), stream(n), q(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    const internal::HtaQueuePoint& p = f.queue[static_cast<std::size_t>(i)];
    ts.mutable_at(i) = p.ts_ns;
    std::tie(pid.mutable_at(i), tid.mutable_at(i)) = lane_ids(p.event);
    stream.mutable_at(i) = p.stream;
    q.mutable_at(i) = p.queue_length;
  }
  py::dict queue;
  queue["ts_ns"] = ts;
  queue["pid"] = pid;
  queue["tid"] = tid;
  queue["stream"] = stream;
  queue["queue_length"] = q;
  const auto m = static_cast<py::ssize_t>(f.memory_bw.size());
  py::array_t<std::int64_t> bw_ts(m), bw_pid(m);
  py::array_t<double> bw(m);
  py::list kind(static_cast<std::size_t>(m));
  for (py::ssize_t i = 0; i < m; ++i) {
    const internal::HtaMemoryBwPoint& p = f.memory_bw[static_cast<std::size_t>(i)];
    bw_ts.mutable_at(i) = p.ts_ns;
    bw_pid.mutable_at(i) = lane_ids(p.event).first;
    kind[static_cast<std::size_t>(i)] = to_str(p.kind);
    bw.mutable_at(i) = p.memory_bw_gbps;
  }
  py::dict memory_bw;
  memory_bw["ts_ns"] = bw_ts;
  memory_bw["pid"] = bw_pid;
  memory_bw["name"] = kind;
  memory_bw["memory_bw_gbps"] = bw;
  d["memory_bw"] = memory_bw;
  d["queue"] = queue;
  return d;
}

// HTA's figures of several traces under one set of HTA's options (its
// defaults: computed once per trace), in parallel without the GIL.
py::list hta_many(const std::vector<std::shared_ptr<PyTrace>>& traces, bool include_last_profiler_step,
                  std::int64_t consecutive_kernel_delay_ns, bool idle_interval_stats, bool include_memory_kernels) {
  const internal::HtaOptions options{.include_last_profiler_step = include_last_profiler_step,
                                     .consecutive_kernel_delay_ns = consecutive_kernel_delay_ns,
                                     .idle_interval_stats = idle_interval_stats,
                                     .include_memory_kernels = include_memory_kernels};
  std::vector<std::shared_ptr<const HtaRank>> ranks(traces.size());
  {
    py::gil_scoped_release nogil;
    const std::size_t workers =
        std::max<std::size_t>(1, std::min<std::size_t>(std::thread::hardware_concurrency(), traces.size()));
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < traces.size();) ranks[i] = hta_rank(*traces[i], options);
    };
    std::vector<std::thread> pool;
    for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
  }
  py::list out;
  for (std::size_t i = 0; i < traces.size(); ++i) out.append(hta_dict(*traces[i], *ranks[i]));
  return out;
}


// ---- the causal model (docs/python.md, "Critical path and what-if") ----

// One critical path of a trace, as TraceAnalysis.critical_path_analysis
// finds it: the graph it was found on (the overlay marks the trace from
// it) and the path. Keeps its Trace alive.
struct PyCriticalPath {
  std::shared_ptr<PyTrace> trace;
  std::shared_ptr<const CausalGraph> graph;
  CriticalPath path;
  std::string kind;               // "step", "annotation" or "window"
  std::int64_t step = -1;         // kind "step": N of ProfilerStep#N (-1 unnumbered)
  std::uint32_t event = kNoIndex; // the step's or the annotation's event
};

// The window HTA's critical_path_analysis(rank, annotation, instance_id)
// names, on the trace's replayed timeline: "" the whole trace;
// "ProfilerStep" the instance-th step (its per-step path); anything else
// the instance-th host event (by start) whose name contains `annotation`,
// as HTA matches annotations. nullptr when there is no such window.
std::shared_ptr<PyCriticalPath> critical_path(const std::shared_ptr<PyTrace>& t, const std::string& annotation,
                                              std::int64_t instance) {
  if (instance < 0) throw py::value_error("instance_id must be >= 0");
  const auto n = static_cast<std::size_t>(instance);
  std::optional<Result<std::shared_ptr<PyCriticalPath>>> out;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(t->mu);
    out.emplace([&]() -> Result<std::shared_ptr<PyCriticalPath>> {
      const Trace& trace = t->trace;
      CausalOptions o;
      o.window_path = annotation.empty();
      TPROF_TRY_ASSIGN(CausalResult r, analyze_causal(trace, o));
      auto p = std::make_shared<PyCriticalPath>();
      p->trace = t;
      p->graph = r.graph;
      if (annotation.empty()) {
        if (n != 0) return std::shared_ptr<PyCriticalPath>();
        p->kind = "window";
        p->path = std::move(r.window);
        return p;
      }
      if (annotation == "ProfilerStep" && r.has_steps) {
        if (n >= r.steps.size()) return std::shared_ptr<PyCriticalPath>();
        StepTime& s = r.steps[n];
        p->kind = "step";
        p->step = s.step;
        p->event = s.event;
        p->path = std::move(s.path);
        return p;
      }
      // HTA's substring match, instances by start (ties in activity order,
      // as annotation_critical_path counts them); then that event's exact
      // name and its instance among the events of that name.
      const CausalGraph& g = *r.graph;
      std::vector<std::uint32_t> found;
      for (std::uint32_t a = 0; a < g.activities(); ++a) {
        if (!g.is_device[a] && trace.name(g.events[a]).find(annotation) != std::string_view::npos) found.push_back(a);
      }
      std::stable_sort(found.begin(), found.end(), [&](std::uint32_t x, std::uint32_t y) {
        return g.time_ns[CausalGraph::begin_node(x)] < g.time_ns[CausalGraph::begin_node(y)];
      });
      if (n >= found.size()) return std::shared_ptr<PyCriticalPath>();
      const std::string_view name = trace.name(g.events[found[n]]);
      std::size_t k = 0;
      for (std::size_t i = 0; i < n; ++i) k += trace.name(g.events[found[i]]) == name ? 1 : 0;
      TPROF_TRY_ASSIGN(CriticalPath path, annotation_critical_path(trace, r, name, k));
      p->kind = "annotation";
      p->event = g.events[found[n]];
      p->path = std::move(path);
      return p;
    }());
  }
  if (!*out) raise_error(out->error());
  return std::move(**out);
}

// The events the overlay marks critical (tprof::critical_events).
std::vector<std::uint8_t> critical_events(const PyCriticalPath& p, std::size_t events) {
  return tprof::critical_events(*p.graph, {&p.path}, events);
}

// The path's segments as columns: event (-1: none, a host gap), name,
// edge type, bound type (tprof's names), start and duration (ns, on the
// replayed timeline).
py::dict path_segments(const PyCriticalPath& p) {
  const std::vector<PathSegment>& segs = p.path.segments;
  const auto n = static_cast<py::ssize_t>(segs.size());
  py::array_t<std::int64_t> event(n), start(n), dur(n);
  py::list name(segs.size()), type(segs.size()), bound(segs.size());
  for (py::ssize_t i = 0; i < n; ++i) {
    const PathSegment& s = segs[static_cast<std::size_t>(i)];
    event.mutable_at(i) = s.event == kNoIndex ? -1 : static_cast<std::int64_t>(s.event);
    start.mutable_at(i) = s.start_ns;
    dur.mutable_at(i) = s.dur_ns;
    const auto at = static_cast<std::size_t>(i);
    name[at] = s.event == kNoIndex ? py::object(py::none()) : py::object(to_str(p.trace->trace.name(s.event)));
    type[at] = py::str(std::string(edge_type_name(s.type)));
    bound[at] = py::str(std::string(bound_type_name(s.bound)));
  }
  py::dict d;
  d["event"] = event;
  d["name"] = name;
  d["type"] = type;
  d["bound_by"] = bound;
  d["start_ns"] = start;
  d["dur_ns"] = dur;
  return d;
}

py::dict path_bound_ns(const PyCriticalPath& p) {
  py::dict d;
  for (int b = 0; b < static_cast<int>(BoundType::kCount_); ++b) {
    d[py::str(std::string(bound_type_name(static_cast<BoundType>(b))))] = p.path.bound_ns[static_cast<std::size_t>(b)];
  }
  return d;
}

// Writes the path's trace with the path marked (overlay_critical_path) to
// `path`, gzip-compressed whatever its name, as HTA writes its overlay;
// only_critical keeps the events marked critical, every event that is not
// a complete event (metadata, instants, flows) and the user annotations
// and Python functions (HTA's only_show_critical_events). The Trace
// itself is not changed: the overlay goes on a copy.
void overlay_path(const PyCriticalPath& p, const py::object& path_arg, bool only_critical) {
  const std::string path = fs_path(path_arg);
  Status st;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(p.trace->mu);
    const Trace& t = p.trace->trace;
    Trace copy = internal::select_events(t, std::vector<std::uint8_t>(t.events.size(), 1));
    overlay_critical_path(&copy, *p.graph, {&p.path});
    if (only_critical) {
      std::vector<std::uint8_t> keep = critical_events(p, copy.events.size());
      const EventColumns& ev = copy.events;
      for (std::uint32_t e = 0; e < ev.size(); ++e) {
        keep[e] = keep[e] || ev.phase[e] != Phase::kComplete || ev.kind[e] == EventKind::kUserAnnotation ||
                  ev.kind[e] == EventKind::kPythonFunction;
      }
      copy = internal::select_events(copy, keep);
    }
    WriteOptions wo;
    wo.compression = Compression::kGzip;
    st = write_trace(copy, path, wo);
  }
  if (!st) {
    PyErr_SetObject(PyExc_OSError, to_str(st.error().to_string()).ptr());
    throw py::error_already_set();
  }
}

// Measured, replayed and predicted time per step with `edits` applied
// (`tprof whatif`); an edit that does not parse or matches nothing raises
// ValueError with its message.
py::dict whatif(PyTrace& t, const std::vector<std::string>& edits) {
  CausalOptions o;
  o.paths = false;
  for (const std::string& e : edits) {
    Result<WhatIfEdit> parsed = parse_whatif_edit(e);
    if (!parsed) raise_error(parsed.error());
    o.edits.push_back(std::move(*parsed));
  }
  Result<CausalResult> r = locked(t, [&] { return analyze_causal(t.trace, o); });
  if (!r) raise_error(r.error());
  const auto n = static_cast<py::ssize_t>(r->steps.size());
  py::array_t<std::int64_t> step(n), measured(n), replayed(n), predicted(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    const StepTime& s = r->steps[static_cast<std::size_t>(i)];
    step.mutable_at(i) = s.step;
    measured.mutable_at(i) = s.measured_ns;
    replayed.mutable_at(i) = s.replayed_ns;
    predicted.mutable_at(i) = s.predicted_ns;
  }
  py::dict d;
  d["has_steps"] = r->has_steps;
  d["step"] = step;
  d["measured_ns"] = measured;
  d["replayed_ns"] = replayed;
  d["predicted_ns"] = predicted;
  d["matched"] = r->matched;
  return d;
}

// One rank's summary (tprof summarize): the trace at `path` read where this
// runs (a Dask worker, for tprof.distributed). Returns the summary file's
// JSON, a few KB, and the diagnostics note `tprof diagnose DIR` prints for
// it ("" when the trace was read cleanly). Raises TraceError naming the file.
std::pair<std::string, std::string> summarize_path(const py::object& path_arg, int threads, bool strict) {
  const std::string path = fs_path(path_arg);
  std::optional<Result<Trace>> r;
  std::pair<std::string, std::string> out;
  {
    py::gil_scoped_release nogil;
    r.emplace(read_trace(path, read_options(threads, strict, {})));
    if (*r) {
      // The file name, as tprof diagnose DIR and summarize store it.
      out.first = format_rank_summary_json(
          JobSummary{{summarize_rank(**r, std::filesystem::path(path).filename().string())}});
      out.second = format_diagnostics_note(**r, path);
    }
  }
  if (!*r) raise_error(r->error().with_path(path));
  return out;
}

// The job view of summary files' texts (tprof merge): text, json, md, html,
// or "summary" (the merged summary, itself mergeable). ValueError naming
// the part for a text that is not a summary, and for ranks that clash.
std::vector<JobSummary> parse_summaries(const std::vector<std::string>& summaries, const std::vector<std::string>& names) {
  std::vector<JobSummary> parts;
  parts.reserve(summaries.size());
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    Result<JobSummary> part = parse_rank_summary_json(summaries[i]);
    if (!part) {
      const std::string name = i < names.size() ? names[i] : "summary " + std::to_string(i);
      throw py::value_error(name + ": " + part.error().message());
    }
    parts.push_back(std::move(part).value());
  }
  return parts;
}

std::string merge_job(const std::vector<std::string>& summaries, const std::vector<std::string>& names,
                      const std::string& format) {
  const std::vector<JobSummary> parts = parse_summaries(summaries, names);
  std::string out;
  std::optional<Error> failed;
  {
    py::gil_scoped_release nogil;
    Result<JobSummary> job = merge_summaries(parts);
    if (!job) {
      failed = job.error();
    } else if (format == "summary") {
      out = format_rank_summary_json(*job);
    } else {
      const JobView v = compute_job_view(*job);
      out = format == "json" ? format_job_json(v) : format == "md" ? format_job_md(v)
                                                  : format == "html" ? format_job_html(v) : format_job_text(v);
    }
  }
  if (failed) throw py::value_error(failed->message());
  return out;
}

// Two jobs compared (tprof compare --jobs), each from its ranks' summary
// texts: (report, gate outcome "pass"/"fail"/"refused" or None, the gate's
// line for stderr or ""). ValueError as merge_job's.
py::tuple compare_jobs_py(const std::vector<std::string>& summaries_a, const std::vector<std::string>& names_a,
                          const std::vector<std::string>& summaries_b, const std::vector<std::string>& names_b,
                          const std::string& format, const std::string& label_a, const std::string& label_b,
                          std::size_t top, std::optional<double> fail_if_slower, const std::string& metric,
                          std::size_t min_steps, bool allow_mismatch) {
  if (format != "text" && format != "json" && format != "md" && format != "html") {
    throw py::value_error("format must be text, json, md or html, not " + format);
  }
  if (summaries_a.empty() || summaries_b.empty()) throw py::value_error("each job needs at least one rank summary");
  if (fail_if_slower && (!std::isfinite(*fail_if_slower) || *fail_if_slower < 0)) {
    throw py::value_error("fail_if_slower must be a non-negative number");
  }
  const std::optional<CompareMetric> m = compare_metric_named(metric);
  if (!m) throw py::value_error("metric must be auto, steady, step, device or cpu");
  const std::vector<JobSummary> parts_a = parse_summaries(summaries_a, names_a);
  const std::vector<JobSummary> parts_b = parse_summaries(summaries_b, names_b);
  std::string out, line;
  std::optional<GateResult> gate;
  std::optional<Error> failed;
  {
    py::gil_scoped_release nogil;
    Result<JobSummary> a = merge_summaries(parts_a);
    Result<JobSummary> b = a ? merge_summaries(parts_b) : Result<JobSummary>(a.error());
    if (!a || !b) {
      failed = !a ? a.error() : b.error();
    } else {
      const JobComparison j = compare_jobs(*a, *b);
      if (fail_if_slower) {
        gate = check_gate(j.c, {.max_slower_pct = *fail_if_slower, .metric = *m, .min_steps = min_steps,
                                .allow_mismatch = allow_mismatch});
        line = format_gate_line(*gate);
      }
      const CompareFormat f{.label_a = label_a, .label_b = label_b, .top = top};
      const GateResult* g = gate ? &*gate : nullptr;
      out = format == "json"   ? format_job_comparison_json(j, f, g)
            : format == "md"   ? format_job_comparison_md(j, f, g)
            : format == "html" ? format_job_comparison_html(j, f, g)
                               : format_job_comparison_text(j, f, g);
    }
  }
  if (failed) throw py::value_error(failed->message());
  py::object outcome = py::none();
  if (gate) outcome = py::str(std::string(gate_outcome_name(gate->outcome)));
  return py::make_tuple(out, outcome, line);
}

}  // namespace

}  // namespace tprof::python

PYBIND11_MODULE(_tprof, m) {
  using namespace tprof;
  using namespace tprof::python;
  m.doc() = "tprof's C++ core: trace reading, columns and analyses (use the `tprof` package)";
  m.attr("__version__") = TPROF_VERSION;

  static py::exception<Error> trace_error(m, "TraceError", PyExc_ValueError);
  g_trace_error = trace_error.ptr();

  py::class_<PyTrace, std::shared_ptr<PyTrace>>(m, "Trace")
      .def_property_readonly("path", [](const PyTrace& t) { return fs_str(t.path); })
      .def("__len__", [](const PyTrace& t) { return t.trace.events.size(); })
      .def("column", &column, py::arg("name"), "A read-only zero-copy view of an event column.")
      .def("string_codes", &string_codes_of, py::arg("which"))
      .def("events_frame", &events_frame, py::arg("sort") = false, py::arg("args") = std::vector<std::string>{},
           py::arg("derived") = false)
      .def("strings", [](const PyTrace& t, const py::array_t<std::uint32_t, py::array::forcecast>& ids) {
        py::list out(static_cast<std::size_t>(ids.size()));
        const std::size_t pool = t.trace.strings.size();
        for (py::ssize_t i = 0; i < ids.size(); ++i) {
          const std::uint32_t id = ids.at(i);
          if (id >= pool) throw py::index_error("string id out of range");
          out[static_cast<std::size_t>(i)] = to_str(t.trace.str(id));
        }
        return out;
      })
      .def("args_json", [](PyTrace& t, std::uint32_t e) {
        if (e >= t.trace.events.size()) throw py::index_error("event index out of range");
        std::string json;
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lock(t.mu);
          json = std::string(t.trace.args_json(e));
        }
        return to_str(json);
      })
      .def("lanes", &lanes)
      .def("metadata", &metadata)
      .def("diagnostics", &diagnostics)
      .def("diagnostic_counts", &diagnostic_counts)
      .def("start_ns", [](const PyTrace& t) { return t.trace.start_ns(); })
      .def("end_ns", [](const PyTrace& t) { return t.trace.end_ns(); });

  m.def("read", &read_path, py::arg("path"), py::arg("threads") = 0, py::arg("strict") = false,
        py::arg("step_range") = std::string());
  m.def("read_bytes", &read_buffer, py::arg("data"), py::arg("name") = py::str("<bytes>"), py::arg("threads") = 0,
        py::arg("strict") = false, py::arg("step_range") = std::string());
  m.def("summarize_rank", &summarize_path, py::arg("path"), py::arg("threads") = 0, py::arg("strict") = false);
  m.def("merge_job", &merge_job, py::arg("summaries"), py::arg("names") = std::vector<std::string>{},
        py::arg("format") = "text");
  m.def("compare_jobs", &compare_jobs_py, py::arg("summaries_a"), py::arg("names_a"), py::arg("summaries_b"),
        py::arg("names_b"), py::arg("format") = "text", py::arg("label_a") = "A", py::arg("label_b") = "B",
        py::arg("top") = 10, py::arg("fail_if_slower") = py::none(), py::arg("metric") = "auto",
        py::arg("min_steps") = 5, py::arg("allow_mismatch") = false);
  m.def("read_many", &read_many, py::arg("paths"), py::arg("threads") = 0, py::arg("strict") = false,
        py::arg("step_range") = std::string());
  m.def("table", &table, py::arg("trace"), py::arg("sort_by") = "", py::arg("row_limit") = 100,
        py::arg("max_name_column_width") = 55, py::arg("max_src_column_width") = 75,
        py::arg("max_shapes_column_width") = 80, py::arg("header") = py::none(),
        py::arg("top_level_events_only") = false, py::arg("group_by_input_shape") = false,
        py::arg("group_by_stack_n") = 0, py::arg("memory") = "auto", py::arg("times") = "auto",
        py::arg("events") = false, py::arg("format") = "text");
  m.def("steps", &steps, py::arg("trace"), py::arg("text") = false);
  m.def("kernels", &kernels, py::arg("trace"), py::arg("text") = false);
  m.def("memory", &memory, py::arg("trace"), py::arg("format") = "csv", py::arg("device") = py::none());
  m.def("diagnose", &diagnose_trace, py::arg("trace"), py::arg("only") = std::vector<std::string>{},
        py::arg("format") = "json", py::arg("verbose") = false);
  m.def("compare", &compare, py::arg("a"), py::arg("b"), py::arg("format") = "json", py::arg("label_a") = "A",
        py::arg("label_b") = "B", py::arg("top") = 10);
  m.def("hta", &hta_many, py::arg("traces"), py::arg("include_last_profiler_step") = false,
        py::arg("consecutive_kernel_delay_ns") = 30'000, py::arg("idle_interval_stats") = false,
        py::arg("include_memory_kernels") = true);
  py::class_<PyCriticalPath, std::shared_ptr<PyCriticalPath>>(m, "CriticalPath")
      .def_readonly("kind", &PyCriticalPath::kind)
      .def_property_readonly("step", [](const PyCriticalPath& p) -> py::object {
        return p.kind == "step" ? py::object(py::int_(p.step)) : py::object(py::none());
      })
      .def_property_readonly("event", [](const PyCriticalPath& p) -> py::object {
        return p.event == kNoIndex ? py::object(py::none()) : py::object(py::int_(p.event));
      })
      .def_property_readonly("start_ns", [](const PyCriticalPath& p) { return p.path.start_ns; })
      .def_property_readonly("end_ns", [](const PyCriticalPath& p) { return p.path.end_ns; })
      .def_property_readonly("length_ns", [](const PyCriticalPath& p) { return p.path.length_ns(); })
      .def_property_readonly("unexplained_ns", [](const PyCriticalPath& p) { return p.path.unexplained_ns; })
      .def_property_readonly("trace", [](const PyCriticalPath& p) { return p.trace; })
      .def("bound_ns", &path_bound_ns)
      .def("segments", &path_segments)
      .def("critical_events", [](const PyCriticalPath& p) {
        std::vector<std::uint32_t> out;
        const std::vector<std::uint8_t> marked = critical_events(p, p.trace->trace.events.size());
        for (std::uint32_t e = 0; e < marked.size(); ++e)
          if (marked[e]) out.push_back(e);
        return out;
      })
      .def("overlay", &overlay_path, py::arg("path"), py::arg("only_critical") = false);
  m.def("critical_path", &critical_path, py::arg("trace"), py::arg("annotation"), py::arg("instance") = 0);
  m.def("whatif", &whatif, py::arg("trace"), py::arg("edits"));
  m.def("rule_ids", &rule_ids);
  m.def("table_sort_keys", &table_sort_keys);
  m.def("event_kind_names", [] {
    std::vector<std::string> out;
    for (int k = 0; k < static_cast<int>(EventKind::kCount_); ++k) {
      out.emplace_back(event_kind_name(static_cast<EventKind>(k)));
    }
    return out;
  });
}
