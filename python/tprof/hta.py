"""HolisticTraceAnalysis' notebook API on tprof's C++ analyses.

    from tprof import TraceAnalysis            # was: from hta.trace_analysis import TraceAnalysis
    analyzer = TraceAnalysis(trace_dir="traces/")
    analyzer.get_temporal_breakdown()
    analyzer.get_idle_time_breakdown()
    analyzer.get_gpu_kernel_breakdown()
    analyzer.get_comm_comp_overlap()
    analyzer.get_queue_length_summary()
    cp_graph, success = analyzer.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=1)
    analyzer.overlay_critical_path_analysis(0, cp_graph, output_dir="out/")

The methods take HTA's arguments and return HTA's DataFrames: its column
names, its units (µs, as HTA reads the file's ts and dur) and its rounding.
The figures come from tprof's C++ breakdowns (src/analyze/breakdowns.cc,
docs/diagnose.md "Breakdowns", where the few deliberate differences from
HTA are listed). visualize/image_renderer are accepted and ignored: no
plots are drawn.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import _tprof

_IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")  # HTA's IdleTimeType order
_IDLE_STATS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")  # pandas' describe()
_INT64_MAX = 2**63 - 1


def _us(ns: Any) -> Any:
    """ns -> HTA's µs: whole µs as int64 (HTA's integer columns), else float."""
    a = np.asarray(ns, dtype=np.int64)
    if a.size and np.all(a % 1000 == 0):
        return a // 1000
    return a / 1000.0


def _delay_ns(consecutive_kernel_delay: Any) -> int:
    """HTA's consecutive_kernel_delay (the file's µs) as an integer ns
    threshold t with gap < t exactly when HTA's gap_us < delay."""
    d = float(consecutive_kernel_delay)
    if math.isnan(d):
        raise ValueError("consecutive_kernel_delay: a number expected, got NaN")
    if math.isinf(d):
        return _INT64_MAX if d > 0 else -_INT64_MAX
    ns = d * 1000
    whole = round(ns)
    # A whole number of ns up to float noise (0.1 µs is 100.00000000000001 ns)
    # is that number; otherwise gaps (whole ns) under it are those under its ceiling.
    t = whole if abs(ns - whole) < 1e-6 else math.ceil(ns)
    return max(-_INT64_MAX, min(_INT64_MAX, t))


def _trace_files(trace_dir: str) -> List[str]:
    """The traces in a directory (recursively): *.json and *.json.gz, not
    tprof's *.summary.json, sorted by path."""
    files = []
    for root, _, names in os.walk(trace_dir):
        for n in names:
            if (n.endswith(".json") or n.endswith(".json.gz")) and not n.endswith(".summary.json"):
                files.append(os.path.join(root, n))
    if not files:
        raise ValueError(f"{trace_dir}: no trace in the directory (*.json or *.json.gz, one per rank)")
    return sorted(files)


