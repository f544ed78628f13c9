// Fuzz target: the Python module's read path (python/, docs/python.md) in an
// embedded interpreter. Each input is read by tprof.read as bytes, as a
// memoryview of the fuzzer's own buffer, as a bytearray, as a reversed and
// a strided memoryview, as a memoryview cast to 4-byte items, as a file
// object and as a path; every trace that loads goes through events()
// (plain, sorted, with args columns and the derived parent/depth/step),
// lanes(), metadata, diagnostics, args(), strings(), table (frame and
// text), steps, kernels, diagnose (Diagnosis and text), compare and
// HolisticTraceAnalysis' frames (TraceAnalysis: the queue lengths and the
// time at a full queue, memory bandwidth, stragglers).
//
// Properties checked on every input, beyond "does not crash":
//   - every exception is a ValueError (tprof.TraceError is one), never a
//     UnicodeError, TypeError, KeyError, IndexError, ...;
//   - a strided or reversed view of two bytes or more is refused with the
//     module's ValueError (a view of one item is its bytes);
//   - bytes, the views, the bytearray, the file object and the path agree:
//     the same number of events, or the same error code and offset;
//   - every str the module returns (names, args, frames' cells and
//     categories, reports' text) is valid UTF-8 (no lone surrogate), and the
//     categories of events() are distinct;
//   - events(sort=True) holds the rows of events() (its index a permutation
//     of the event indices) in ts order; an args=[...] column per key
//     (named "args.KEY" where KEY is a column already); derived=True's
//     parent is -1 or another event, at depth one less;
//   - get_time_spent_blocked_on_full_queue has HTA's columns and a row only
//     for a (rank, stream) of the series whose queue reaches the length,
//     its time no more than the stream's span; get_potential_stragglers
//     (on the trace, and on the trace twice as ranks 0 and 1) returns
//     ranks of the analysis.
// A broken property aborts, so libFuzzer and the ctest replay both report it.
//
// Built in python/CMakeLists.txt with the extension it imports (it needs
// the Python module built: TPROF_PYTHON_DIR is the build's python/ folder),
// with replay_main.cc for ctest, and under TPROF_BUILD_LIBFUZZER as
// python_libfuzzer:
//   build-fuzz/python/python_libfuzzer -max_len=8192 new_corpus tests/fuzz/corpus_python
#include <pybind11/embed.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace py = pybind11;

// The interpreter, NumPy and pandas keep objects to the end of the process
// by design; their "leaks" would be reported at every input (libFuzzer) or
// exit (the replay). Not a tprof finding.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace {

// The harness, run in the embedded interpreter (its own namespace).
constexpr const char* kHarness = R"PY(
import io
import os
import sys
import tempfile

import numpy as np
import pandas as pd

import tprof

_dir = tempfile.TemporaryDirectory(prefix="tprof_python_fuzzer_")
_path = os.path.join(_dir.name, "input.json")


class PropertyFailed(Exception):
    pass


