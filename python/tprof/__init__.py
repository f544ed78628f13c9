"""tprof: torch.profiler / Kineto traces in Python at C++ speed.

    import tprof
    t = tprof.read("worker0.pt.trace.json.gz")       # path, bytes or binary file
    df = t.events()                                  # one row per event, names as categoricals
    t.ts_ns, t.dur_ns                                # zero-copy NumPy views of the columns
    print(t.table(sort_by="cuda_time_total", row_limit=10, text=True))  # torch's table, byte for byte
    t.table(sort_by="cuda_time_total")               # the same rows as a DataFrame
    t.steps(), t.kernels(), t.diagnose()
    tprof.compare(a, b)

    from tprof import TraceAnalysis                  # HolisticTraceAnalysis' API
    TraceAnalysis(trace_dir="ranks/").get_temporal_breakdown()

Reading and every analysis run in C++ with the GIL released; the DataFrames
are built from NumPy arrays and from the reports' JSON (the same rows as
`tprof ... --format json`). Errors in a trace raise TraceError (a
ValueError) naming the file, the byte offset and what was expected.
Documentation: docs/python.md.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _tprof
from ._frames import frame as _frame
from ._tprof import TraceError

__version__: str = _tprof.__version__

__all__ = [
    "Trace",
    "TraceError",
    "TraceAnalysis",
    "CriticalPathGraph",
    "Diagnosis",
    "Finding",
    "Comparison",
    "read",
    "read_many",
    "compare",
    "rule_ids",
    "table_sort_keys",
]

_PHASES = ["X", "i", "C", "s", "t", "f", "M"]  # the order of events_frame()'s ph codes (python/module.cc)
_KINDS: List[str] = list(_tprof.event_kind_names())

# The event columns a Trace exposes as views: (attribute, model column).
_COLUMNS = {
    "ts_ns": "ts_ns",
    "dur_ns": "dur_ns",
    "name_id": "name",
    "cat_id": "cat",
    "lane": "lane",
    "phase": "phase",
    "kind": "kind",
    "flags": "flags",
    "external_id": "external_id",
    "correlation": "correlation",
    "flow_id": "flow_id",
    "args_ref": "args_ref",
    "src_offset": "src_offset",
}

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]


def read(source: Source, *, threads: int = 0, strict: bool = False, step_range: Optional[str] = None) -> "Trace":
    """Reads a trace: a path (str or os.PathLike; .json or .json.gz,
    detected from the content), a bytes-like object (bytes, bytearray,
    memoryview, array, a NumPy array: any C-contiguous buffer, read as its
    memory; plain or gzip), or a file object opened in binary mode.

    threads: parser threads (0: one per hardware thread). strict: refuse
    the file at the first syntax error inside traceEvents instead of
    skipping to the next event (the skipped ranges are diagnostics).
    step_range: the name of the host range (an NVTX range, a
    record_function) whose outermost calls are the steps, as the CLI's
    --step-range (docs/steps.md); a name the trace lacks raises ValueError
    listing the repeated ranges it has. Raises TraceError (file, byte
    offset, what was expected) for a file that is not a trace, OSError-like
    failures included (code "io"); ValueError for a path with a NUL byte
    and for a buffer that is not C-contiguous (a strided view: pass
    bytes(view)). The GIL is released while reading; the trace keeps no
    reference to a buffer it was read from."""
    sr = _step_range(step_range)
    if isinstance(source, (str, os.PathLike)):
        return Trace(_tprof.read(source, threads, strict, sr))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Trace(_tprof.read_bytes(source, "<bytes>", threads, strict, sr))
    if hasattr(source, "read"):
        data = source.read()
        if isinstance(data, str):
            raise TypeError("tprof.read: open the file in binary mode ('rb')")
        name = getattr(source, "name", "<file>")  # str, bytes, or os.fdopen's descriptor number
        return Trace(_tprof.read_bytes(data, name, threads, strict, sr))
    return Trace(_tprof.read_bytes(source, "<bytes>", threads, strict, sr))


def _step_range(step_range: Optional[str]) -> str:
    if step_range is None:
        return ""
    if not isinstance(step_range, str) or not step_range:
        raise ValueError(f"tprof.read: step_range is a range's name (a non-empty str), got {step_range!r}")
    return step_range


def read_many(paths: Sequence[Union[str, bytes, "os.PathLike[str]"]], *, threads: int = 0,
              strict: bool = False, step_range: Optional[str] = None) -> List["Trace"]:
    """Reads several trace files in parallel (C++ threads, GIL released), in
    the order given. Raises the first file's TraceError, in that order; a
    path with a NUL byte raises ValueError before anything is read.
    step_range: as read's, for every file."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError("tprof.read_many: a sequence of paths, not one path")
    return [Trace(c) for c in _tprof.read_many(list(paths), threads, strict, _step_range(step_range))]