class TraceAnalysis:
    """The traces of one job, one per rank, read in parallel in C++.

    trace_files: {rank: path} (HTA's form) or a list of paths; trace_dir: a
    directory of traces (each rank from its distributedInfo.rank; a file
    without one takes its position in path order); traces: tprof.Trace
    objects already read. include_last_profiler_step: HTA's default False
    leaves the last ProfilerStep's kernels out when a trace holds two steps
    or more; True keeps them (and, as HTA, still leaves out what was
    launched after the end of the steps)."""

    def __init__(
        self,
        trace_files: Optional[Union[Dict[int, str], Sequence[str]]] = None,
        trace_dir: Optional[str] = None,
        include_last_profiler_step: Optional[bool] = False,
        *,
        traces: Optional[Sequence[Any]] = None,
        threads: int = 0,
    ) -> None:
        from . import Trace, read_many  # the package imports this module last

        given: Optional[List[int]] = None
        if traces is not None:
            loaded = list(traces)
        elif trace_files is not None:
            if isinstance(trace_files, dict):
                given = [int(r) for r in trace_files]
                paths = [os.fspath(p) for p in trace_files.values()]
            else:
                paths = [os.fspath(p) for p in trace_files]
            loaded = read_many(paths, threads=threads)
        elif trace_dir is not None:
            loaded = read_many(_trace_files(os.fspath(trace_dir)), threads=threads)
        else:
            raise ValueError("TraceAnalysis: give trace_dir, trace_files or traces")
        if not loaded:
            raise ValueError("TraceAnalysis: no traces")
        for t in loaded:
            if not isinstance(t, Trace):
                raise TypeError("TraceAnalysis(traces=...): tprof.Trace objects expected")
        self._include_last_profiler_step = bool(include_last_profiler_step)
        self._trace_path = os.fspath(trace_dir) if trace_dir is not None else ""
        self._collection: Any = None
        figures = _tprof.hta([t._core for t in loaded], include_last_profiler_step=self._include_last_profiler_step)
        if given is None:
            given = [f["rank"] if f["has_rank"] else -1 for f in figures]
            if len(loaded) > 1:
                taken = {r for r in given if r >= 0}
                free = (r for r in range(len(loaded) * 2) if r not in taken)
                given = [r if r >= 0 else next(free) for r in given]
            else:
                given = [figures[0]["rank"]]
        if len(set(given)) != len(given):
            dup = next(r for r in given if given.count(r) > 1)
            paths = [t.path for t, r in zip(loaded, given) if r == dup]
            raise ValueError(f"TraceAnalysis: rank {dup} appears twice ({', '.join(paths)}); pass trace_files={{rank: path}}")
        order = sorted(range(len(loaded)), key=lambda i: given[i])
        self.traces: Dict[int, Any] = {given[i]: loaded[i] for i in order}
        self._figures: Dict[int, Dict[str, Any]] = {given[i]: figures[i] for i in order}

    @property
    def t(self) -> Any:
        """HTA's TraceCollection of the job: one DataFrame per rank in HTA's
        columns (tprof.hta_collection), built on first use."""
        if self._collection is None:
            from .hta_collection import TraceCollection
            self._collection = TraceCollection(self.traces, self._include_last_profiler_step, self._trace_path)
        return self._collection

    @property
    def ranks(self) -> List[int]:
        return list(self._figures)

    def _figures_with(self, ranks: Sequence[int], **options: Any) -> Dict[int, Dict[str, Any]]:
        """The figures of `ranks` under a method's HTA options
        (consecutive_kernel_delay_ns, idle_interval_stats,
        include_memory_kernels): those computed at construction when they
        are HTA's defaults, else computed again in C++, in parallel."""
        defaults = {"consecutive_kernel_delay_ns": 30_000, "idle_interval_stats": False, "include_memory_kernels": True}
        if all(options.get(k, v) == v for k, v in defaults.items()):
            return {r: self._figures[r] for r in ranks}
        figures = _tprof.hta(
            [self.traces[r]._core for r in ranks], include_last_profiler_step=self._include_last_profiler_step, **options
        )
        return dict(zip(ranks, figures))

    def _ranks(self, ranks: Optional[Sequence[int]]) -> List[int]:
        # HTA's default is [0]; a job without rank 0 (one trace of rank 3)
        # gets its first rank instead of HTA's KeyError.
        if ranks is None or len(ranks) == 0:
            return [0] if 0 in self._figures else [next(iter(self._figures))]
        missing = [r for r in ranks if r not in self._figures]
        if missing:
            raise ValueError(f"no trace for rank {missing[0]} (ranks: {self.ranks})")
        return list(ranks)

    def get_temporal_breakdown(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank: idle, compute and non-compute time over the span from
        the first device activity to the last (HTA's columns, µs)."""
        rows = [(r, f) for r, f in self._figures.items() if f["has_rows"]]
        if not rows:
            raise ValueError("get_temporal_breakdown: no trace has device activity with a stream")
        df = pd.DataFrame(
            {
                "rank": np.array([r for r, _ in rows], dtype=np.int64),
                "idle_time(us)": _us([f["idle_time_ns"] for _, f in rows]),
                "compute_time(us)": _us([f["compute_time_ns"] for _, f in rows]),
                "non_compute_time(us)": _us([f["non_compute_time_ns"] for _, f in rows]),
                "kernel_time(us)": _us([f["kernel_time_ns"] for _, f in rows]),
            }
        )
        for col in ("idle_time", "compute_time", "non_compute_time"):
            df[f"{col}_pctg"] = (100 * (df[f"{col}(us)"] / df["kernel_time(us)"])).round(2)
        return df

    def get_idle_time_breakdown(
        self,
        ranks: Optional[List[int]] = None,
        streams: Optional[List[int]] = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """Per rank and stream, the GPU's idle time split into host wait,
        kernel wait (gaps under consecutive_kernel_delay µs) and other:
        HTA's (rank, stream, idle_category, idle_time, idle_time_ratio)
        rows, µs, rounded to 2 decimals; a stream has a row for each
        category that holds one of its kernels (always "other": HTA files
        the stream's first kernel there). With show_idle_interval_stats,
        the second frame is HTA's statistics of the idle intervals: index
        idle_category, columns rank, stream, count, mean, std, min, 25%,
        50%, 75%, max (µs, 2 decimals); else None."""
        delay_ns = _delay_ns(consecutive_kernel_delay)
        wanted = self._ranks(ranks)
        figures = self._figures_with(
            wanted, consecutive_kernel_delay_ns=delay_ns, idle_interval_stats=bool(show_idle_interval_stats)
        )
        frames = []
        stats_frames = []
        for rank in wanted:
            by_stream = dict(figures[rank]["idle"])
            # HTA goes through the streams asked for, in that order; by
            # default every stream, in order of first appearance.
            order = [s for s in streams if s in by_stream] if streams else list(by_stream)
            rank_col: List[int] = []
            stream_col: List[int] = []
            cat_col: List[str] = []
            ns_col: List[int] = []
            ratio_col: List[float] = []
            stats_rows: List[Tuple[Any, ...]] = []
            for stream in order:
                present = [(cat, c) for cat, c in zip(_IDLE_CATEGORIES, by_stream[stream]) if c[0] > 0]
                # HTA's sums, a negative one (rows overlapping) as 0.
                sums = [max(0, c[1]) for _, c in present]
                total = sum(sums)
                for (cat, c), ns in zip(present, sums):
                    rank_col.append(rank)
                    stream_col.append(stream)
                    cat_col.append(cat)
                    ns_col.append(ns)
                    ratio_col.append(ns / total if total else float("nan"))
                    stats_rows.append((cat, stream) + tuple(c[2:]))
            frames.append(
                pd.DataFrame(
                    {
                        "rank": np.array(rank_col, dtype=np.int64),
                        "stream": np.array(stream_col, dtype=np.int64),
                        "idle_category": np.array(cat_col, dtype=object),
                        "idle_time": np.asarray(ns_col, dtype=np.int64) / 1000.0,
                        "idle_time_ratio": np.array(ratio_col, dtype=np.float64),
                    }
                ).round(2)
            )
            if show_idle_interval_stats:
                stats_frames.append(_idle_interval_stats(rank, stats_rows))
        return pd.concat(frames), (pd.concat(stats_frames) if show_idle_interval_stats else None)

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """HTA's two tables. The first: time by kernel type (COMPUTATION,
        COMMUNICATION, MEMORY and their overlaps, HTA's labels) summed over
        ranks, largest first: kernel_type, sum (µs), percentage (1
        decimal). The second: per rank and type, each kernel's sum, max,
        min, stddev and mean (µs), the kernels past num_kernels or past
        duration_ratio of the type's time grouped as "others", as HTA
        groups them. Both tables are over HTA's rows (its step filter, its
        rounding of ns traces to whole µs). include_memory_kernels=False
        leaves MEMORY out of both: its time is then no type's, and no
        label says "overlapping MEMORY"."""
        figures = self._figures_with(list(self._figures), include_memory_kernels=bool(include_memory_kernels))
        totals: Dict[str, int] = {}
        for f in figures.values():
            for label, ns in f["kernel_types"]:
                totals[label] = totals.get(label, 0) + ns
        types = pd.DataFrame(
            {
                "kernel_type": np.array(list(totals), dtype=object),
                "sum": _us(list(totals.values())) if totals else np.empty(0, dtype=np.int64),
            }
        )
        types = types.sort_values(by="sum", ascending=False, ignore_index=True)
        types["percentage"] = (types["sum"] / types["sum"].sum() * 100).round(1)

        parts = []
        for rank, f in figures.items():
            if not f["kernels"]:
                continue
            k = pd.DataFrame(
                f["kernels"], columns=["name", "kernel_type", "count", "sum", "max", "min", "mean", "std"]
            )
            # HTA's sum, max and min are integers where its durations are
            # (whole µs, and every ns trace once rounded); mean and std float.
            whole = all((k[col] % 1000 == 0).all() for col in ("sum", "max", "min"))
            for col in ("sum", "max", "min", "mean", "std"):
                k[col] = k[col] // 1000 if whole and col in ("sum", "max", "min") else k[col] / 1000.0
            for kernel_type in ("COMPUTATION", "COMMUNICATION", "MEMORY"):
                one = k[k["kernel_type"] == kernel_type]
                if one.empty:
                    continue
                agg = _top_kernels(one[["name", "sum", "max", "min", "mean", "std"]], num_kernels, duration_ratio)
                agg["kernel_type"] = kernel_type
                agg["rank"] = rank
                parts.append(agg)
        columns = ["name", "sum", "max", "min", "std", "mean", "kernel_type", "rank"]
        kernels = pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)
        kernels = kernels.sort_values(by=["kernel_type", "name", "rank"], ignore_index=True)
        kernels = kernels.rename(
            columns={"sum": "sum (us)", "mean": "mean (us)", "max": "max (us)", "min": "min (us)", "std": "stddev"}
        )
        return types, kernels

    def get_comm_comp_overlap(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank: the share of communication time that overlaps
        computation, in percent (2 decimals; NaN without communication)."""
        ranks = list(self._figures)
        ratio = np.array(
            [f["comm_comp_overlap_ns"] / f["comm_ns"] if f["comm_ns"] else np.nan for f in self._figures.values()],
            dtype=np.float64,
        )
        pct = np.round(100 * ratio, 2)
        return pd.DataFrame({"rank": np.array(ranks, dtype=np.int64), "comp_comm_overlap_pctg": pct})

    def get_queue_length_time_series(self, ranks: Optional[List[int]] = None) -> Dict[int, pd.DataFrame]:
        """Per rank, the queue length of each stream (launched activities
        not started yet) at every change: ts (µs; int64 when every point
        is a whole µs, as HTA's, exact for epoch-µs traces), pid, tid (the device
        activity's lane), stream (HTA's: the activity's args "stream", the
        key get_idle_time_breakdown uses), queue_length; streams in
        ascending order, each in time order. Over HTA's rows (its step
        filter). Ranks without launches are left out, as in HTA."""
        out: Dict[int, pd.DataFrame] = {}
        for rank in self._ranks(ranks):
            q = self._figures[rank]["queue"]
            if len(q["ts_ns"]) == 0:
                continue
            out[rank] = pd.DataFrame(
                {
                    "ts": _us(q["ts_ns"]),
                    "pid": q["pid"],
                    "tid": q["tid"],
                    "stream": q["stream"],
                    "queue_length": q["queue_length"],
                }
            )
        return out

    def get_queue_length_summary(self, ranks: Optional[List[int]] = None) -> Optional[pd.DataFrame]:
        """Per (rank, stream): pandas' describe() of the queue length series
        (count, mean, std, min, 25%, 50%, 75%, max), as HTA; None when no
        rank has launches. stream is HTA's (args "stream"), as in
        get_idle_time_breakdown: the two join on (rank, stream)."""
        return self.get_queue_length_summary_from_time_series(self.get_queue_length_time_series(ranks))

    def get_time_spent_blocked_on_full_queue(
        self,
        queue_length_dict: Optional[Dict[int, pd.DataFrame]] = None,
        max_queue_length: int = 1024,
    ) -> pd.DataFrame:
        """HTA's time spent with a full launch queue: per rank of
        queue_length_dict (get_queue_length_time_series' output; None: that
        of every rank) and per stream whose queue reaches max_queue_length
        (HTA's default 1024, CUDA's launch queue per stream), the time the
        series stays at or above it: each point's time to the stream's next
        point (none for its last), summed, in the series' µs. Columns rank,
        stream, duration_at_max_queue_length and
        relative_duration_at_max_queue_length: that time over HTA's trace
        duration (the last row's ts minus the first's, over every row of
        the rank's table after its step filter; inf, or NaN for a time of
        0, when the duration is 0). Ranks, then streams, in the series'
        order; an empty frame when no queue reaches the length. HTA keeps
        one row per rank (each stream's overwrites the last); tprof keeps
        one per (rank, stream), as HTA's docstring describes. ValueError
        for a rank without a trace or a frame without HTA's columns."""
        if queue_length_dict is None:
            queue_length_dict = self.get_queue_length_time_series(self.ranks)
        limit = max_queue_length
        rows: List[Tuple[int, Any, float, float]] = []
        for rank, ql in queue_length_dict.items():
            if not isinstance(ql, pd.DataFrame) or not {"ts", "stream", "queue_length"} <= set(ql.columns):
                raise ValueError(f"get_time_spent_blocked_on_full_queue: rank {rank}: a frame of "
                                 "get_queue_length_time_series (ts, stream, queue_length) expected")
            duration = _us(self._figures[self._ranks([rank])[0]]["trace_duration_ns"])
            for stream in ql["stream"].unique():
                s = ql[ql["stream"] == stream]
                # HTA's shift(-1): a point lasts until the stream's next one.
                dur = s["ts"].shift(-1) - s["ts"]
                full = dur[(s["queue_length"] >= limit).to_numpy()]
                if full.empty:
                    continue
                total = np.float64(full.sum())
                with np.errstate(divide="ignore", invalid="ignore"):
                    relative = total / duration
                rows.append((rank, stream, total, relative))
        return pd.DataFrame(
            {
                "rank": np.array([r[0] for r in rows], dtype=np.int64),
                "stream": np.array([r[1] for r in rows], dtype=np.int64),
                "duration_at_max_queue_length": np.array([r[2] for r in rows], dtype=np.float64),
                "relative_duration_at_max_queue_length": np.array([r[3] for r in rows], dtype=np.float64),
            }
        )

    def get_memory_bw_time_series(self, ranks: Optional[List[int]] = None) -> Dict[int, pd.DataFrame]:
        """Per rank, HTA's memory bandwidth series: for each kind of memory
        row (name: "Memcpy DtoH", "Memcpy HtoD", "Memcpy DtoD", "Memset",
        ...: HTA's get_memory_kernel_type of its MEMORY rows), the sum of
        the "memory bandwidth (GB/s)" args of the rows running, at every
        change: ts (µs, HTA's: a row's ts, and ts + dur with a dur of 0 as
        1 µs), pid (the device), name, memory_bw_gbps. Kinds by name, each
        in time order (equal times: starts in row order, then ends). Over
        HTA's rows (its step filter); ranks without memory rows are left
        out, as in HTA."""
        out: Dict[int, pd.DataFrame] = {}
        for rank in self._ranks(ranks):
            m = self._figures[rank]["memory_bw"]
            if len(m["ts_ns"]) == 0:
                continue
            out[rank] = pd.DataFrame(
                {
                    "ts": _us(m["ts_ns"]),
                    "pid": m["pid"],
                    "name": np.array(m["name"], dtype=object),
                    "memory_bw_gbps": m["memory_bw_gbps"],
                }
            )
        return out

    def get_memory_bw_summary(self, ranks: Optional[List[int]] = None) -> Optional[pd.DataFrame]:
        """HTA's summary of get_memory_bw_time_series: per (rank, name),
        pandas' describe() (count, mean, std, min, 25%, 50%, 75%, max) of
        the series' points above 0 GB/s, columns ("memory_bw_gbps", stat);
        None when no rank has memory rows."""
        parts = []
        for rank, df in self.get_memory_bw_time_series(ranks).items():
            d = df.loc[df["memory_bw_gbps"] > 0, ["name", "memory_bw_gbps"]].copy()
            d.insert(0, "rank", rank)
            parts.append(d.groupby(["rank", "name"]).describe())
        return pd.concat(parts) if parts else None

    def get_potential_stragglers(
        self,
        profiler_steps: Optional[List[int]] = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Optional[Callable[..., pd.Series]] = None,
    ) -> List[int]:
        """HTA's straggler detection (find_stragglers_with_late_start_comm_kernels):
        the ranks that start the job's most rank-dependent collective
        latest. Over the steps `profiler_steps` (None: get_profiler_steps();
        numbers not among those are ignored, none left is a ValueError):
        the NCCL kernels (names starting with ncclKernel, HTA's test, or
        ncclDevKernel, NCCL 2.19's name, which HTA does not match) on a
        stream > 0, launched in a step numbered > 0, lasting at least 1% of
        the mean step time (the span of those steps' rows, all ranks,
        over their number); per (rank, stream, step, name) the last such
        kernel; the (stream, name) whose duration varies most across
        ranks (the mean over steps of the standard deviation across ranks);
        per step, the ranks whose kernel of that (stream, name) starts no
        earlier than the num_candidates-th latest start are stragglers
        once. Returns the num_candidates ranks counted most often (ties in
        rank order). num_candidates < 1 is 1, as in HTA. visualize is
        accepted and ignored; straggler_identification_impl (another
        metric: HTA's signature) is not supported (NotImplementedError).
        Times are the trace's (µs as exact ns / 1000); ranks' clocks are
        taken as they are, as HTA takes them. ValueError when no rank has
        such a kernel or only one rank has it in every step."""
        if straggler_identification_impl is not None:
            raise NotImplementedError("get_potential_stragglers: straggler_identification_impl (a metric of "
                                      "HTA's API on its trace DataFrame) is not supported; `tprof diagnose DIR` "
                                      "explains the straggler")
        num_candidates = max(1, int(num_candidates))
        available = self.get_profiler_steps()
        steps = available if profiler_steps is None else [s for s in profiler_steps if s in available]
        if not steps:
            raise ValueError(f"invalid value for argument: profiler_steps={profiler_steps}; "
                             f"available profiler steps={available}")
        kernels, lo, hi = [], None, None
        for rank, trace in self.traces.items():
            ev = trace.events(args=["stream"], derived=True)
            # HTA's rows of those steps: host rows by their ts, device rows
            # by their launch (HTA gives an unlaunched one no step).
            launched = (ev["device"] == -1) | (ev["correlation"] >= 0)
            rows = ev[(ev["ph"] == "X") & (ev["kind"] != "trace_span") & launched & ev["step"].isin(steps)]
            if rows.empty:
                continue
            first, last = int(rows["ts_ns"].min()), int((rows["ts_ns"] + rows["dur_ns"]).max())
            lo = first if lo is None else min(lo, first)
            hi = last if hi is None else max(hi, last)
            names = rows["name"].astype(object)
            stream = pd.to_numeric(rows["args.stream"], errors="coerce")
            comm = rows[(rows["device"] >= 0) & (stream > 0) & (rows["step"] > 0)
                        & (names.str.startswith("ncclKernel") | names.str.startswith("ncclDevKernel"))]
            kernels.append(pd.DataFrame({
                "rank": rank, "stream": stream[comm.index].astype(np.int64), "iteration": comm["step"],
                "name": names[comm.index], "ts": comm["ts_ns"] / 1000.0, "dur": comm["dur_ns"] / 1000.0,
            }))
        k = pd.concat(kernels, ignore_index=True) if kernels else pd.DataFrame()
        if k.empty:
            raise ValueError("get_potential_stragglers: no NCCL kernel (ncclKernel*, ncclDevKernel*) in the steps "
                             f"{steps} of any rank")
        t_min = lo / 1000.0
        mean_step = (hi - lo) / 1000.0 / len(steps)
        k = k[k["dur"] >= mean_step * 0.01]
        if k.empty:
            raise ValueError(f"get_potential_stragglers: no NCCL kernel lasts 1% of the mean step time "
                             f"({mean_step:.0f} µs: the span of the steps' rows over all ranks; ranks whose "
                             f"clocks disagree widen it)")
        # The last kernel (in file order) of each (rank, stream, step, name).
        k = k.groupby(["rank", "stream", "iteration", "name"], as_index=False).last()
        k["start"] = (k["ts"] - t_min) / mean_step
        k["duration"] = k["dur"] / mean_step
        spread = k.groupby(["stream", "iteration", "name"])["duration"].std().groupby(["stream", "name"]).mean()
        if spread.isna().all():
            raise ValueError("get_potential_stragglers: no NCCL kernel appears on two ranks in one step: "
                             "nothing to compare")
        stream, name = spread.idxmax()
        chosen = k[(k["stream"] == stream) & (k["name"] == name)]
        counts: Dict[int, int] = {int(r): 0 for r in sorted(chosen["rank"].unique())}
        for _, by_step in chosen.groupby("iteration"):
            starts = by_step["start"].sort_values(ascending=False).tolist()
            threshold = starts[min(num_candidates, len(starts)) - 1]
            for rank in by_step.loc[by_step["start"] >= threshold, "rank"]:
                counts[int(rank)] += 1
        order = sorted(counts, key=lambda r: -counts[r])  # stable: ties in rank order
        return order[:num_candidates]

    def _steps(self, rank: int) -> List[Tuple[int, int, int]]:
        """(number, start_ns, end_ns) of rank's ProfilerStep#N on CPU lanes, by
        start; HTA's default leaves out the last of two or more."""
        ev = self.traces[rank].events()
        names = ev["name"].astype(object)  # object, not str: NumPy str would pad every name to the longest
        s = ev[names.str.startswith("ProfilerStep#") & (ev["device"] == -1) & (ev["ph"] == "X")]
        nums = pd.to_numeric(names[s.index].str.slice(len("ProfilerStep#")), errors="coerce")
        steps = sorted((int(n), int(t), int(t + d)) for n, t, d in zip(nums, s["ts_ns"], s["dur_ns"]) if n == n)
        steps.sort(key=lambda x: x[1])
        if not self._include_last_profiler_step and len(steps) >= 2:
            steps = steps[:-1]
        return steps

    def get_profiler_steps(self) -> List[int]:
        """HTA's: the ProfilerStep numbers of every rank, sorted, each once
        (the last step of each rank left out unless include_last_profiler_step)."""
        return sorted({n for r in self._figures for n, _, _ in self._steps(r)})

    def get_cuda_kernel_launch_stats(
        self,
        ranks: Optional[List[int]] = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> Dict[int, pd.DataFrame]:
        """Per rank, HTA's columns for each device activity launched by
        cudaLaunchKernel (and cudaMemcpyAsync / cudaMemsetAsync with
        include_memory_events), joined with its call by correlation id:
        correlation, cpu_duration, gpu_duration, launch_delay (µs, from the
        rank's frame in `t`, HTA's times and step filter). launch_delay is
        HTA's formula, gpu ts − cpu ts + cpu dur; launch_gap is the time
        from the call's end to the activity's start (gpu ts − cpu ts − cpu
        dur), which is what HTA's docs describe. The cutoffs only
        shape HTA's plots (none are drawn)."""
        names = ["cudaLaunchKernel"] + (["cudaMemcpyAsync", "cudaMemsetAsync"] if include_memory_events else [])
        ids = [i for i in (self.t.symbol_table.sym_index.get(n) for n in names) if i is not None]
        out: Dict[int, pd.DataFrame] = {}
        for rank in self._ranks(ranks):
            df = self.t.get_trace(rank)
            calls = df[df["name"].isin(ids) & (df["index_correlation"] > 0)]
            gpu = df.loc[calls["index_correlation"].to_numpy()]
            ts_x, dur_x = calls["ts"].to_numpy(), calls["dur"].to_numpy()
            ts_y, dur_y = gpu["ts"].to_numpy(), gpu["dur"].to_numpy()
            out[rank] = pd.DataFrame({
                "correlation": calls["correlation"].to_numpy(dtype=np.int64),
                "cpu_duration": dur_x,
                "gpu_duration": dur_y,
                "launch_delay": ts_y - ts_x + dur_x,
                "launch_gap": ts_y - ts_x - dur_x,
            })
        return out

    def get_memory_timeline(self, rank: Optional[int] = None, visualize: bool = True) -> pd.DataFrame:
        """HTA's MemoryAnalysis.get_memory_timeline: one row per [memory]
        record of `rank` (None: the first), in time order: ts (ns), addr,
        bytes_delta, total_allocated, total_reserved, device_id, and tprof's
        device_type, op, stack, step. total_allocated is the trace's
        "Total Allocated", or where the trace has none a running sum of
        bytes from 0 (attrs["totals_recorded"] per device says which);
        total_reserved is NaN where not recorded. An empty frame without
        records. Nothing is plotted."""
        rank = self._ranks([rank] if rank is not None else None)[0]
        m = self.traces[rank].memory()
        if m.empty:
            return pd.DataFrame()
        devices = {d["device"]: d for d in m.attrs["report"]["devices"]}
        out = pd.DataFrame({
            "ts": m["ts_ns"].astype(np.int64),
            "addr": m["addr"],
            "bytes_delta": m["bytes"].astype(np.int64),
            "total_allocated": m["allocated"].astype(np.int64),
            "total_reserved": m["reserved"],
            "device_id": m["device"].map(lambda d: devices[d]["device_id"]).astype(np.int64),
            "device_type": m["device"].map(lambda d: devices[d]["device_type"]).astype(np.int64),
            "op": m["op"],
            "stack": m["stack"],
            "step": m["step"],
        }).sort_values("ts", kind="stable", ignore_index=True)
        out.attrs["totals_recorded"] = {d["device"]: d["totals_recorded"] for d in devices.values()}
        out.attrs["report"] = m.attrs["report"]
        return out

    # HTA methods tprof does not provide, and what answers the same question.
    _NOT_PROVIDED = {
        "get_classified_memory_timelines": "get_memory_timeline() (op and stack per record) or `tprof memory`",
        "get_gpu_kernels_with_user_annotations": "self.traces[rank].events(derived=True): a kernel's parent on its "
                                                 "GPU lane is the gpu_user_annotation around it",
        "get_gpu_user_annotation_breakdown": "self.traces[rank].events() (the gpu_user_annotation rows and their "
                                             "dur_ns) or `tprof table` (user annotations' CUDA time)",
        "get_aten_op_kernels_and_delay": "get_cuda_kernel_launch_stats() or `tprof export --sqlite` (kernel_view: "
                                         "op_name, launch_delay_ns)",
        "get_frequent_cuda_kernel_sequences": "`tprof kernels` and `tprof critical-path`",
        "get_cupti_counter_data_with_operators": "`tprof kernels` (range-profiler counters)",
        "generate_trace_with_counters": "`tprof export --sqlite` (steps, kernels, memory_timeline tables)",
        "get_cuda_kernel_launch_info": "get_cuda_kernel_launch_stats()",
    }

    def __getattr__(self, name: str) -> Any:
        if name in TraceAnalysis._NOT_PROVIDED:
            raise NotImplementedError(f"TraceAnalysis.{name} is HTA's; tprof does not provide it: use "
                                      f"{TraceAnalysis._NOT_PROVIDED[name]}")
        raise AttributeError(f"'TraceAnalysis' object has no attribute '{name}'")

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str,
        instance_id: Union[Optional[int], Tuple[int, int]] = 0,
        data_load_events: Optional[List[str]] = None,
    ) -> Optional[Tuple[CriticalPathGraph, bool]]:
        """HTA's critical path of a window of one rank's trace:
        (CriticalPathGraph, success). annotation "ProfilerStep" with
        instance_id i: the i-th step (by start) and its per-step path (the
        step's time, from the previous step's end); "": the whole trace;
        anything else: the instance_id-th host event (by start) whose name
        contains `annotation` (HTA's substring match), from its begin to
        the later of its end and the end of the device work launched in
        it. None, as HTA, when there is no such window. instance_id None
        is 0; a (start, end) range of instances is not supported
        (ValueError). data_load_events is accepted and ignored: DataLoader
        scopes are found by name (docs/critical-path.md)."""
        if instance_id is None:
            instance_id = 0
        if isinstance(instance_id, tuple):
            raise ValueError("critical_path_analysis: a range of instances (start, end) is not supported; "
                             "give one instance_id")
        trace = self.traces[self._ranks([rank])[0]]
        core = _tprof.critical_path(trace._core, str(annotation), int(instance_id))
        if core is None:
            return None
        return CriticalPathGraph(core, trace, rank, str(annotation), int(instance_id)), True

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CriticalPathGraph,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """HTA's overlay: writes the rank's trace with the path marked
        (args "critical": 1 on every event on it, a "critical_path" flow
        along each edge of it that joins two events) to
        output_dir/overlaid_critical_path_<the trace's file name>, gzip
        whatever the suffix (as HTA); returns that path. output_dir is made
        when missing. only_show_critical_events (HTA's default): keep the
        events marked critical, every event that is not a complete event
        (metadata, instants, flows) and the user annotations and Python
        functions. show_all_edges is accepted and ignored: only the path's
        edges are drawn."""
        trace = self.traces[self._ranks([rank])[0]]
        if not isinstance(critical_path_graph, CriticalPathGraph):
            raise TypeError("overlay_critical_path_analysis: a CriticalPathGraph from critical_path_analysis expected")
        if critical_path_graph._trace._core is not trace._core:
            raise ValueError(f"overlay_critical_path_analysis: the critical path was found on another trace "
                             f"than rank {rank}'s")
        output_dir = os.fspath(output_dir)
        os.makedirs(output_dir, exist_ok=True)
        name = os.path.basename(trace.path) if os.path.isfile(trace.path) else "trace.json.gz"
        out = os.path.join(output_dir, "overlaid_critical_path_" + name)
        critical_path_graph._core.overlay(out, bool(only_show_critical_events))
        return out

    @staticmethod
    def get_queue_length_summary_from_time_series(series: Dict[int, pd.DataFrame]) -> Optional[pd.DataFrame]:
        parts = []
        for rank, df in series.items():
            d = df[["stream", "queue_length"]].copy()
            d.insert(0, "rank", rank)
            parts.append(d.groupby(["rank", "stream"]).describe())
        return pd.concat(parts) if parts else None


# HTA's names of tprof's bound types (BoundType in HTA's
# hta/analyzers/critical_path_analysis.py); the others are the same.
_HTA_BOUND = {
    "kernel_kernel_overhead": "gpu_kernel_kernel_overhead",
    "kernel_launch_overhead": "gpu_kernel_launch_overhead",
}
_HTA_BOUND_ORDER = ("cpu_bound", "data_loading", "gpu_communication_bound", "gpu_compute_bound",
                    "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead")


class CriticalPathGraph:
    """The critical path TraceAnalysis.critical_path_analysis found: HTA's
    CPGraph in what it reports (summary(), get_critical_path_breakdown(),
    critical_path_events_set), on tprof's causal model
    (docs/critical-path.md). It is not a networkx graph.

    path: one row per stretch of the path, oldest first: event_idx (the
    event whose time it is, an index into the trace's events; <NA> for a
    host gap), name, type (the edge: host, host_gap, launch, stream,
    device, sync, stream_wait, thread), bound_by (HTA's bound type), start_ns,
    dur_ns (ns, on the replayed timeline, which is the measured one).
    start_ns, end_ns, length_ns: the window (length_ns: the step's time
    for a step); unexplained_ns: the window's time before the path's first
    node, which has no known predecessor. kind: "step", "annotation" or
    "window"; step: N of the ProfilerStep#N (kind "step"); event: the
    step's or the annotation's event."""

    def __init__(self, core: Any, trace: Any, rank: int, annotation: str, instance_id: int) -> None:
        self._core = core
        self._trace = trace
        self.rank = rank
        self.annotation = annotation
        self.instance_id = instance_id
        self.kind: str = core.kind
        self.step: Optional[int] = core.step
        self.event: Optional[int] = core.event
        self.start_ns: int = core.start_ns
        self.end_ns: int = core.end_ns
        self.length_ns: int = core.length_ns
        self.unexplained_ns: int = core.unexplained_ns
        seg = core.segments()
        event = pd.array(seg["event"], dtype="Int64")
        event[seg["event"] < 0] = pd.NA
        self.path = pd.DataFrame(
            {
                "event_idx": event,
                "name": np.array(seg["name"], dtype=object),
                "type": np.array(seg["type"], dtype=object),
                "bound_by": np.array([_HTA_BOUND.get(b, b) for b in seg["bound_by"]], dtype=object),
                "start_ns": seg["start_ns"],
                "dur_ns": seg["dur_ns"],
            }
        )

    def __repr__(self) -> str:
        where = f"step {self.step}" if self.kind == "step" else self.kind
        return f"<tprof CriticalPathGraph rank {self.rank} {where}: {len(self.path)} segments, {self.length_ns} ns>"

    @property
    def critical_path_events_set(self) -> set:
        """The events the overlay marks critical (HTA's attribute of the
        same name): both ends of every edge on the path and the event each
        stretch is attributed to."""
        return set(self._core.critical_events())

    def summary_ns(self) -> pd.Series:
        """ns per bound type (HTA's names; index bound_by), "" for
        unexplained_ns when there is any: the values sum to length_ns."""
        ns = self.path.groupby("bound_by", sort=True)["dur_ns"].sum().astype(np.int64)
        if self.unexplained_ns > 0:
            ns = pd.concat([pd.Series({"": np.int64(self.unexplained_ns)}), ns])
        ns.index.name = "bound_by"
        ns.name = "duration"
        return ns

    def summary(self) -> pd.Series:
        """HTA's cp_graph.summary(): per bound type (index bound_by, HTA's
        names, sorted), its % of the path's length (a Series named
        duration). "" holds the unexplained time, as HTA's "" holds its
        unattributed edges; the values sum to 100."""
        ns = self.summary_ns()
        return ns / self.length_ns * 100 if self.length_ns else ns.astype(np.float64) * np.nan

    def get_critical_path_breakdown(self) -> pd.DataFrame:
        """HTA's breakdown, one row per stretch of the path: event_idx,
        duration (µs, as HTA reads the file's ts), type, s_name (the
        event's name), bound_by; then start_ns and dur_ns."""
        p = self.path
        return pd.DataFrame(
            {
                "event_idx": p["event_idx"],
                "duration": p["dur_ns"].to_numpy() / 1000.0,
                "type": p["type"],
                "s_name": p["name"],
                "bound_by": p["bound_by"],
                "start_ns": p["start_ns"],
                "dur_ns": p["dur_ns"],
            }
        )

    def critical_path_events(self) -> pd.DataFrame:
        """The events of critical_path_events_set, by index: event_idx,
        name, ts_ns, dur_ns (the event's own) and path_ns (its time on the
        path; 0 for an event only an edge ends at)."""
        idx = np.array(sorted(self._core.critical_events()), dtype=np.int64)
        on_path = self.path.dropna(subset=["event_idx"]).groupby("event_idx")["dur_ns"].sum()
        t = self._trace
        return pd.DataFrame(
            {
                "event_idx": idx,
                "name": np.array(t.strings(t.column("name")[idx]), dtype=object),
                "ts_ns": t.column("ts_ns")[idx],
                "dur_ns": t.column("dur_ns")[idx],
                "path_ns": np.array([int(on_path.get(i, 0)) for i in idx], dtype=np.int64),
            }
        )


def _idle_interval_stats(rank: int, rows: List[Tuple[Any, ...]]) -> pd.DataFrame:
    """HTA's interval statistics of one rank from the C++ figures (category,
    stream, count, then mean ... max in ns, NaN where pandas' describe()
    has NaN): index idle_category; rank, stream, describe()'s columns in µs,
    rounded to 2 decimals (count a float, as describe() gives it)."""
    df = pd.DataFrame(
        {
            "stream": np.array([r[1] for r in rows], dtype=np.int64),
            "count": np.array([r[2] for r in rows], dtype=np.float64),
        },
        index=pd.Index([r[0] for r in rows], name="idle_category", dtype=object),
    )
    for i, col in enumerate(_IDLE_STATS[1:]):
        df[col] = np.array([r[3 + i] for r in rows], dtype=np.float64) / 1000.0
    df = df.round(2)
    df.insert(0, "rank", np.int64(rank))
    return df


def _top_kernels(k: pd.DataFrame, num_kernels: int, duration_ratio: float) -> pd.DataFrame:
    """HTA's _aggr_gpu_kernel_time on per-name rows (name, sum, max, min,
    mean, std): by sum, largest first; with more than num_kernels names,
    those past the duration_ratio quantile of the running sum or past the
    first num_kernels become "others", and HTA then takes sum, max, min,
    mean and std of the per-name sums of each remaining name."""
    k = k.sort_values(by="sum", ascending=False, ignore_index=True)
    if len(k) <= num_kernels:
        return k.reset_index(drop=True)
    k = k.copy()
    running = k["sum"].cumsum()
    names = k["name"].copy()
    names[(running > running.quantile(duration_ratio)) | (k.index >= num_kernels)] = "others"
    grouped = pd.DataFrame({"name": names, "value": k["sum"]}).groupby("name")["value"].agg(
        ["sum", "max", "min", "mean", "std"]
    )
    grouped = grouped.reset_index().fillna({"std": 0})
    return grouped