def check_str(value, where):
    """Every str inside value is valid UTF-8 (no lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeError as e:
            raise PropertyFailed(f"{where}: a str that is not valid UTF-8: {value!r}") from e
    elif isinstance(value, dict):
        for k, v in value.items():
            check_str(k, where)
            check_str(v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_str(v, where)
    elif isinstance(value, pd.DataFrame):
        for c in value.columns:
            check_str(c, where)
            col = value[c]
            if isinstance(col.dtype, pd.CategoricalDtype):
                cats = list(col.cat.categories)
                if len(set(cats)) != len(cats):
                    raise PropertyFailed(f"{where}: categories of {c} repeat")
                check_str(cats, where)
            elif col.dtype == object:
                check_str(list(col), where)
    elif isinstance(value, tprof.Diagnosis):
        check_str(value.raw, where)
        check_str(value.steps, where)
    elif isinstance(value, tprof.Comparison):
        check_str(value.raw, where)


def call(where, fn):
    """fn(), its result checked; a ValueError (TraceError included) is an
    allowed answer (None), any other exception a failure."""
    try:
        out = fn()
    except PropertyFailed:
        raise
    except UnicodeError as e:
        raise PropertyFailed(f"{where}: {type(e).__name__}: {e}") from e
    except ValueError as e:
        check_str(str(e), where)
        return None
    except Exception as e:
        raise PropertyFailed(f"{where}: {type(e).__name__}: {e}") from e
    check_str(out, where)
    return out


def outcome(where, fn):
    """(True, events) or (False, code, offset) of one read."""
    try:
        t = fn()
    except tprof.TraceError as e:
        check_str([str(e), e.reason, e.path], where)
        return (False, e.code, e.offset), None
    except Exception as e:
        raise PropertyFailed(f"{where}: {type(e).__name__}: {e}") from e
    return (True, len(t)), t


ARG_KEYS = ["stream", "correlation", "memory bandwidth (GB/s)", "name", "", "Input Dims", "\u00e9\u0000"]
FULL_QUEUE_COLUMNS = ["rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"]


def check_events(t, n, df):
    """events(sort=True) and events(args=..., derived=True) against the plain frame."""
    s = call("events sorted", lambda: t.events(sort=True))
    if s is not None and df is not None:
        if len(s) != n or sorted(s.index.tolist()) != list(range(n)):
            raise PropertyFailed("events(sort=True): its index is not a permutation of the events")
        if n and (np.diff(s["ts_ns"].to_numpy()) < 0).any():
            raise PropertyFailed("events(sort=True): not in ts order")
        if not s["ts_ns"].equals(df.loc[s.index, "ts_ns"]) or not s["name"].astype(object).equals(
                df.loc[s.index, "name"].astype(object)):
            raise PropertyFailed("events(sort=True): a row differs from events()'s row of its index")
    d = call("events args derived", lambda: t.events(sort=True, args=ARG_KEYS, derived=True))
    if d is None:
        return
    if len(d) != n:
        raise PropertyFailed(f"events(args, derived): {len(d)} rows for {n} events")
    for key in ARG_KEYS:
        column = key
        while column in df.columns:
            column = "args." + column
        if column not in d.columns or d[column].dtype != object:
            raise PropertyFailed(f"events(args): no object column {column!r} for the key {key!r}")
    parent = d["parent"].to_numpy()
    depth = d["depth"].to_numpy()
    if ((parent < -1) | (parent >= n)).any() or (parent == d.index.to_numpy()).any() or (depth < 0).any():
        raise PropertyFailed("events(derived): a parent outside the events, an event its own parent, or a negative depth")
    has = parent >= 0
    if (depth[~has] != 0).any() or (d.loc[parent[has], "depth"].to_numpy() != depth[has] - 1).any():
        raise PropertyFailed("events(derived): a depth that is not its parent's plus one")
    if (d["step"].to_numpy() < -1).any():
        raise PropertyFailed("events(derived): a step below -1")


def check_full_queue(series, frame, limit):
    if list(frame.columns) != FULL_QUEUE_COLUMNS:
        raise PropertyFailed(f"full queue: columns {list(frame.columns)}")
    for rank, stream, duration in zip(frame["rank"], frame["stream"], frame["duration_at_max_queue_length"]):
        s = series.get(rank)
        s = s[s["stream"] == stream] if s is not None else None
        if s is None or s.empty or s["queue_length"].max() < limit:
            raise PropertyFailed(f"full queue: a row for rank {rank} stream {stream}, whose queue never reaches {limit}")
        span = s["ts"].max() - s["ts"].min()
        if not (0 <= duration <= span + 1e-6 * (abs(span) + abs(s["ts"]).max()) + 1e-9):
            raise PropertyFailed(f"full queue: {duration} µs at the max on a stream spanning less")


def exercise_analysis(t):
    """HolisticTraceAnalysis' methods of TraceAnalysis (beyond the Trace's own)."""
    a = call("TraceAnalysis", lambda: tprof.TraceAnalysis(traces=[t]))
    if a is None:
        return
    series = call("queue series", a.get_queue_length_time_series) or {}
    call("queue summary from series", lambda: a.get_queue_length_summary_from_time_series(series))
    for limit in (1024, 1, 2):
        frame = call(f"full queue {limit}", lambda: a.get_time_spent_blocked_on_full_queue(series, max_queue_length=limit))
        if frame is not None:
            check_full_queue(series, frame, limit)
    call("full queue default", a.get_time_spent_blocked_on_full_queue)
    call("memory bw series", lambda: a.get_memory_bw_time_series(ranks=a.ranks))
    call("memory bw summary", a.get_memory_bw_summary)
    # Stragglers need two ranks: the trace twice (ranks 0 and 1 without a
    # distributedInfo.rank; with one, a ValueError: the rank appears twice).
    pair = call("TraceAnalysis twice", lambda: tprof.TraceAnalysis(traces=[t, t]))
    for analysis in [a] + ([pair] if pair is not None else []):
        steps = call("profiler steps", analysis.get_profiler_steps)
        for kwargs in ({}, {"num_candidates": 1}, {"num_candidates": 0}, {"profiler_steps": (steps or [])[:1] + [-1]}):
            got = call(f"stragglers {kwargs}", lambda: analysis.get_potential_stragglers(**kwargs))
            if got is not None and not set(got) <= set(analysis.ranks):
                raise PropertyFailed(f"get_potential_stragglers({kwargs}): {got}, not ranks of {analysis.ranks}")


def exercise(t):
    n = len(t)
    df = call("events", t.events)
    if df is not None and len(df) != n:
        raise PropertyFailed(f"events(): {len(df)} rows for {n} events")
    check_events(t, n, df)
    exercise_analysis(t)
    call("lanes", t.lanes)
    call("metadata", lambda: t.metadata)
    call("diagnostics", lambda: (t.diagnostics, t.diagnostic_counts()))
    call("strings", lambda: t.strings(t.name_id) + t.strings(t.cat_id))
    call("path", lambda: t.path)
    for i in list(range(min(n, 32))) + list(range(max(32, n - 8), n)):
        call(f"args({i})", lambda: t.args(i))
    call("table", lambda: t.table(row_limit=-1))
    call("table text", lambda: t.table(text=True))
    call("table events text", lambda: t.table(events=True, group_by_stack_n=2, text=True))
    call("steps", t.steps)
    call("steps text", lambda: t.steps(text=True))
    call("kernels", t.kernels)
    call("kernels text", lambda: t.kernels(text=True))
    call("diagnose", t.diagnose)
    call("diagnose text", lambda: t.diagnose(text=True, verbose=True))
    call("compare", lambda: tprof.compare(t, t))
    call("compare text", lambda: tprof.compare(t, t, text=True))
    call("temporal", lambda: t.get_temporal_breakdown(visualize=False))
    call("idle", lambda: t.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True))
    call("kernel breakdown", lambda: list(t.get_gpu_kernel_breakdown(visualize=False)))
    call("overlap", lambda: t.get_comm_comp_overlap(visualize=False))
    call("queue summary", t.get_queue_length_summary)
    call("queue series", t.get_queue_length_time_series)
    for annotation in ("", "ProfilerStep", "a"):
        cp = call(f"critical path {annotation!r}", lambda: t.critical_path_analysis(annotation, 0))
        if cp is not None:
            g = cp[0]
            call("critical path frames", lambda: [g.path, g.get_critical_path_breakdown(), g.critical_path_events()])
            if int(g.summary_ns().sum()) != g.length_ns:
                raise PropertyFailed(f"critical path {annotation!r}: the summary does not sum to the path's length")
    call("whatif", lambda: t.whatif([]))
    call("whatif graph", lambda: t.whatif(["graph"]))


def refused_view(where, view):
    try:
        tprof.read(view, threads=1)
    except ValueError as e:
        if "not C-contiguous" not in str(e):
            raise PropertyFailed(f"{where}: refused with another ValueError: {e}") from e
        return
    except Exception as e:
        raise PropertyFailed(f"{where}: {type(e).__name__}: {e}") from e
    raise PropertyFailed(f"{where}: a non-contiguous view of {len(view)} items was read")


def one(data, input_view):
    """data: the input as bytes; input_view: a memoryview of the fuzzer's
    own buffer (released after the call: a trace that kept a pointer into
    it would be a use after free under ASan)."""
    with open(_path, "wb") as f:
        f.write(data)
    want, t = outcome("bytes", lambda: tprof.read(data, threads=1))
    padded = data + b" " * (-len(data) % 4)
    reads = {
        "memoryview of the input": lambda: tprof.read(input_view, threads=1),
        "bytearray": lambda: tprof.read(bytearray(data), threads=1),
        "path": lambda: tprof.read(_path, threads=1),
        "file object": lambda: tprof.read(io.BytesIO(data), threads=1),
    }
    if padded == data:
        reads["memoryview cast to 'I'"] = lambda: tprof.read(memoryview(data).cast("I"), threads=1)
    for where, fn in reads.items():
        got, _ = outcome(where, fn)
        if got != want:
            raise PropertyFailed(f"{where} read {got}, bytes read {want}")
    doubled = bytearray(2 * len(data))
    doubled[::2] = data
    strided = memoryview(doubled)[::2]
    if len(data) >= 2:
        refused_view("reversed view", memoryview(data)[::-1])
        refused_view("strided view", strided)
    else:
        got, _ = outcome("one-item view", lambda: tprof.read(strided, threads=1))
        if got != want:
            raise PropertyFailed(f"a one-item strided view read {got}, bytes read {want}")
    if t is not None:
        exercise(t)
)PY";

struct Harness {
  py::scoped_interpreter interpreter{false};  // no signal handlers: libFuzzer's stay
  py::object one;

  Harness() {
    py::module_::import("sys").attr("path").attr("insert")(0, TPROF_PYTHON_DIR);
    py::dict scope;
    scope["__builtins__"] = py::module_::import("builtins");
    scope["__name__"] = "tprof_python_fuzzer";
    py::exec(kHarness, scope);
    one = scope["one"];
  }
};

Harness& harness() {
  static Harness* h = [] {
    // Before the interpreter starts: every Python object on the C heap,
    // where ASan sees its bounds (pymalloc's pools would hide a read past a
    // small bytes object), unless the caller chose otherwise.
    setenv("PYTHONMALLOC", "malloc", 0);
    try {
      return new Harness();  // never destroyed: finalizing under libFuzzer's exit is not worth the risk
    } catch (const py::error_already_set& e) {
      std::fprintf(stderr, "python_fuzzer: cannot start the harness (is the module built? %s):\n%s\n",
                   TPROF_PYTHON_DIR, e.what());
      std::abort();
    }
  }();
  return *h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness& h = harness();
  try {
    // The fuzzer's buffer itself, not only a copy: a read past its end is
    // an ASan report (the replay gives each input a heap block of its size).
    char* input = const_cast<char*>(reinterpret_cast<const char*>(data));  // read-only view: never written
    py::object view = py::reinterpret_steal<py::object>(
        PyMemoryView_FromMemory(input, static_cast<Py_ssize_t>(size), PyBUF_READ));
    if (!view) throw py::error_already_set();
    h.one(py::bytes(reinterpret_cast<const char*>(data), size), view);
    view.attr("release")();
  } catch (const py::error_already_set& e) {
    std::fprintf(stderr, "python_fuzzer: property failed:\n%s\n", e.what());
    std::abort();
  }
  return 0;
}
