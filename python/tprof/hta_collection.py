"""HTA's `analyzer.t`: the parsed traces of a job as HTA's TraceCollection
holds them, one DataFrame per rank, built from tprof's events (no JSON is
parsed in Python).

    analyzer = tprof.TraceAnalysis(trace_dir="traces/")
    df = analyzer.t.get_trace(0)                  # HTA's columns, µs
    analyzer.t.symbol_table.sym_table[df.name.iloc[0]]
    analyzer.t.decode_symbol_ids()                # adds s_name, s_cat

What a rank's frame holds, as HTA's loader (parse, align, filter) makes it:

- rows: the complete events ("X") with a category, but the "Trace" span;
- ts, dur, end in µs of the file's own time frame (_hta_times: when some
  ts is fractional, ts rounded up and the end down, as HTA does); ts and
  end shifted by min_ts, the earliest ts of any rank (HTA leaves end
  unshifted; here end is always ts + dur);
- name, cat: ids into symbol_table, shared by all ranks;
- pid, tid (-1 where the file writes a string), stream and correlation
  (the args; -1 where absent), external_id, then the args of HTA's default parser
  configuration under HTA's column names, with HTA's default where an
  event lacks the key;
- index_correlation: the row index of the launch call of a GPU row and of
  the GPU row of a launch call, 0 for a correlation without its pair, -1
  without a correlation; iteration: N of the ProfilerStep#N a host event
  starts in, a GPU event's from its launch call (-1 outside the steps);
- the filter of HTA's load: host rows (stream -1) that start before the
  last ProfilerStep (with two steps or more, unless
  include_last_profiler_step; before the end of the steps otherwise), and
  GPU rows whose correlation is one of theirs; GPU rows first, each part in
  file order; the index is the event's index in Trace.events() (the
  file's order), as HTA's is its position in traceEvents.
"""

from __future__ import annotations

import gzip
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pandas as pd

# HTA's default parser args (its ARGS_DEFAULT but stream and correlation,
# which tprof reads from the event's lane): (column, raw key, default, int).
_ARGS: Tuple[Tuple[str, str, Any, bool], ...] = (
    ("bytes", "bytes", -1, True),
    ("memory_bw_gbps", "memory bandwidth (GB/s)", 0.0, False),
    ("wait_on_stream", "wait_on_stream", -1, True),
    ("wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_record_corr_id", -1, True),
    ("input_dims", "Input Dims", "-1", False),
    ("input_type", "Input type", "-1", False),
    ("input_strides", "Input Strides", "-1", False),
    ("python_id", "Python id", -1, True),
    ("python_parent_id", "Python parent id", -1, True),
    ("collective_name", "Collective name", "", False),
    ("in_msg_nelems", "In msg nelems", 0, True),
    ("out_msg_nelems", "Out msg nelems", 0, True),
    ("msg_dtype", "dtype", "", False),
    ("group_size", "Group size", 0, True),
    ("process_rank", "Rank", -1, True),
    ("in_split_size", "In split size", "[]", False),
    ("out_split_size", "Out split size", "[]", False),
)
_STEP_NAME = re.compile(r"ProfilerStep\s*#\s*\d+")


def shorten_name(name: str) -> str:
    """HTA's shorten_name: "->" removed, then every <...> and (...) with
    what they enclose (a closer without its opener drops all before it),
    and the last space-separated word of what is left."""
    kept: List[str] = []
    openers: List[int] = []  # positions in `kept` of the open '<' and '('
    for c in name.replace("->", ""):
        if c in ">)":
            want = "<" if c == ">" else "("
            while openers and kept[openers[-1]] != want:
                openers.pop()
            cut = openers.pop() if openers else 0
            del kept[cut:]
            openers = [o for o in openers if o < cut]
        else:
            if c in "<(":
                openers.append(len(kept))
            kept.append(c)
    return "".join(kept).split(" ")[-1]


class TraceSymbolTable:
    """HTA's symbol table: sym_table (id -> text) and sym_index (text -> id)."""

    def __init__(self) -> None:
        self.sym_table: List[str] = []
        self.sym_index: Dict[str, int] = {}

    def add_symbols(self, symbols: Iterable[str]) -> None:
        for s in symbols:
            if s not in self.sym_index:
                self.sym_index[s] = len(self.sym_table)
                self.sym_table.append(s)

    def get_sym_id_map(self) -> Dict[str, int]:
        return self.sym_index

    def get_sym_table(self) -> List[str]:
        return self.sym_table

    def find_matches(self, patterns: List[str]) -> List[int]:
        """Ids of the symbols containing any of `patterns` (as text)."""
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [i for i, s in enumerate(self.sym_table) if rx.search(s)]

    def find_matched_symbols(self, patterns: List[str]) -> List[str]:
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [s for s in self.sym_table if rx.search(s)]

    def add_symbols_to_trace_df(self, trace_df: pd.DataFrame, col: str) -> None:
        """Replaces the ids of column `col` by their text ("" for an id
        outside the table)."""
        table = np.array(self.sym_table + [""], dtype=object)
        ids = trace_df[col].to_numpy()
        ids = np.where((ids >= 0) & (ids < len(self.sym_table)), ids, len(self.sym_table))
        trace_df[col] = table[ids]