def rule_ids() -> List[str]:
    """The ids of diagnose's rules (for Trace.diagnose(only=...))."""
    return list(_tprof.rule_ids())


def table_sort_keys() -> List[str]:
    """The sort_by keys Trace.table accepts (torch's)."""
    return list(_tprof.table_sort_keys())


@dataclass
class Finding:
    """One diagnose finding: a stable snake_case id, a severity
    (info|warning|critical), a title, the evidence (numbers and event
    references: name, lane, ts_ns, step), the advice, and its impact in ns.
    `extra` holds any other field of the JSON."""

    id: str
    severity: str
    title: str
    evidence: Dict[str, Any]
    advice: str
    impact_ns: int = 0
    impact_per_step_ns: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _from_json(cls, d: Dict[str, Any]) -> "Finding":
        known = {"id", "severity", "title", "evidence", "advice", "impact_ns", "impact_per_step_ns"}
        return cls(
            id=d.get("id", ""),
            severity=d.get("severity", ""),
            title=d.get("title", ""),
            evidence=d.get("evidence", {}),
            advice=d.get("advice", ""),
            impact_ns=d.get("impact_ns", 0),
            impact_per_step_ns=d.get("impact_per_step_ns", 0),
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass
class Diagnosis:
    """What `tprof diagnose --format json` says: the verdict, its summary and
    evidence, per-step verdicts (a DataFrame), findings (Finding, by
    severity then impact), causes, the GPU idle time by cause, and the
    peers' breakdowns. `raw` is the whole JSON document."""

    verdict: str
    summary: str
    verdict_evidence: Dict[str, Any]
    support: List[str]
    steps: pd.DataFrame
    findings: List[Finding]
    causes: List[Dict[str, Any]]
    idle: Optional[Dict[str, Any]]
    threads: List[Dict[str, Any]]
    breakdowns: Dict[str, Any]
    raw: Dict[str, Any]

    def finding(self, id: str) -> Optional[Finding]:
        """The finding with this id, or None."""
        return next((f for f in self.findings if f.id == id), None)


@dataclass
class Comparison:
    """What `tprof compare A B --format json` says: steps aligned, the
    median step's change with its noise, per-metric comparisons, per-op and
    per-kernel deltas (DataFrames). `raw` is the whole JSON document."""

    steps: pd.DataFrame
    metrics: pd.DataFrame
    ops: pd.DataFrame
    kernels: pd.DataFrame
    median_step: Dict[str, Any]
    verdict_changed: bool
    raw: Dict[str, Any]


class Trace:
    """A loaded trace: tprof's columnar model (include/tprof/trace.h).

    Every event column is a read-only NumPy view of the model's memory
    (no copy; the view keeps the trace alive): ts_ns, dur_ns (int64 ns),
    name_id, cat_id (uint32 string ids; strings() decodes), lane (uint32,
    index into lanes()), phase (uint8, the "ph" character), kind (uint8,
    index into kind_names), flags, external_id, correlation, flow_id
    (int64, -1 when absent), args_ref, src_offset (uint64 byte offset of
    the event in the file)."""

    __slots__ = ("_core",)
    kind_names: List[str] = _KINDS

    def __init__(self, core: Any) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"<tprof.Trace {self.path!r}: {len(self)} events>"

    def __len__(self) -> int:
        return len(self._core)

    def __getattr__(self, name: str) -> np.ndarray:
        column = _COLUMNS.get(name)
        if column is None:
            raise AttributeError(name)
        return self._core.column(column)

    @property
    def path(self) -> str:
        """The file read, or "<bytes>" / the file object's name."""
        return self._core.path

    def column(self, name: str) -> np.ndarray:
        """The event column `name` (a model column name: ts_ns, name, cat, ...) as a view."""
        return self._core.column(_COLUMNS.get(name, name))

    def strings(self, ids: Any) -> List[str]:
        """The strings of string ids (name_id, cat_id values)."""
        return self._core.strings(np.asarray(ids, dtype=np.uint32).reshape(-1))

    def args(self, event: int) -> Dict[str, Any]:
        """Event `event`'s args, decoded ({} when it has none)."""
        text = self._core.args_json(int(event))
        # strict=False: a control character the file wrote raw inside a
        # string (which the reader accepts in names too) is kept, not an error.
        return json.loads(text, strict=False) if text else {}

    @property
    def metadata(self) -> Dict[str, Any]:
        """format, producer, gzip, base_time_ns, dropped_events, and
        top_level: every top-level key but traceEvents, decoded."""
        m = self._core.metadata()
        m["top_level"] = {k: json.loads(v, strict=False) for k, v in m["top_level"].items()}
        return m

    @property
    def diagnostics(self) -> List[Dict[str, Any]]:
        """Odd data found while loading (code, severity, event, byte_offset,
        message), at most 16 per code; diagnostic_counts() has the totals."""
        return self._core.diagnostics()

    def diagnostic_counts(self) -> Dict[str, int]:
        """Diagnostics by code, counted exactly."""
        return self._core.diagnostic_counts()

    @property
    def start_ns(self) -> int:
        return self._core.start_ns()

    @property
    def end_ns(self) -> int:
        return self._core.end_ns()

    def lanes(self) -> pd.DataFrame:
        """One row per lane (timeline row): pid, tid (as written: int or
        str), kind (cpu, gpu, other), device, stream (GPU lanes; -1
        otherwise), thread_name."""
        return pd.DataFrame(self._core.lanes())

    def events(self, sort: bool = False, args: Optional[Sequence[str]] = None, derived: bool = False) -> pd.DataFrame:
        """One row per event, in file order (sort=True: by ts_ns, stably,
        equal times in file order): name, cat, ph, kind (categoricals),
        then int64 columns: ts_ns, dur_ns (ns), pid, tid, device, stream
        (from the event's lane: device and stream are -1 off GPU lanes; a
        pid or tid written as a string is -1, lanes() has it as written),
        correlation, external_id, flow_id (-1 when absent).

        derived=True adds three int64 columns computed in C++: parent (the
        enclosing event on the same lane, `tprof export --sqlite`'s
        events.parent_id: a complete event's innermost container, an
        instant's or a flow event's slice open at its time; -1 at the top
        level), depth (0 at the top level), step (N of the ProfilerStep#N
        the event falls in: device activity by its launch call's time, as
        the SQL export's kernels.step, anything else by its ts; -1 outside
        steps). They cost several times the plain frame, so they are
        computed only when asked for.

        The frame's index is the event index (file order; what parent,
        args() and the SQL export's ids refer to), so df.loc[df.parent]
        finds the parents whether or not the rows are sorted.

        args: keys of the events' args, one object column each (named as
        the key; "args.KEY" where the key is a column name already): the
        value decoded as json does (int, float, str, list, dict, bool),
        None where the event has no such key. Read and decoded in C++.

        Built in C++ without a Python loop; the frame owns its memory (it
        does not keep the trace alive)."""
        keys: List[str] = []
        if args is not None:
            if isinstance(args, (str, bytes)):
                raise TypeError("Trace.events(args=...): a sequence of keys, not one key")
            for k in args:
                if not isinstance(k, str):
                    raise TypeError(f"Trace.events(args=...): keys are str, got {type(k).__name__}")
                if k not in keys:
                    keys.append(k)
        f = self._core.events_frame(bool(sort), keys, bool(derived))
        # The numeric columns arrive as one int64 block that pandas wraps
        # without a copy; the categoricals take their codes as they are.
        index = pd.Index(f["index"]) if sort else None
        df = pd.DataFrame(f["block"].T, columns=f["block_columns"], index=index, copy=False)
        df.insert(0, "kind", pd.Categorical.from_codes(f["kind_codes"], categories=_KINDS))
        df.insert(0, "ph", pd.Categorical.from_codes(f["ph_codes"], categories=_PHASES))
        df.insert(0, "cat", pd.Categorical.from_codes(f["cat_codes"], categories=pd.Index(f["cats"], dtype=object)))
        df.insert(0, "name", pd.Categorical.from_codes(f["name_codes"], categories=pd.Index(f["names"], dtype=object)))
        for key, values in zip(keys, f["args"]):
            column = key
            while column in df.columns:
                column = "args." + column
            df[column] = values
        return df

    def table(
        self,
        sort_by: Optional[str] = None,
        row_limit: int = 100,
        max_src_column_width: int = 75,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: Optional[str] = None,
        top_level_events_only: bool = False,
        *,
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        memory: str = "auto",
        times: str = "auto",
        events: bool = False,
        text: bool = False,
    ) -> Union[pd.DataFrame, str]:
        """torch's prof.key_averages(group_by_input_shape, group_by_stack_n)
        .table(sort_by, row_limit, ...): text=True returns torch's text byte
        for byte; otherwise the same rows as `tprof table --format json`, a
        DataFrame with times in ns and memory in bytes (attrs["device"]:
        the device columns' name). events=True: prof.events().table().
        memory: the CPU Mem columns (auto: when the trace has [memory]
        events). times: auto, us (torch 1.13's truncated µs) or ns.
        Raises ValueError for an unknown sort_by."""
        out = _tprof.table(
            self._core,
            sort_by or "",
            row_limit,
            max_name_column_width,
            max_src_column_width,
            max_shapes_column_width,
            header,
            top_level_events_only,
            group_by_input_shape,
            group_by_stack_n,
            memory,
            times,
            events,
            "text" if text else "json",
        )
        if text:
            return out
        doc = json.loads(out)
        df = _frame(doc["rows"])
        df.attrs["device"] = doc.get("device", "CUDA")
        return df

    def steps(self, text: bool = False) -> Union[pd.DataFrame, str]:
        """One row per ProfilerStep#N, as `tprof steps --format json`:
        step, start_ns, start_offset_ns, dur_ns, cpu_busy_ns, gpu_busy_ns,
        gpu_idle_pct, launches, first_kernel_* (the step's first device
        activity and its launch). attrs: has_device, trace_start_ns."""
        out = _tprof.steps(self._core, text)
        if text:
            return out
        doc = json.loads(out)
        df = _frame(doc["steps"])
        df.attrs.update({k: v for k, v in doc.items() if k != "steps"})
        return df

    def kernels(self, text: bool = False) -> Union[pd.DataFrame, str]:
        """One row per device activity name, as `tprof kernels --format
        json`: name, short_name, category, count, total_ns, mean_ns,
        median_ns, p90_ns, min_ns, max_ns, cv, outliers (a list per row).
        attrs: total_ns (and ranges, for range-profiler traces)."""
        out = _tprof.kernels(self._core, text)
        if text:
            return out
        doc = json.loads(out)
        df = _frame(doc["kernels"])
        df.attrs.update({k: v for k, v in doc.items() if k != "kernels"})
        return df

    def memory(self, text: bool = False, device: Optional[int] = None) -> Union[pd.DataFrame, str]:
        """One row per [memory] record, as `tprof memory --format csv`:
        device, ts_ns, bytes, addr, allocated (torch's Total Allocated, or a
        running sum where the trace has no totals), reserved, step, op,
        stack; absent values are NaN. attrs["report"] is `tprof memory
        --format json` per device: the peak and what was live at it, each
        step's high-water mark, spike and growth, the leak check.
        device: only that index (-1: the CPU)."""
        if text:
            return _tprof.memory(self._core, "text", device)
        df = pd.read_csv(io.StringIO(_tprof.memory(self._core, "csv", device)),
                         dtype={"device": str, "op": str, "stack": str}, keep_default_na=False,
                         na_values={"addr": [""], "reserved": [""], "step": [""]})
        df["step"] = df["step"].astype("Int64")
        df.attrs["report"] = json.loads(_tprof.memory(self._core, "json", device))
        return df

    def diagnose(self, only: Sequence[str] = (), text: bool = False, verbose: bool = False) -> Union[Diagnosis, str]:
        """Every diagnose rule (or `only` these ids): a Diagnosis, or with
        text=True the report `tprof diagnose` prints (verbose: every step
        and evidence field)."""
        if text:
            return _tprof.diagnose(self._core, list(only), "text", verbose)
        doc = json.loads(_tprof.diagnose(self._core, list(only), "json", False))
        return Diagnosis(
            verdict=doc.get("verdict", ""),
            summary=doc.get("summary", ""),
            verdict_evidence=doc.get("verdict_evidence", {}),
            support=doc.get("support", []),
            steps=_frame(doc.get("steps", [])),
            findings=[Finding._from_json(f) for f in doc.get("findings", [])],
            causes=doc.get("causes", []),
            idle=doc.get("idle"),
            threads=doc.get("threads", []),
            breakdowns=doc.get("breakdowns", {}),
            raw=doc,
        )

    # HolisticTraceAnalysis' analyses over this one trace (its rank); the
    # same as TraceAnalysis(traces=[t]).<method>(...).
    def _analysis(self) -> "TraceAnalysis":
        return TraceAnalysis(traces=[self])

    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        return self._analysis().get_temporal_breakdown(visualize)

    def get_idle_time_breakdown(self, ranks=None, streams=None, visualize=False, visualize_pctg=True,
                                show_idle_interval_stats=False, consecutive_kernel_delay=30):
        return self._analysis().get_idle_time_breakdown(ranks, streams, visualize, visualize_pctg,
                                                        show_idle_interval_stats, consecutive_kernel_delay)

    def get_gpu_kernel_breakdown(self, visualize=False, duration_ratio=0.8, num_kernels=10,
                                 include_memory_kernels=True, image_renderer=""):
        return self._analysis().get_gpu_kernel_breakdown(visualize, duration_ratio, num_kernels,
                                                         include_memory_kernels, image_renderer)

    def get_comm_comp_overlap(self, visualize: bool = False) -> pd.DataFrame:
        return self._analysis().get_comm_comp_overlap(visualize)

    def get_queue_length_summary(self, ranks=None):
        return self._analysis().get_queue_length_summary(ranks)

    def get_queue_length_time_series(self, ranks=None):
        return self._analysis().get_queue_length_time_series(ranks)

    def critical_path_analysis(self, annotation: str = "ProfilerStep", instance_id: Optional[int] = 0,
                               data_load_events: Optional[List[str]] = None):
        """TraceAnalysis.critical_path_analysis for this trace's rank:
        (CriticalPathGraph, True), or None when the window is not there."""
        a = self._analysis()
        return a.critical_path_analysis(a.ranks[0], annotation, instance_id, data_load_events)

    def overlay_critical_path_analysis(self, critical_path_graph: Any, output_dir: str,
                                       only_show_critical_events: bool = True, show_all_edges: bool = False) -> str:
        """TraceAnalysis.overlay_critical_path_analysis for this trace's rank."""
        a = self._analysis()
        return a.overlay_critical_path_analysis(a.ranks[0], critical_path_graph, output_dir,
                                                only_show_critical_events, show_all_edges)

    def whatif(self, edits: Union[str, Sequence[str]]) -> pd.DataFrame:
        """`tprof whatif --edit EDIT ...` (docs/critical-path.md, "Edits"):
        the trace's dependency graph replayed with the edits ("remove:op::add",
        "scale:gemm=0.5", "graph", "release", "drop-sync:PATTERN", "overlap:PATTERN").
        One row per step: step (<NA> for the one window of a trace without
        ProfilerSteps), measured_ns, replayed_ns (the replay without edits),
        predicted_ns (with them). attrs: matched ({edit: events it
        changed}), has_steps. An edit that does not parse, or matches
        nothing it can change, raises ValueError with the reason."""
        edits = [edits] if isinstance(edits, str) else [str(e) for e in edits]
        d = _tprof.whatif(self._core, edits)
        step = pd.array(d["step"], dtype="Int64")
        if not d["has_steps"]:
            step[:] = pd.NA
        df = pd.DataFrame(
            {"step": step, "measured_ns": d["measured_ns"], "replayed_ns": d["replayed_ns"],
             "predicted_ns": d["predicted_ns"]}
        )
        df.attrs["matched"] = dict(zip(edits, (int(m) for m in d["matched"])))
        df.attrs["has_steps"] = bool(d["has_steps"])
        return df


def compare(a: Trace, b: Trace, text: bool = False, label_a: str = "A", label_b: str = "B",
            top: int = 10) -> Union[Comparison, str]:
    """`tprof compare A B`: steps aligned (by number, else order), the
    median step's change against the noise, the gate's metric (the steady state),
    and per-op / per-kernel deltas. text=True: the report as printed (top:
    the op and kernel rows shown)."""
    if text:
        return _tprof.compare(a._core, b._core, "text", label_a, label_b, top)
    doc = json.loads(_tprof.compare(a._core, b._core, "json", label_a, label_b, top))
    return Comparison(
        steps=_frame(doc.get("steps", [])),
        metrics=_frame(doc.get("metrics", [])),
        ops=_frame(doc.get("ops", [])),
        kernels=_frame(doc.get("kernels", [])),
        median_step=doc.get("median_step", {}),
        verdict_changed=bool(doc.get("verdict_changed", False)),
        raw=doc,
    )


from .hta import CriticalPathGraph, TraceAnalysis  # noqa: E402  (uses Trace and read_many)