def _hta_times(trace: Any, base: int, ev: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    """HTA's ts and dur (µs) of the rows of `ev`, in the file's own time
    frame (tprof's reader adds baseTimeNanoseconds; HTA does not). When some
    event's ts is not a whole µs HTA moves every event inward to whole µs
    (ts rounded up, ts + dur down; its float sum can land 1 µs under an
    exact end, the exact one is taken here), else it keeps the file's
    values: whole-µs ts, and dur as written (float where one is fractional).
    The decision is the C++ breakdowns' (HtaClock, docs/diagnose.md)."""
    all_ts = trace.column("ts_ns").astype(np.int64) - base
    ts_ns = ev["ts_ns"].to_numpy(dtype=np.int64) - base
    dur_ns = ev["dur_ns"].to_numpy(dtype=np.int64)
    if all_ts.size and np.any(all_ts % 1000 != 0):
        ts = -((-ts_ns) // 1000)
        return ts, (ts_ns + dur_ns) // 1000 - ts
    dur = dur_ns // 1000 if np.all(dur_ns % 1000 == 0) else dur_ns / 1000.0
    return ts_ns // 1000, dur


def _numeric_or(values: pd.Series, default: int) -> np.ndarray:
    """An arg as HTA's integer column: a number or numeric string, else the default."""
    return pd.to_numeric(values, errors="coerce").fillna(default).astype(np.int64).to_numpy()


def _rank_frame(trace: Any, metadata: Dict[str, Any]) -> pd.DataFrame:
    """One rank's rows before alignment and the step filter (metadata: trace.metadata)."""
    ev = trace.events(args=["stream", "correlation"] + [raw for _, raw, _, _ in _ARGS], derived=True)
    keep = (ev["ph"] == "X").to_numpy() & (ev["cat"] != "").to_numpy() & (ev["cat"] != "Trace").to_numpy()
    ev = ev[keep]
    ts, dur = _hta_times(trace, int(metadata.get("base_time_ns") or 0), ev)
    df = pd.DataFrame({
        "index": ev.index.to_numpy(dtype=np.int64),
        "ts": ts,
        "dur": dur,
        "name": ev["name"].astype(str).to_numpy(dtype=object),
        "cat": ev["cat"].astype(str).to_numpy(dtype=object),
        "pid": ev["pid"].to_numpy(),
        "tid": ev["tid"].to_numpy(),
        # HTA's stream and correlation are the args (-1 where absent or not
        # numeric: ROCm's "0x0" on runtime calls), not the event's lane.
        "stream": _numeric_or(ev["args.stream"], -1),
        "correlation": _numeric_or(ev["args.correlation"], -1),
        "external_id": ev["external_id"].to_numpy(),
    })
    for col, raw, default, is_int in _ARGS:
        values = ev[raw].to_numpy(dtype=object)
        missing = pd.isna(ev[raw]).to_numpy()
        values[missing] = default
        column = pd.Series(values, index=df.index)
        if is_int:
            try:
                column = column.astype(np.int64)
            except (TypeError, ValueError, OverflowError):
                pass  # a value that is not an integer: kept as written
        elif isinstance(default, float):
            try:
                column = column.astype(np.float64)
            except (TypeError, ValueError):
                pass
        df[col] = column
    df["iteration"] = ev["step"].to_numpy()
    return df


def _index_correlation(df: pd.DataFrame) -> np.ndarray:
    out = np.minimum(df["correlation"].to_numpy(), 0)
    with_corr = df["correlation"].to_numpy() != -1
    host = df[with_corr & (df["stream"].to_numpy() < 0)][["index", "correlation"]]
    gpu = df[with_corr & (df["stream"].to_numpy() >= 0)][["index", "correlation"]]
    pairs = host.merge(gpu, on="correlation", how="inner")
    position = pd.Series(np.arange(len(df)), index=df["index"].to_numpy())
    out[position[pairs["index_x"]].to_numpy()] = pairs["index_y"].to_numpy()
    out[position[pairs["index_y"]].to_numpy()] = pairs["index_x"].to_numpy()
    return out


class TraceCollection:
    """HTA's TraceCollection (`analyzer.t`) over tprof's traces: trace_path,
    trace_files, traces {rank: DataFrame}, meta_data {rank: the file's
    top-level keys}, symbol_table, min_ts; get_trace, get_all_traces,
    get_ranks, get_iterations, get_trace_duration,
    get_raw_trace_for_one_rank, decode_symbol_ids."""

    def __init__(self, traces: Dict[int, Any], include_last_profiler_step: bool, trace_path: str = "") -> None:
        self.trace_path = trace_path
        self.trace_files: Dict[int, str] = {r: t.path for r, t in traces.items()}
        metadata = {r: t.metadata for r, t in traces.items()}  # decoded once per rank
        self.meta_data: Dict[int, Dict[str, Any]] = {r: dict(m["top_level"]) for r, m in metadata.items()}
        self.symbol_table = TraceSymbolTable()
        self.is_parsed = True
        frames = {r: _rank_frame(t, metadata[r]) for r, t in traces.items()}
        starts = [int(df["ts"].min()) for df in frames.values() if len(df)]
        self.min_ts: int = min(starts) if starts else 0
        step_names = set()
        for df in frames.values():
            step_names.update(n for n in pd.unique(df["name"]) if _STEP_NAME.fullmatch(n))
        # HTA keeps the last step when the job has one step name or none.
        include_last = include_last_profiler_step or len(step_names) <= 1
        self.traces: Dict[int, pd.DataFrame] = {}
        for rank, df in frames.items():
            self.symbol_table.add_symbols(pd.unique(df["cat"]))
            self.symbol_table.add_symbols(pd.unique(df["name"]))
            df["index_correlation"] = _index_correlation(df)
            df["ts"] = df["ts"] - self.min_ts
            df["end"] = df["ts"] + df["dur"]
            self.traces[rank] = self._filtered(df, include_last)
        ids = self.symbol_table.sym_index
        for df in self.traces.values():
            df["name"] = df["name"].map(ids).astype(np.int64)
            df["cat"] = df["cat"].map(ids).astype(np.int64)

    @staticmethod
    def _filtered(df: pd.DataFrame, include_last: bool) -> pd.DataFrame:
        host = df[df["stream"].to_numpy() < 0]
        gpu = df[(df["stream"].to_numpy() >= 0) & (df["correlation"].to_numpy() >= 0)]
        if host.empty:
            return df.iloc[0:0].set_index("index", drop=False).rename_axis(None)
        steps = host[host["name"].str.fullmatch(_STEP_NAME.pattern)]
        if include_last:
            limit = int((steps if len(steps) else host)["end"].max())
            host = host[host["ts"] <= limit]
        else:  # a rank without steps in a job with them: HTA keeps none of its rows
            host = host[host["ts"] < (steps if len(steps) else host)["ts"].max()]
        gpu = gpu[gpu["correlation"].isin(host["correlation"].to_numpy())]
        out = pd.concat([gpu, host], axis=0, ignore_index=True)
        return out.set_index("index", drop=False).rename_axis(None)

    def get_ranks(self) -> List[int]:
        return sorted(self.traces)

    def _rank_or_first(self, rank: Optional[int]) -> int:
        if rank is None:
            ranks = self.get_ranks()
            return ranks[0] if ranks else -1
        return rank

    def get_trace(self, rank: int) -> pd.DataFrame:
        if rank not in self.traces:
            raise ValueError(f"TraceCollection.get_trace: no trace for rank {rank} (ranks: {self.get_ranks()})")
        return self.traces[rank]

    def get_all_traces(self) -> Dict[int, pd.DataFrame]:
        return self.traces

    def get_iterations(self, rank: Optional[int] = None) -> List[int]:
        rank = self._rank_or_first(rank)
        if rank not in self.traces:
            return []
        return sorted(int(i) for i in pd.unique(self.traces[rank]["iteration"]) if i >= 0)

    def get_trace_duration(self, rank: Optional[int] = None) -> int:
        df = self.get_trace(self._rank_or_first(rank))
        return int(df["ts"].max() - df["ts"].min()) if len(df) else 0

    def get_raw_trace_for_one_rank(self, rank: int = 0) -> Dict[str, Any]:
        """The rank's file as json.load reads it (no filter, no alignment)."""
        if rank not in self.trace_files:
            raise ValueError(f"TraceCollection.get_raw_trace_for_one_rank: no trace for rank {rank}")
        path = self.trace_files[rank]
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            return json.loads(f.read())

    def decode_symbol_ids(self, use_shorten_name: bool = True) -> None:
        """Adds s_name and s_cat (the text of name and cat) to every rank's
        frame, names shortened as HTA's shorten_name unless told not to."""
        table = self.symbol_table.sym_table
        if use_shorten_name:
            table = [shorten_name(s) for s in table]
        text = np.array(table + [""], dtype=object)
        for df in self.traces.values():
            for col in ("name", "cat"):
                ids = df[col].to_numpy()
                df["s_" + col] = text[np.where(ids >= 0, ids, len(table))]
