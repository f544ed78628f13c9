"""HolisticTraceAnalysis' API (tprof.TraceAnalysis) against the figures the
C++ tests hold: the hand-worked synthetic traces of
tests/golden/breakdowns_test.cc, HTA's 2-rank trace_filter job of
tests/golden/ranks_test.cc (tests/golden/expected/ranks_merge_json.json),
and `tprof diagnose --format json`'s breakdowns on real traces; the memory
bandwidth and the stragglers against HTA's own steps redone here on the
raw JSON. Times are HTA's µs."""

import glob
import gzip
import json
import math
import os
import random
import re
import tempfile
import unittest

import numpy as np
import pandas as pd

import tprof
from support import cli_json, data

TRACE_FILTER = data("public", "hta", "trace_filter")

# breakdowns_test.cc's kTwoStreams: one host thread launching on streams 7
# and 9 of GPU 0, rank 3. Device activity sorted by start: 100-130 gemm,
# 120-160 nccl, 135-145 add, 200-210 mul, 210.02-215 memcpy, 300-301 memset.
TWO_STREAMS = b"""{"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}, "traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 2, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 2, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 25, "dur": 2, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30, "dur": 2, "args": {"correlation": 4}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 190, "dur": 2, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 30, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "add", "pid": 0, "tid": 7, "ts": 135, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "mul", "pid": 0, "tid": 7, "ts": 200, "dur": 10, "args": {"correlation": 5, "stream": 7}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 210.02, "dur": 4.98, "args": {"correlation": 3, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 9, "ts": 120, "dur": 40, "args": {"correlation": 4, "stream": 9}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 9, "ts": 300, "dur": 1, "args": {"stream": 9}}
]}"""

TEMPORAL_COLUMNS = ["rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
                    "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
STATS_COLUMNS = ["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]
_IDLE_NAMES = ["host_wait", "kernel_wait", "other"]


def idle_of(df: pd.DataFrame, stream: int) -> dict:
    s = df[df["stream"] == stream]
    return dict(zip(s["idle_category"], s["idle_time"]))


class SyntheticTest(unittest.TestCase):
    def test_temporal_breakdown(self):
        df = tprof.read(TWO_STREAMS).get_temporal_breakdown()
        self.assertEqual(list(df.columns), TEMPORAL_COLUMNS)
        row = df.iloc[0]
        self.assertEqual(row["rank"], 3)  # distributedInfo.rank
        # HtaTemporal.WholeTraceSpanIdleComputeAndNonCompute: kernel_time 201,
        # idle 126, compute 50, non-compute 25 (the memcpy rounded to [211,215)).
        self.assertEqual(row["kernel_time(us)"], 201)
        self.assertEqual(row["idle_time(us)"], 126)
        self.assertEqual(row["compute_time(us)"], 50)
        self.assertEqual(row["non_compute_time(us)"], 25)
        self.assertEqual(row["idle_time_pctg"], round(100 * 126 / 201, 2))
        self.assertEqual(row["compute_time_pctg"], round(100 * 50 / 201, 2))

    def test_idle_time_breakdown(self):
        df, stats = tprof.read(TWO_STREAMS).get_idle_time_breakdown()
        self.assertIsNone(stats)
        self.assertEqual(list(df.columns), IDLE_COLUMNS)
        self.assertEqual(list(df["stream"].unique()), [7, 9])  # order of first appearance
        self.assertTrue((df["rank"] == 3).all())
        # HtaIdle.OneEntryPerStreamInOrderOfFirstAppearance.
        self.assertEqual(idle_of(df, 7), {"host_wait": 55.0, "kernel_wait": 6.0, "other": 0.0})
        self.assertEqual(idle_of(df, 9), {"other": 140.0})
        s7 = df[df["stream"] == 7]
        self.assertEqual(list(s7["idle_time_ratio"]), [round(55 / 61, 2), round(6 / 61, 2), 0.0])
        only9, _ = tprof.read(TWO_STREAMS).get_idle_time_breakdown(streams=[9])
        self.assertEqual(list(only9["stream"]), [9])

    def test_thirty_microseconds_split_kernel_wait_from_other(self):
        t = tprof.read(b"""{"traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100, "dur": 10, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 139, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 180, "dur": 10, "args": {"correlation": 3, "stream": 7}}
]}""")
        df, _ = t.get_idle_time_breakdown()
        self.assertEqual(idle_of(df, 7), {"kernel_wait": 29.0, "other": 31.0})

    def test_nanosecond_times_are_rounded_as_hta_rounds_them(self):
        t = tprof.read(b"""{"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100.2, "dur": 10.5, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 110.9, "dur": 5, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 120.3, "dur": 0.4, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": 130.0, "dur": 2, "args": {"stream": 7}}
]}""")
        df, _ = t.get_idle_time_breakdown()
        self.assertEqual(idle_of(df, 7), {"kernel_wait": 17.0, "other": 0.0})
        row = t.get_temporal_breakdown().iloc[0]
        self.assertEqual((row["kernel_time(us)"], row["idle_time(us)"], row["compute_time(us)"]), (31, 17, 14))

    def test_step_filter_drops_the_last_step(self):
        t = tprof.read(b"""{"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 50, "dur": 60, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 120, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 150, "dur": 1, "args": {"stream": 7}}
]}""")
        self.assertEqual(t.get_temporal_breakdown().iloc[0]["kernel_time(us)"], 60)

    def test_kernel_breakdown(self):
        types, kernels = tprof.read(TWO_STREAMS).get_gpu_kernel_breakdown()
        self.assertEqual(list(types.columns), ["kernel_type", "sum", "percentage"])
        self.assertEqual(list(kernels.columns),
                         ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "kernel_type", "rank"])
        # COMPUTATION groups [100,130) [135,145) [200,210) = 50, COMMUNICATION
        # [120,160) = 40, MEMORY [211,215) [300,301) = 5 (HTA's rounding);
        # computation and communication overlap on [120,130) and [135,145).
        got = dict(zip(types["kernel_type"], types["sum"]))
        self.assertEqual(got, {"COMPUTATION": 30, "COMMUNICATION": 20, "COMPUTATION overlapping COMMUNICATION": 20,
                               "MEMORY": 5})
        self.assertEqual(list(types["sum"]), sorted(types["sum"], reverse=True))
        self.assertAlmostEqual(types["percentage"].sum(), 100, delta=0.2)
        by = {(r["kernel_type"], r["name"]): r for r in kernels.to_dict("records")}
        self.assertEqual(by[("COMPUTATION", "gemm")]["sum (us)"], 30)
        self.assertEqual(by[("COMMUNICATION", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")]["sum (us)"], 40)
        # HTA's rows: the memcpy rounded to [211,215), 4 µs (the file says 4.98).
        self.assertEqual(by[("MEMORY", "Memcpy DtoH (Device -> Pageable)")]["sum (us)"], 4)
        self.assertTrue((kernels["rank"] == 3).all())

    def test_kernel_breakdown_without_memory_kernels(self):
        types, kernels = tprof.read(TWO_STREAMS).get_gpu_kernel_breakdown(include_memory_kernels=False)
        # The same sweep without the MEMORY rows [211,215) [300,301).
        got = dict(zip(types["kernel_type"], types["sum"]))
        self.assertEqual(got, {"COMPUTATION": 30, "COMMUNICATION": 20, "COMPUTATION overlapping COMMUNICATION": 20})
        self.assertEqual(list(types["percentage"]), [round(100 * 30 / 70, 1), round(100 * 20 / 70, 1),
                                                     round(100 * 20 / 70, 1)])
        self.assertEqual(set(kernels["kernel_type"]), {"COMPUTATION", "COMMUNICATION"})
        self.assertEqual(sorted(kernels["name"]), ["add", "gemm", "mul", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"])

    def test_consecutive_kernel_delay(self):
        # Gaps on stream 7 (launches long before): 29 µs before b, 31 µs before c.
        t = tprof.read(b"""{"traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100, "dur": 10, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 139, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 180, "dur": 10, "args": {"correlation": 3, "stream": 7}}
]}""")
        for delay, want in ((30, {"kernel_wait": 29.0, "other": 31.0}),
                            (29, {"other": 60.0}),  # 29 is not under 29: no kernel_wait row, as in HTA
                            (29.5, {"kernel_wait": 29.0, "other": 31.0}),
                            (32, {"kernel_wait": 60.0, "other": 0.0}),
                            (0, {"other": 60.0}),
                            (float("inf"), {"kernel_wait": 60.0, "other": 0.0})):
            with self.subTest(delay=delay):
                df, _ = t.get_idle_time_breakdown(consecutive_kernel_delay=delay)
                self.assertEqual(idle_of(df, 7), want)
        with self.assertRaises(ValueError):
            t.get_idle_time_breakdown(consecutive_kernel_delay=float("nan"))
        # Host wait comes first whatever the delay: TWO_STREAMS' mul waited 55 µs for its launch.
        df, _ = tprof.read(TWO_STREAMS).get_idle_time_breakdown(consecutive_kernel_delay=0)
        self.assertEqual(idle_of(df, 7), {"host_wait": 55.0, "other": 6.0})
        self.assertEqual(idle_of(df, 9), {"other": 140.0})

    def test_idle_interval_stats(self):
        df, stats = tprof.read(TWO_STREAMS).get_idle_time_breakdown(show_idle_interval_stats=True)
        self.assertEqual(list(df.columns), IDLE_COLUMNS)
        self.assertEqual(list(stats.columns), STATS_COLUMNS)
        self.assertEqual(stats.index.name, "idle_category")
        self.assertEqual(list(stats.index), ["host_wait", "kernel_wait", "other", "other"])
        self.assertEqual(list(stats["stream"]), [7, 7, 7, 9])
        self.assertTrue((stats["rank"] == 3).all())
        # Stream 7 by ts: gemm (first: "other", no interval), add 5 µs after
        # it (kernel wait), mul 55 (host wait: launched at 190 > 145), the
        # memcpy 1 (kernel wait). Stream 9: nccl, then the memset 140 later
        # (no launch: other).
        nan = float("nan")
        want = [
            [1, 55, nan, 55, 55, 55, 55, 55],
            [2, 3, round(math.sqrt(8), 2), 1, 2, 3, 4, 5],  # [1, 5]: quartiles 1 + 4·q
            [0, nan, nan, nan, nan, nan, nan, nan],
            [1, 140, nan, 140, 140, 140, 140, 140],
        ]
        got = stats[STATS_COLUMNS[2:]].to_numpy().tolist()
        np.testing.assert_array_equal(np.array(got), np.array(want, dtype=np.float64))
        self.assertEqual(stats["count"].dtype, np.float64)  # as describe() gives it
        _, none = tprof.read(TWO_STREAMS).get_idle_time_breakdown()
        self.assertIsNone(none)
        _, only9 = tprof.read(TWO_STREAMS).get_idle_time_breakdown(streams=[9, 7], show_idle_interval_stats=True)
        self.assertEqual(list(only9["stream"]), [9, 7, 7, 7])  # HTA goes through the streams as given

    def test_idle_interval_stats_equal_htas_pandas_on_random_kernels(self):
        # HTA's _analyze_idle_time_for_stream done with pandas on a trace of
        # 300 kernels on 3 streams, random gaps and launch times.
        rng = random.Random(28)
        events, rows = [], []
        for stream in (3, 7, 13):
            ts = 1000
            for i in range(100):
                corr = stream * 1000 + i
                ts += rng.choice([0, 1, 2, 5, 17, 29, 30, 31, 64, 250])
                dur = rng.randint(1, 40)
                launch = ts - rng.randint(-20, 400)
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": launch, "dur": 1, "args": {"correlation": corr}})
                events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": stream, "ts": ts,
                               "dur": dur, "args": {"correlation": corr, "stream": stream}})
                rows.append((stream, ts, dur, launch))
                ts += dur
        rng.shuffle(events)
        t = tprof.read(json.dumps({"traceEvents": events}).encode())
        for delay in (30, 3):
            with self.subTest(delay=delay):
                df, stats = t.get_idle_time_breakdown(consecutive_kernel_delay=delay, show_idle_interval_stats=True)
                k = pd.DataFrame(rows, columns=["stream", "ts", "dur", "ts_runtime"])
                want, want_sums = [], []
                # HTA's streams: in order of first appearance among the rows.
                first_seen = [e["args"]["stream"] for e in events if e["cat"] == "kernel"]
                for stream in dict.fromkeys(first_seen):
                    s = k[k["stream"] == stream].sort_values(by="ts").copy()
                    s["prev_end_ts"] = (s["ts"] + s["dur"]).shift(1)
                    s["idle_interval"] = s["ts"] - s["prev_end_ts"]
                    s["idle_category"] = 2
                    host = s["ts_runtime"] > s["prev_end_ts"]
                    s.loc[host, "idle_category"] = 0
                    s.loc[~host & (s["idle_interval"] < delay), "idle_category"] = 1
                    d = s.groupby("idle_category").idle_interval.describe()
                    d.insert(0, "stream", stream)
                    want.append(d)
                    for cat, total in s.groupby("idle_category").idle_interval.sum().items():
                        want_sums.append((stream, _IDLE_NAMES[cat], total))
                want = pd.concat(want).round(2)
                want.insert(0, "rank", 0)
                want.index = pd.Index([_IDLE_NAMES[i] for i in want.index], name="idle_category")
                pd.testing.assert_frame_equal(stats, want, check_dtype=False)
                self.assertEqual(list(stats.dtypes[2:]), [np.float64] * 8)
                # The first frame: the same rows, HTA's sums.
                self.assertEqual(list(zip(df["stream"], df["idle_category"], df["idle_time"])), want_sums)

    def test_include_last_profiler_step(self):
        # Steps [0,100) and [100,200). a is launched in step 1, b in step 2,
        # d at 200 (the steps' end), c at 210 (after it); the memset has no
        # launch and starts at 150.
        trace = b"""{"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 210, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 200, "dur": 1, "args": {"correlation": 4}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 50, "dur": 60, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 120, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 150, "dur": 1, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 220, "dur": 10, "args": {"correlation": 3, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": 240, "dur": 10, "args": {"correlation": 4, "stream": 7}}
]}"""
        t = tprof.read(trace)
        default = tprof.TraceAnalysis(traces=[t])
        last = tprof.TraceAnalysis(traces=[t], include_last_profiler_step=True)
        # Default: a alone. With the last step: a [50,110), b [120,130), the
        # memset [150,151), d [240,250); c is still out (launched at 210).
        row = default.get_temporal_breakdown().iloc[0]
        self.assertEqual((row["kernel_time(us)"], row["idle_time(us)"]), (60, 0))
        row = last.get_temporal_breakdown().iloc[0]
        self.assertEqual((row["kernel_time(us)"], row["idle_time(us)"], row["compute_time(us)"],
                          row["non_compute_time(us)"]), (200, 119, 80, 1))
        df, _ = last.get_idle_time_breakdown()
        # b 10 after a (launched at 110, not after a's end), the memset 20
        # after b: kernel wait; d 89 after the memset, launched after its end.
        self.assertEqual(idle_of(df, 7), {"host_wait": 89.0, "kernel_wait": 30.0, "other": 0.0})
        self.assertEqual(idle_of(default.get_idle_time_breakdown()[0], 7), {"other": 0.0})
        types, kernels = last.get_gpu_kernel_breakdown()
        self.assertEqual(dict(zip(types["kernel_type"], types["sum"])), {"COMPUTATION": 80, "MEMORY": 1})
        self.assertEqual(list(kernels["name"]), ["a", "b", "d", "Memset (Device)"])
        self.assertEqual(list(default.get_gpu_kernel_breakdown()[1]["name"]), ["a"])
        # The queue lengths are over the same rows: a alone (launched at 10,
        # started at 50); with the last step a, b and d (c launched at 210).
        q = default.get_queue_length_time_series()[0]
        self.assertEqual((list(q["ts"]), list(q["queue_length"])), ([10, 50], [1, 0]))
        q = last.get_queue_length_time_series()[0]
        self.assertEqual((list(q["ts"]), list(q["queue_length"])), ([10, 50, 110, 120, 200, 240], [1, 0, 1, 0, 1, 0]))
        # One step: nothing is filtered either way.
        one = tprof.read(trace.replace(b"ProfilerStep#2", b"Other"))
        for flag in (False, True):
            row = tprof.TraceAnalysis(traces=[one], include_last_profiler_step=flag).get_temporal_breakdown().iloc[0]
            self.assertEqual(row["kernel_time(us)"], 200)

    def test_profiler_steps_and_kernel_launch_stats(self):
        # The trace of test_include_last_profiler_step: a launched at 10 (1 us)
        # runs at 50 for 60 us; b at 110 -> 120; d at 200 -> 240; c at 210 (after the steps).
        trace = b"""{"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 210, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 200, "dur": 2.7, "args": {"correlation": 4}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 50, "dur": 60, "args": {"correlation": 1, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 120, "dur": 10, "args": {"correlation": 2, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 220, "dur": 10, "args": {"correlation": 3, "stream": 7}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 240.9, "dur": 10, "args": {"correlation": 4, "stream": 7}}
]}"""
        t = tprof.read(trace)
        default = tprof.TraceAnalysis(traces=[t])
        last = tprof.TraceAnalysis(traces=[t], include_last_profiler_step=True)
        self.assertEqual(default.get_profiler_steps(), [1])
        self.assertEqual(last.get_profiler_steps(), [1, 2])
        columns = ["correlation", "cpu_duration", "gpu_duration", "launch_delay", "launch_gap"]
        df = default.get_cuda_kernel_launch_stats(visualize=False)[0]
        self.assertEqual(list(df.columns), columns)
        # HTA's launch_delay: 50 - 10 + 1; the gap after the call: 50 - 11.
        self.assertEqual(df.values.tolist(), [[1, 1, 60, 41, 39]])
        df = last.get_cuda_kernel_launch_stats(visualize=False)[0].sort_values("correlation")
        # The memset's call at 200 (the steps' end) is in; c's at 210 is not.
        # A ts with a fraction (240.9) makes HTA move every event inward to
        # whole µs: the call 200-202.7 is 200-202, the memset 240.9-250.9 is
        # 241-250 (launch_delay 241 - 200 + 2, the gap 241 - 202).
        self.assertEqual(df.values.tolist(), [[1, 1, 60, 41, 39], [2, 1, 10, 11, 9], [4, 2, 9, 43, 39]])
        no_memory = last.get_cuda_kernel_launch_stats(include_memory_events=False, visualize=False)[0]
        self.assertEqual(sorted(no_memory["correlation"]), [1, 2])
        for name in ("get_frequent_cuda_kernel_sequences",
                     "get_gpu_kernels_with_user_annotations", "get_gpu_user_annotation_breakdown",
                     "get_aten_op_kernels_and_delay", "get_cupti_counter_data_with_operators",
                     "generate_trace_with_counters"):
            with self.assertRaises(NotImplementedError) as e:
                getattr(default, name)
            self.assertIn("tprof", str(e.exception))
        # Provided now: HTA's memory bandwidth, straggler and full-queue analyses.
        for name in ("get_memory_bw_summary", "get_memory_bw_time_series", "get_potential_stragglers",
                     "get_time_spent_blocked_on_full_queue"):
            self.assertTrue(callable(getattr(default, name)), name)
        with self.assertRaises(AttributeError):
            default.no_such_method

    def test_comm_comp_overlap_and_queue_length(self):
        t = tprof.read(TWO_STREAMS)
        df = t.get_comm_comp_overlap()
        self.assertEqual(list(df.columns), ["rank", "comp_comm_overlap_pctg"])
        self.assertEqual(df.iloc[0]["comp_comm_overlap_pctg"], 50.0)  # 20 of nccl's 40 µs
        series = t.get_queue_length_time_series()
        self.assertEqual(list(series), [3])
        s = series[3]
        self.assertEqual(list(s.columns), ["ts", "pid", "tid", "stream", "queue_length"])
        # Stream 7: launches at 10, 20, 25, 190; starts at 100, 135, 200, 210.02.
        s7 = s[s["stream"] == 7]
        self.assertEqual(list(s7["ts"]), [10, 20, 25, 100, 135, 190, 200, 210.02])
        self.assertEqual(list(s7["queue_length"]), [1, 2, 3, 2, 1, 2, 1, 0])
        summary = t.get_queue_length_summary()
        self.assertEqual(list(summary.index), [(3, 7), (3, 9)])
        self.assertEqual(list(summary.columns.get_level_values(1)),
                         ["count", "mean", "std", "min", "25%", "50%", "75%", "max"])
        self.assertEqual(summary.loc[(3, 7), ("queue_length", "count")], 8)
        self.assertEqual(summary.loc[(3, 7), ("queue_length", "mean")], 1.5)
        self.assertEqual(summary.loc[(3, 7), ("queue_length", "max")], 3)
        self.assertEqual(summary.loc[(3, 9), ("queue_length", "mean")], 0.5)

    def test_cpu_only_trace_has_no_rows(self):
        t = tprof.read(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}')
        with self.assertRaises(ValueError):
            t.get_temporal_breakdown()
        self.assertIsNone(t.get_queue_length_summary())
        self.assertTrue(math.isnan(t.get_comm_comp_overlap().iloc[0]["comp_comm_overlap_pctg"]))


# A GPU lane whose tid is not the stream (MTIA's traces: HTA's
# mtia_trace_single_rank has tid 4 for stream 1): every HTA figure keys
# streams by the rows' args "stream", so the queue lengths and the idle
# breakdown name stream 108 alike.
TID_IS_NOT_STREAM = b"""{"traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 9, "tid": 4, "ts": 10, "dur": 5, "args": {"correlation": 1, "stream": 108}},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 9, "tid": 4, "ts": 20, "dur": 5, "args": {"correlation": 2, "stream": 108}}
]}"""


class QueueStreamTest(unittest.TestCase):
    def test_queue_length_and_idle_time_join_on_stream(self):
        t = tprof.read(TID_IS_NOT_STREAM)
        self.assertEqual(list(t.lanes()["stream"][t.lanes()["kind"] == "gpu"]), [4])  # the lane's: its tid
        q = t.get_queue_length_time_series()[0]
        self.assertEqual(q.values.tolist(), [[1, 9, 4, 108, 1], [2, 9, 4, 108, 2], [10, 9, 4, 108, 1],
                                             [20, 9, 4, 108, 0]])
        summary = t.get_queue_length_summary().reset_index()
        summary.columns = [c[1] or c[0] for c in summary.columns]
        idle, _ = t.get_idle_time_breakdown()
        joined = summary.merge(idle, on=["rank", "stream"], how="inner")
        self.assertEqual(set(joined["stream"]), {108})
        self.assertEqual(list(joined["idle_category"]), ["kernel_wait", "other"])
        self.assertEqual(list(joined["count"]), [4.0, 4.0])

    def test_real_job_joins_on_every_stream(self):
        analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER)
        summary = analyzer.get_queue_length_summary(ranks=[0, 1]).reset_index()
        summary.columns = [c[1] or c[0] for c in summary.columns]
        idle, _ = analyzer.get_idle_time_breakdown(ranks=[0, 1])
        keys = set(zip(summary["rank"], summary["stream"]))
        self.assertEqual(keys, {(r, s) for r in (0, 1) for s in (7, 23, 25, 84, 203)})
        joined = summary.merge(idle, on=["rank", "stream"], how="left")
        self.assertFalse(joined["idle_category"].isna().any())  # every queue stream is an idle stream
        self.assertEqual(keys, set(zip(idle["rank"], idle["stream"])))


# The runtime calls HTA's queue length counts (get_runtime_launch_events_mask).
HTA_LAUNCH_NAMES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
                    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
                    "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream"}
FULL_QUEUE_COLUMNS = ["rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"]


def hta_table(events: list) -> list:
    """HTA's table of one rank of a whole-µs trace: its parser's rows
    (complete events with a dur and a category, not the "Trace" span) and,
    with two ProfilerStep names or more, _filter_irrelevant_gpu_kernels:
    host rows starting before the last step's start, and device rows (a
    stream and a correlation, or a sync) whose correlation such a host row
    has."""
    rows = [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") and e["cat"] != "Trace"]

    def device(e):
        a = e.get("args", {})
        return (a.get("stream", -1) >= 0 and a.get("correlation", -1) >= 0) or e["name"] in ("Event Sync", "Context Sync")

    steps = [e for e in rows if not device(e) and HTA_STEP.match(e["name"])]
    if len({e["name"] for e in steps}) < 2:
        return rows
    last_start = max(e["ts"] for e in steps)
    host = [e for e in rows if not device(e) and e["ts"] < last_start]
    correlations = {e.get("args", {}).get("correlation", -1) for e in host}
    return [e for e in rows if device(e) and e["args"].get("correlation", -1) in correlations] + host


def hta_full_queue(events: list, max_queue_length: int) -> list:
    """TraceCounters' queue length series and get_time_spent_blocked_on_full_queue
    on raw events, one (stream, duration, relative duration) per stream that
    reaches max_queue_length: per stream, +1 at a launch call's ts and -1 at
    its activity's (ties: the launch first), the running sum; each point
    lasts until the stream's next; the points at or above the max summed,
    over the table's last ts minus its first (get_trace_duration)."""
    table = hta_table(events)
    launches = {e["args"]["correlation"]: e["ts"] for e in table
                if e["name"] in HTA_LAUNCH_NAMES and e.get("args", {}).get("correlation", -1) > 0}
    points = {}
    for e in table:
        a = e.get("args", {})
        if a.get("stream", -1) != -1 and a.get("correlation", -1) in launches:
            points.setdefault(a["stream"], []).extend([(launches[a["correlation"]], 0, 1), (e["ts"], 1, -1)])
    ts = [e["ts"] for e in table]
    trace_duration = max(ts) - min(ts)
    out = []
    for stream in sorted(points):
        p = sorted(points[stream])
        lengths = np.cumsum([d for _, _, d in p])
        full = sum(p[i + 1][0] - p[i][0] for i in range(len(p) - 1) if lengths[i] >= max_queue_length)
        if any(q >= max_queue_length for q in lengths):
            out.append((stream, float(full), full / trace_duration))
    return out


def full_queue_trace(rank: int, launches: dict) -> dict:
    """A trace of `rank` whose streams each get launches[stream] =
    (first launch ts, count, first kernel ts, kernel spacing) kernels of 1
    µs, launched 1 µs apart; ProfilerStep#1 [0, 5000) and #2 [5000, 6000)
    (HTA's filter drops #2: its kernel launched at 5100 and its cpu_op at
    5500, but not the kernels of #1 that start after 5000); the "Trace" span,
    an event without a category and an instant earlier than everything."""
    ev = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1, "ts": -300, "dur": 7000},
        {"ph": "X", "name": "no category", "pid": 1, "tid": 1, "ts": -200, "dur": 1},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": -100, "s": "t"},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 5000},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 5000, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 5500, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5100, "dur": 1,
         "args": {"correlation": 99999}},
        {"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": 5200, "dur": 1,
         "args": {"correlation": 99999, "stream": 7}},
    ]
    corr = 1
    for stream, (launch_ts, count, kernel_ts, spacing) in launches.items():
        for i in range(count):
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": launch_ts + i, "dur": 1, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"k{stream}", "pid": 0, "tid": stream,
                       "ts": kernel_ts + spacing * i, "dur": 1, "args": {"correlation": corr, "stream": stream}})
            corr += 1
    return {"distributedInfo": {"rank": rank}, "traceEvents": ev}


class FullQueueTest(unittest.TestCase):
    # Rank 2: stream 7's 1030 launches (10-1039) run from 2000, 2 µs
    # apart; stream 9's 1024 (3000-4023) from 4100, 1 µs apart (the last
    # at 5123, after the last step's start: kept, as it was launched
    # before). Rank 5: three launches (10-12) run at 20, 30, 40.
    RANKS = {2: {7: (10, 1030, 2000, 2), 9: (3000, 1024, 4100, 1)}, 5: {7: (10, 3, 20, 10)}}

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="tprof_test_hta_")
        cls.events = {}
        for rank, launches in cls.RANKS.items():
            doc = full_queue_trace(rank, launches)
            cls.events[rank] = doc["traceEvents"]
            with open(os.path.join(cls.dir.name, f"rank-{rank}.json"), "w") as f:
                json.dump(doc, f)
        cls.analyzer = tprof.TraceAnalysis(trace_dir=cls.dir.name)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def want(self, max_queue_length: int, ranks=(2, 5)) -> pd.DataFrame:
        rows = [(rank,) + r for rank in ranks for r in hta_full_queue(self.events[rank], max_queue_length)]
        return pd.DataFrame(rows, columns=FULL_QUEUE_COLUMNS, index=pd.RangeIndex(len(rows)))

    def test_hand_worked_full_queues(self):
        df = self.analyzer.get_time_spent_blocked_on_full_queue()
        self.assertEqual(list(df.columns), FULL_QUEUE_COLUMNS)
        self.assertEqual([str(d) for d in df.dtypes], ["int64", "int64", "float64", "float64"])
        # Stream 7 is at 1024 or more from the 1024th launch (1033) to the
        # 7th kernel (2012): 6 x 1 µs between launches, 961 to the first
        # kernel, 6 x 2 µs between kernels. Stream 9: from its 1024th launch
        # (4023) to its first kernel (4100). HTA's trace duration: its rows
        # from ProfilerStep#1 (0) to stream 9's last kernel (5123); the
        # "Trace" span, the row without a category, the instant and what the
        # step filter drops (5000, 5100, 5200, 5500) are not rows.
        self.assertEqual(df.values.tolist(), [[2, 7, 979.0, 979 / 5123], [2, 9, 77.0, 77 / 5123]])
        pd.testing.assert_frame_equal(df, self.want(1024), check_dtype=False)
        # HTA's default is its CUDA_MAX_LAUNCH_QUEUE_PER_STREAM, 1024.
        self.assertEqual(self.analyzer.get_time_spent_blocked_on_full_queue(max_queue_length=1025).values.tolist(),
                         [[2, 7, 976.0, 976 / 5123]])

    def test_series_given_and_other_lengths(self):
        series = self.analyzer.get_queue_length_time_series(ranks=[2, 5])
        self.assertEqual(list(series), [2, 5])
        for limit in (1, 2, 3, 4, 1000, 1030, 1031):
            with self.subTest(max_queue_length=limit):
                got = self.analyzer.get_time_spent_blocked_on_full_queue(series, max_queue_length=limit)
                pd.testing.assert_frame_equal(got, self.want(limit), check_dtype=False)
        # Rank 5 by hand: lengths 1, 2, 3 at 10, 11, 12, then 2, 1, 0 at 20,
        # 30, 40; its rows span 0 (ProfilerStep#1) to 40.
        got = self.analyzer.get_time_spent_blocked_on_full_queue({5: series[5]}, max_queue_length=2)
        self.assertEqual(got.values.tolist(), [[5, 7, 19.0, 19 / 40]])
        # Only the ranks of the dict given (HTA's default series is rank 0's).
        only = self.analyzer.get_time_spent_blocked_on_full_queue(self.analyzer.get_queue_length_time_series(ranks=[5]), 3)
        self.assertEqual(only.values.tolist(), [[5, 7, 8.0, 8 / 40]])

    def test_nothing_full_and_bad_input(self):
        empty = self.analyzer.get_time_spent_blocked_on_full_queue(max_queue_length=5000)
        self.assertEqual(list(empty.columns), FULL_QUEUE_COLUMNS)
        self.assertEqual(len(empty), 0)
        self.assertEqual(len(self.analyzer.get_time_spent_blocked_on_full_queue({})), 0)
        series = self.analyzer.get_queue_length_time_series(ranks=[5])
        with self.assertRaises(ValueError):
            self.analyzer.get_time_spent_blocked_on_full_queue({7: series[5]})  # no trace of rank 7
        with self.assertRaises(ValueError):
            self.analyzer.get_time_spent_blocked_on_full_queue({5: series[5].drop(columns=["queue_length"])})

    def test_real_job_equals_htas_steps_on_the_raw_json(self):
        analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER)
        series = analyzer.get_queue_length_time_series(ranks=[0, 1])
        raw = {}
        for rank in (0, 1):
            with gzip.open(os.path.join(TRACE_FILTER, f"sampled_rank-{rank}.json.gz")) as f:
                raw[rank] = json.load(f)["traceEvents"]
        # No queue of this job comes near CUDA's 1024.
        self.assertLess(max(int(df["queue_length"].max()) for df in series.values()), 1024)
        none = analyzer.get_time_spent_blocked_on_full_queue(series)
        self.assertEqual(list(none.columns), FULL_QUEUE_COLUMNS)
        self.assertEqual(len(none), 0)
        self.assertEqual(hta_full_queue(raw[0], 1024) + hta_full_queue(raw[1], 1024), [])
        # At the lengths the job does reach, HTA's steps on the raw JSON.
        top = max(int(df["queue_length"].max()) for df in series.values())
        for limit in (1, 2, top - 1, top):
            with self.subTest(max_queue_length=limit):
                want = pd.DataFrame([(rank,) + r for rank in (0, 1) for r in hta_full_queue(raw[rank], limit)],
                                    columns=FULL_QUEUE_COLUMNS)
                self.assertGreater(len(want), 0)
                got = analyzer.get_time_spent_blocked_on_full_queue(series, max_queue_length=limit)
                pd.testing.assert_frame_equal(got, want, check_dtype=False)


# HTA's memory kinds (get_memory_kernel_type) over HTA's MEMORY rows.
# HtoD: a [10, 20) 5 GB/s, b [15, 25) 3, c [25, 30) 4 (it starts as b
# ends); DtoH: [30, 30) 2 GB/s, a dur of 0 counting as 1 µs; the memset has
# no bandwidth arg (0); the kernel is not MEMORY.
MEMORY_KINDS = b"""{"traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 10, "dur": 10, "args": {"stream": 7, "correlation": 1, "memory bandwidth (GB/s)": 5}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 8, "ts": 15, "dur": 10, "args": {"stream": 8, "memory bandwidth (GB/s)": 3}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 30, "dur": 0, "args": {"stream": 7, "memory bandwidth (GB/s)": 2.0}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 40, "dur": 2, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 50, "dur": 5, "args": {"stream": 7, "memory bandwidth (GB/s)": 9}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 25, "dur": 5, "args": {"stream": 7, "memory bandwidth (GB/s)": 4}}
]}"""
MEMORY_MATCH = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
COMM_MATCH = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")


def hta_memory_bw(events: list) -> pd.DataFrame:
    """HTA's _get_memory_bw_time_series_for_rank on raw events: its rows
    with a stream (its step filter: with two ProfilerSteps or more, a row
    with a correlation stays when its launch call starts before the last
    step, another when it starts before it), MEMORY by name, the kind as
    get_memory_kernel_type, +bw at ts and -bw at ts + dur (dur 0 as 1),
    sorted by ts (stably), cumsum per kind."""
    steps = [e["ts"] for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    last_start = max(steps) if len(steps) >= 2 else math.inf
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    rows = []
    for e in events:
        a = e.get("args", {})
        if e.get("ph") != "X" or a.get("stream", -1) == -1:
            continue
        name = e["name"]
        if COMM_MATCH.match(name) or not MEMORY_MATCH.match(name):
            continue
        corr = a.get("correlation", -1)
        if (launch.get(corr, math.inf) if corr >= 0 else e["ts"]) >= last_start:
            continue
        kind = "Memset" if name[:6] == "Memset" else name[:11] if name[:6] == "Memcpy" else "Memcpy Unknown"
        rows.append((e["ts"], e["dur"] or 1, e["pid"], kind, float(a.get("memory bandwidth (GB/s)", 0.0))))
    df = pd.DataFrame(rows, columns=["ts", "dur", "pid", "name", "memory_bw_gbps"])
    ends = df.assign(ts=df["ts"] + df["dur"], memory_bw_gbps=-df["memory_bw_gbps"])
    points = pd.concat([df, ends], ignore_index=True)[["ts", "pid", "name", "memory_bw_gbps"]]
    points = points.sort_values(by="ts", kind="stable")
    parts = []
    for _, g in points.groupby("name"):
        parts.append(g.assign(memory_bw_gbps=g["memory_bw_gbps"].cumsum()))
    return pd.concat(parts).reset_index(drop=True)


class MemoryBandwidthTest(unittest.TestCase):
    def test_hand_worked_kinds(self):
        t = tprof.TraceAnalysis(traces=[tprof.read(MEMORY_KINDS)])
        series = t.get_memory_bw_time_series()
        self.assertEqual(list(series), [0])
        s = series[0]
        self.assertEqual(list(s.columns), ["ts", "pid", "name", "memory_bw_gbps"])
        got = list(zip(s["name"], s["ts"], s["memory_bw_gbps"]))
        self.assertEqual(got, [
            ("Memcpy DtoH", 30, 2.0), ("Memcpy DtoH", 31, 0.0),
            # At 25 c's start comes before b's end (HTA's stable sort of
            # starts then ends): 8 - 5 + 4 = 7 before the 3 GB/s leave.
            ("Memcpy HtoD", 10, 5.0), ("Memcpy HtoD", 15, 8.0), ("Memcpy HtoD", 20, 3.0),
            ("Memcpy HtoD", 25, 7.0), ("Memcpy HtoD", 25, 4.0), ("Memcpy HtoD", 30, 0.0),
            ("Memset", 40, 0.0), ("Memset", 42, 0.0),
        ])
        self.assertEqual(s["ts"].dtype, np.int64)  # whole µs, as HTA's
        self.assertTrue((s["pid"] == 0).all())
        summary = t.get_memory_bw_summary()
        self.assertEqual(list(summary.index), [(0, "Memcpy DtoH"), (0, "Memcpy HtoD")])  # Memset never above 0
        self.assertEqual(list(summary.columns), [("memory_bw_gbps", c) for c in
                                                 ("count", "mean", "std", "min", "25%", "50%", "75%", "max")])
        htod = summary.loc[(0, "Memcpy HtoD"), "memory_bw_gbps"]
        self.assertEqual((htod["count"], htod["mean"], htod["min"], htod["50%"], htod["max"]), (5, 5.4, 3, 5, 8))
        self.assertAlmostEqual(htod["std"], np.std([5, 8, 3, 7, 4], ddof=1))
        self.assertTrue(math.isnan(summary.loc[(0, "Memcpy DtoH"), ("memory_bw_gbps", "std")]))
        cpu_only = tprof.TraceAnalysis(traces=[tprof.read(
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}')])
        self.assertEqual(cpu_only.get_memory_bw_time_series(), {})
        self.assertIsNone(cpu_only.get_memory_bw_summary())

    def test_real_job_equals_htas_steps_on_the_raw_json(self):
        analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER)
        series = analyzer.get_memory_bw_time_series(ranks=[0, 1])
        summary = analyzer.get_memory_bw_summary(ranks=[0, 1])
        want_parts = []
        for rank in (0, 1):
            with gzip.open(os.path.join(TRACE_FILTER, f"sampled_rank-{rank}.json.gz")) as f:
                want = hta_memory_bw(json.load(f)["traceEvents"])
            with self.subTest(rank=rank):
                self.assertGreater(len(want), 20)
                pd.testing.assert_frame_equal(series[rank], want, check_dtype=False)
            d = want.loc[want["memory_bw_gbps"] > 0, ["name", "memory_bw_gbps"]]
            want_parts.append(d.assign(rank=rank)[["rank", "name", "memory_bw_gbps"]].groupby(["rank", "name"]).describe())
        pd.testing.assert_frame_equal(summary, pd.concat(want_parts))
        self.assertEqual(list(summary.index.get_level_values(1).unique()),
                         ["Memcpy DtoD", "Memcpy DtoH", "Memcpy HtoD", "Memset"])
        self.assertEqual(list(analyzer.get_memory_bw_summary().index.get_level_values(0).unique()), [0])


HTA_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")


def hta_rows(events: list) -> pd.DataFrame:
    """HTA's trace table of one rank as its straggler analysis reads it:
    every complete event with a category (not the profiler's "Trace"
    span), its args stream (-1 without), and its iteration (add_iteration:
    a host row by its ts, a device row by its launch call's ts)."""
    steps = [(e["ts"], e["ts"] + e["dur"], int(m.group(1))) for e in events
             if e.get("ph") == "X" and (m := HTA_STEP.match(e["name"]))]

    def iteration(ts):
        found = -1
        for start, end, n in steps:
            if start <= ts < end:
                found = n
        return found

    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    rows = []
    for e in events:
        if e.get("ph") != "X" or not e.get("cat") or e["cat"] == "Trace":
            continue
        a = e.get("args", {})
        stream = a.get("stream", -1)
        if stream > 0:
            it = iteration(launch[a["correlation"]]) if a.get("correlation", -1) in launch else -1
        else:
            it = iteration(e["ts"])
        rows.append((stream, it, e["name"], e["ts"], e["dur"]))
    return pd.DataFrame(rows, columns=["stream", "iteration", "name", "ts", "dur"])


def hta_stragglers(ranks: dict, steps: list, num_candidates: int, prefixes=("ncclKernel",)) -> list:
    """find_stragglers_with_late_start_comm_kernels and get_potential_stragglers
    (hta/analyzers/straggler.py, straggler_analysis.py) on raw events."""
    df = pd.concat([hta_rows(events).assign(rank=rank) for rank, events in ranks.items()], ignore_index=True)
    df = df[df["iteration"].isin(steps)]
    t_min = df["ts"].min()
    mean_iter = ((df["ts"] + df["dur"]).max() - t_min) / len(steps)
    comm = df[(df["stream"] > 0) & (df["iteration"] > 0) & (df["dur"] >= mean_iter * 0.01)
              & df["name"].str.startswith(prefixes)]
    last = comm.groupby(["rank", "stream", "iteration", "name"], as_index=False).last()
    last["metric"] = (last["ts"] - t_min) / mean_iter
    last["duration"] = last["dur"] / mean_iter
    spread = last.groupby(["stream", "iteration", "name"])["duration"].std().groupby(["stream", "name"]).mean()
    stream, name = spread.idxmax()
    m = last[(last["stream"] == stream) & (last["name"] == name)].copy()
    n = max(1, num_candidates)
    m["is_straggler"] = 0
    for _, g in m.groupby("iteration"):
        threshold = g["metric"].sort_values(ascending=False).tolist()[n - 1]
        m.loc[g.index, "is_straggler"] = (g["metric"] >= threshold).astype(int)
    counts = m.groupby("rank")["is_straggler"].sum()
    return counts.sort_values(ascending=False, kind="stable")[:n].index.tolist()


def aligned_job(name: str) -> dict:
    """tests/data/ranks/NAME with each rank's clock moved so that its first
    collective ends at 0: make_jobs.py ends every collective at one instant
    on every rank, and sets each rank's clock seconds apart (HTA aligns
    ranks by the earliest event only, so it compares them as written)."""
    ranks = {}
    for path in sorted(glob.glob(data("ranks", name, "*.json.gz"))):
        with gzip.open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"]
        end = min(e["ts"] + e["dur"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
        for e in events:
            if "ts" in e:
                e["ts"] = round(e["ts"] - end, 3)
        ranks[doc["distributedInfo"]["rank"]] = doc
    return ranks


class StragglerTest(unittest.TestCase):
    def test_two_rank_job_equals_htas_steps_on_the_raw_json(self):
        analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER)
        raw = {}
        for rank in (0, 1):
            with gzip.open(os.path.join(TRACE_FILTER, f"sampled_rank-{rank}.json.gz")) as f:
                raw[rank] = json.load(f)["traceEvents"]
        steps = analyzer.get_profiler_steps()
        self.assertEqual(steps, [551])
        for n in (-1, 1, 2, 3):
            with self.subTest(num_candidates=n):
                got = analyzer.get_potential_stragglers(num_candidates=n)
                self.assertEqual(got, hta_stragglers(raw, steps, min(n, 2)))
        self.assertEqual(analyzer.get_potential_stragglers(num_candidates=1), [1])
        # 552 is the last step (left out) and 7 no step: only 551 is taken.
        self.assertEqual(analyzer.get_potential_stragglers(profiler_steps=[551, 552, 7]), [0, 1])
        with self.assertRaises(ValueError):
            analyzer.get_potential_stragglers(profiler_steps=[552])
        with self.assertRaises(NotImplementedError):
            analyzer.get_potential_stragglers(straggler_identification_impl=lambda *a: pd.Series(dtype=int))

    def test_planted_stragglers_equal_htas_steps_on_the_raw_json(self):
        # late_input writes the NCCL kernel as older Kineto did
        # (ncclKernel_..., HTA's test); the others as NCCL 2.19+
        # (ncclDevKernel_..., which tprof takes too).
        for job, planted, prefixes in (("late_input", 2, ("ncclKernel",)),
                                       ("late_host", 6, ("ncclKernel", "ncclDevKernel")),
                                       ("late_compute", 11, ("ncclKernel", "ncclDevKernel"))):
            raw = aligned_job(job)
            analyzer = tprof.TraceAnalysis(traces=[tprof.read(json.dumps(doc).encode()) for doc in raw.values()])
            events = {rank: doc["traceEvents"] for rank, doc in raw.items()}
            steps = analyzer.get_profiler_steps()
            self.assertEqual(steps, list(range(10, 17)))  # the last step (17) left out, as HTA does
            with self.subTest(job=job):
                got = analyzer.get_potential_stragglers(num_candidates=1)
                self.assertEqual(got, [planted])
                self.assertEqual(got, hta_stragglers(events, steps, 1, prefixes))
                if job == "late_compute":
                    continue  # 16 ranks: the planted one is enough
                for chosen, n in ((None, 3), (steps[:1], -1), (steps[2:5], 2)):
                    want = hta_stragglers(events, chosen or steps, n, prefixes)
                    self.assertEqual(analyzer.get_potential_stragglers(profiler_steps=chosen, num_candidates=n), want,
                                     (chosen, n))

    def test_clocks_as_written_are_compared_as_written(self):
        # As read, every rank's clock seconds apart: HTA's metric compares
        # the start times as they are, so it names other ranks than the
        # planted one (rank 2 of late_input), and where no kernel lasts 1%
        # of the mean step time (the span of the offsets over the steps)
        # it fails, as HTA's idxmax of nothing does.
        for job, want in (("late_input", [4, 7]), ("late_host", [5, 7]), ("balanced", None)):
            raw = {}
            for path in sorted(glob.glob(data("ranks", job, "*.json.gz"))):
                with gzip.open(path) as f:
                    doc = json.load(f)
                raw[doc["distributedInfo"]["rank"]] = doc["traceEvents"]
            analyzer = tprof.TraceAnalysis(trace_dir=data("ranks", job))
            with self.subTest(job=job):
                if want is None:
                    with self.assertRaisesRegex(ValueError, "1% of the mean step time"):
                        analyzer.get_potential_stragglers()
                    with self.assertRaises(ValueError):
                        hta_stragglers(raw, analyzer.get_profiler_steps(), 2, ("ncclKernel", "ncclDevKernel"))
                    continue
                got = analyzer.get_potential_stragglers()
                self.assertEqual(got, want)
                prefixes = ("ncclKernel", "ncclDevKernel")
                self.assertEqual(got, hta_stragglers(raw, analyzer.get_profiler_steps(), 2, prefixes))


class MemoryTimelineTest(unittest.TestCase):
    def test_memory_timeline_is_tprof_memory_in_htas_columns(self):
        path = data("public", "tracelens", "h100", "gaunernst_bert-small-uncased__1016001.json.gz")
        analyzer = tprof.TraceAnalysis(trace_files=[path])
        df = analyzer.get_memory_timeline(visualize=False)
        self.assertEqual(list(df.columns)[:6], ["ts", "addr", "bytes_delta", "total_allocated", "total_reserved", "device_id"])
        self.assertTrue(df["ts"].is_monotonic_increasing)
        report = df.attrs["report"]
        self.assertEqual(len(df), sum(d["records"] for d in report["devices"]))
        gpu = df[df["device_id"] == 0]
        cuda = next(d for d in report["devices"] if d["device"] == "CUDA 0")
        self.assertEqual(int(gpu["total_allocated"].max()), cuda["peak_bytes"])
        self.assertEqual(int(gpu["total_reserved"].max()), cuda["peak_reserved_bytes"])
        self.assertEqual(set(df.loc[df["device_id"] == -1, "device_type"]), {0})
        triton = tprof.TraceAnalysis(trace_files=[data("public", "hta", "triton_example", "triton_example.json.gz")])
        self.assertTrue(triton.get_memory_timeline(visualize=False).empty)


# HTA's load (parse_trace_file, align_and_filter_trace) redone on raw
# events: complete events with a category but "Trace"; times moved inward
# to whole µs when some ts has a fraction (the end from the exact sum);
# stream, correlation, External id from the args; index_correlation and
# iteration as HTA's transform_correlation_to_index and add_iteration; ts
# and end shifted by the job's earliest ts; the step filter; GPU rows
# first. Returns {rank: rows} with name and cat as text.
def hta_load(raws: dict, include_last: bool) -> dict:
    frames = {}
    for rank, events in raws.items():
        fractional = any(isinstance(e.get("ts"), float) and e["ts"] != int(e["ts"]) for e in events)
        rows = []
        for index, e in enumerate(events):
            if e.get("ph") != "X" or e.get("cat") in (None, "", "Trace") or "dur" not in e:
                continue
            a = e.get("args", {})
            ts_ns, dur_ns = round(e["ts"] * 1000), round(e["dur"] * 1000)
            if fractional:
                ts, end = -(-ts_ns // 1000), (ts_ns + dur_ns) // 1000
            else:
                ts, end = ts_ns // 1000, (ts_ns + dur_ns) // 1000
            rows.append({"index": index, "ts": ts, "dur": end - ts, "name": e["name"], "cat": e["cat"],
                         "stream": a.get("stream", -1), "correlation": a.get("correlation", -1),
                         "external_id": a.get("External id", -1), "input_dims": a.get("Input Dims", "-1")})
        steps = sorted((r["ts"], r["ts"] + r["dur"], int(r["name"].split("#")[1])) for r in rows
                       if r["stream"] == -1 and re.fullmatch(r"ProfilerStep#\d+", r["name"]))
        by_index = {r["index"]: r for r in rows}
        host = {}
        for r in rows:
            r["index_correlation"] = min(r["correlation"], 0)
            if r["stream"] == -1 and r["correlation"] != -1:
                host[r["correlation"]] = r
        for r in rows:
            if r["stream"] >= 0 and r["correlation"] in host:
                r["index_correlation"] = host[r["correlation"]]["index"]
                host[r["correlation"]]["index_correlation"] = r["index"]
        for r in rows:
            if r["stream"] == -1:
                r["iteration"] = next((n for s, e, n in reversed(steps) if s <= r["ts"] < e), -1)
        for r in rows:
            if r["stream"] >= 0:
                r["iteration"] = by_index[r["index_correlation"]]["iteration"] if r["index_correlation"] > 0 else -1
        frames[rank] = (rows, steps)
    min_ts = min(r["ts"] for rows, _ in frames.values() for r in rows)
    names = {r["name"] for rows, _ in frames.values() for r in rows if re.fullmatch(r"ProfilerStep#\d+", r["name"])}
    keep_last = include_last or len(names) <= 1
    out = {}
    for rank, (rows, steps) in frames.items():
        for r in rows:
            r["ts"] -= min_ts
            r["end"] = r["ts"] + r["dur"]
        host = [r for r in rows if r["stream"] == -1]
        if keep_last:
            limit = max(e for _, e, _ in steps) - min_ts if steps else max(r["end"] for r in host)
            host = [r for r in host if r["ts"] <= limit]
        else:
            first = max(s for s, _, _ in steps) - min_ts if steps else min(r["ts"] for r in host)
            host = [r for r in host if r["ts"] < first]
        launched = {r["correlation"] for r in host}
        gpu = [r for r in rows if r["stream"] >= 0 and r["correlation"] >= 0 and r["correlation"] in launched]
        out[rank] = gpu + host
    return out


class TraceCollectionTest(unittest.TestCase):
    """`analyzer.t`, HTA's TraceCollection, against HTA's load redone on the raw JSON."""

    COLUMNS = ["index", "ts", "dur", "name", "cat", "stream", "correlation", "external_id", "input_dims",
               "index_correlation", "iteration", "end"]

    def frames_of(self, analyzer) -> dict:
        out = {}
        for rank, df in analyzer.t.get_all_traces().items():
            df = df.copy()
            analyzer.t.symbol_table.add_symbols_to_trace_df(df, "name")
            analyzer.t.symbol_table.add_symbols_to_trace_df(df, "cat")
            out[rank] = df[self.COLUMNS].to_dict("records")
        return out

    def test_real_job_equals_htas_load_on_the_raw_json(self):
        raws = {}
        for rank in (0, 1):
            with gzip.open(os.path.join(TRACE_FILTER, f"sampled_rank-{rank}.json.gz")) as f:
                raws[rank] = json.load(f)["traceEvents"]
        for include_last in (False, True):
            with self.subTest(include_last_profiler_step=include_last):
                analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER, include_last_profiler_step=include_last)
                want = hta_load(raws, include_last)
                got = self.frames_of(analyzer)
                self.assertEqual(sorted(got), [0, 1])
                for rank in (0, 1):
                    self.assertGreater(len(want[rank]), 1000)
                    self.assertEqual(got[rank], [{k: r[k] for k in self.COLUMNS} for r in want[rank]])
                t = analyzer.t
                self.assertEqual(t.get_ranks(), [0, 1])
                self.assertEqual(t.get_iterations(0), [551, 552] if include_last else [551])
                self.assertEqual(t.get_trace_duration(1), int(t.get_trace(1)["ts"].max() - t.get_trace(1)["ts"].min()))
                self.assertEqual(list(t.get_trace(0).index), list(t.get_trace(0)["index"]))
        # One symbol table for the job: a name has one id on both ranks.
        t = tprof.TraceAnalysis(trace_dir=TRACE_FILTER).t
        ids = t.symbol_table.sym_index
        for rank in (0, 1):
            df = t.get_trace(rank)
            launches = df[df["name"] == ids["cudaLaunchKernel"]]
            self.assertGreater(len(launches), 100)
            self.assertTrue((df.loc[launches["index_correlation"], "correlation"].to_numpy()
                             == launches["correlation"].to_numpy()).all())
        self.assertEqual(t.get_raw_trace_for_one_rank(1)["traceEvents"], raws[1])
        self.assertEqual(t.meta_data[0]["distributedInfo"]["rank"], 0)
        with self.assertRaises(ValueError):
            t.get_trace(5)

    def test_fractional_times_args_and_names(self):
        trace = b"""{"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 1000, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1010.5, "dur": 20.2,
   "args": {"Input Dims": [[4, 8], [8, 2]], "Input type": ["float", "float"], "Rank": "3"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1012, "dur": 3.7,
   "args": {"correlation": 9, "stream": "0x0"}},
  {"ph": "X", "cat": "kernel", "name": "void gemm<float, 4>(float const*, int) [clone]", "pid": 0, "tid": 7,
   "ts": 1050.25, "dur": 0.5, "args": {"correlation": 9, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1200, "dur": 1},
  {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 1001, "s": "t"},
  {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": 1, "tid": 1, "ts": 999, "dur": 300}
]}"""
        a = tprof.TraceAnalysis(traces=[tprof.read(trace)])
        t = a.t
        df = t.get_trace(0)
        t.decode_symbol_ids(use_shorten_name=False)
        # One step name: HTA keeps the last step; the host event after it
        # (aten::add at 1200) is past the steps' end and left out, the
        # instant and the Trace span are not rows.
        self.assertEqual(list(df["s_name"]), ["void gemm<float, 4>(float const*, int) [clone]",
                                              "ProfilerStep#3", "aten::mm", "cudaLaunchKernel"])
        self.assertEqual(t.min_ts, 1000)
        # Inward to whole µs, in the file's frame (baseTimeNanoseconds not added):
        # 1010.5-1030.7 -> 1011-1030; 1012-1015.7 -> 1012-1015; the kernel
        # 1050.25-1050.75 holds no whole µs: 1051-1050, dur -1, as HTA.
        rows = df.set_index("s_name")
        self.assertEqual(rows.loc["aten::mm", ["ts", "dur", "end"]].tolist(), [11, 19, 30])
        self.assertEqual(rows.loc["cudaLaunchKernel", ["ts", "dur"]].tolist(), [12, 3])
        self.assertEqual(rows.loc["void gemm<float, 4>(float const*, int) [clone]", ["ts", "dur"]].tolist(), [51, -1])
        # Args under HTA's names, HTA's defaults where absent; "0x0" is no stream.
        self.assertEqual(rows.loc["aten::mm", "input_dims"], [[4, 8], [8, 2]])
        self.assertEqual(rows.loc["aten::mm", "process_rank"], 3)
        self.assertEqual(rows.loc["cudaLaunchKernel", "input_dims"], "-1")
        self.assertEqual(rows.loc["cudaLaunchKernel", "stream"], -1)
        self.assertEqual(rows.loc["ProfilerStep#3", "in_split_size"], "[]")
        self.assertEqual(rows.loc["ProfilerStep#3", "memory_bw_gbps"], 0.0)
        self.assertEqual(rows["iteration"].tolist(), [3, 3, 3, 3])
        kernel = rows.loc["void gemm<float, 4>(float const*, int) [clone]"]
        self.assertEqual(df.loc[kernel["index_correlation"], "s_name"], "cudaLaunchKernel")
        t.decode_symbol_ids()  # HTA's default: shortened names (the last word left: "[clone]")
        self.assertEqual(sorted(df["s_name"]), ["ProfilerStep#3", "[clone]", "aten::mm", "cudaLaunchKernel"])

    def test_shorten_name_is_htas(self):
        from tprof.hta_collection import shorten_name
        cases = {
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)":
                "at::native::vectorized_elementwise_kernel",
            "aten::mm": "aten::mm",
            "void f<(anon)>(int) [clone .kd]": ".kd]",
            "(a<b)c>d": "d",  # a closer without its opener drops all before it
            "a>b": "b",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)":
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "x->y<int>": "xy",
        }
        for name, want in cases.items():
            self.assertEqual(shorten_name(name), want, name)


class TraceFilterJobTest(unittest.TestCase):
    """HTA's 2-rank trace_filter job: the figures of
    tests/golden/expected/ranks_merge_json.json (tprof merge of both ranks)."""

    @classmethod
    def setUpClass(cls):
        cls.analyzer = tprof.TraceAnalysis(trace_dir=TRACE_FILTER)

    def test_ranks_from_distributed_info(self):
        self.assertEqual(self.analyzer.ranks, [0, 1])
        self.assertEqual(sorted(os.path.basename(t.path) for t in self.analyzer.traces.values()),
                         ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"])
        by_files = tprof.TraceAnalysis(trace_files={1: os.path.join(TRACE_FILTER, "sampled_rank-1.json.gz"),
                                                    0: os.path.join(TRACE_FILTER, "sampled_rank-0.json.gz")})
        self.assertEqual(by_files.ranks, [0, 1])
        with self.assertRaises(ValueError):
            tprof.TraceAnalysis(traces=[self.analyzer.traces[0], self.analyzer.traces[0]])

    def test_comm_comp_overlap(self):
        df = self.analyzer.get_comm_comp_overlap()
        self.assertEqual(list(df["rank"]), [0, 1])
        self.assertEqual(list(df["comp_comm_overlap_pctg"]), [11.81, 20.05])

    def test_kernel_type_table(self):
        types, kernels = self.analyzer.get_gpu_kernel_breakdown()
        want = [
            ("COMMUNICATION", 305584, 55.5),
            ("COMPUTATION", 185023, 33.6),
            ("COMPUTATION overlapping COMMUNICATION", 56747, 10.3),
            ("MEMORY", 2288, 0.4),
            ("COMMUNICATION overlapping MEMORY", 1011, 0.2),
            ("COMPUTATION overlapping MEMORY", 18, 0.0),
            ("COMPUTATION overlapping COMMUNICATION overlapping MEMORY", 12, 0.0),
        ]
        self.assertEqual(list(types.itertuples(index=False, name=None)), want)
        # Per rank and type at most num_kernels rows and an "others" row.
        for (rank, kernel_type), rows in kernels.groupby(["rank", "kernel_type"]):
            self.assertLessEqual(len(rows), 11, (rank, kernel_type))
        top = self.analyzer.get_gpu_kernel_breakdown(num_kernels=10000, duration_ratio=1.0)[1]
        comp = top[(top["rank"] == 0) & (top["kernel_type"] == "COMPUTATION")]
        self.assertNotIn("others", set(comp["name"]))
        self.assertTrue((comp["min (us)"] <= comp["mean (us)"]).all() and (comp["mean (us)"] <= comp["max (us)"]).all())

    def test_kernel_type_table_without_memory_kernels(self):
        # The reference table with MEMORY's bit taken out of every label:
        # "X overlapping MEMORY" becomes X's time, MEMORY alone no type's.
        want = {"COMMUNICATION": 305584 + 1011, "COMPUTATION": 185023 + 18,
                "COMPUTATION overlapping COMMUNICATION": 56747 + 12}
        types, kernels = self.analyzer.get_gpu_kernel_breakdown(include_memory_kernels=False)
        self.assertEqual(dict(zip(types["kernel_type"], types["sum"])), want)
        total = sum(want.values())
        self.assertEqual(list(types["percentage"]), [round(100 * v / total, 1) for v in sorted(want.values(), reverse=True)])
        self.assertNotIn("MEMORY", set(kernels["kernel_type"]))
        with_memory = self.analyzer.get_gpu_kernel_breakdown()[1]
        pd.testing.assert_frame_equal(kernels, with_memory[with_memory["kernel_type"] != "MEMORY"].reset_index(drop=True))

    def test_idle_delay_and_interval_stats(self):
        base, stats = self.analyzer.get_idle_time_breakdown(ranks=[0, 1], show_idle_interval_stats=True)
        # The statistics' rows are the breakdown's; count × mean is the sum
        # (to the 2 decimals both are rounded to).
        self.assertEqual(list(zip(stats["rank"], stats["stream"], stats.index)),
                         list(zip(base["rank"], base["stream"], base["idle_category"])))
        for (_, row), idle in zip(stats.iterrows(), base["idle_time"]):
            if row["count"] > 0:
                self.assertAlmostEqual(row["count"] * row["mean"], idle, delta=0.005 * row["count"] + 0.01)
                self.assertTrue(row["min"] <= row["25%"] <= row["50%"] <= row["75%"] <= row["max"])
        # The delay moves time between kernel wait and other only.
        def by(df):
            return {(r, s, c): v for r, s, c, v in zip(df["rank"], df["stream"], df["idle_category"], df["idle_time"])}
        b = by(base)
        previous = None
        for delay in (0, 10, 30, 100, 10**9):
            with self.subTest(delay=delay):
                d = by(self.analyzer.get_idle_time_breakdown(ranks=[0, 1], consecutive_kernel_delay=delay)[0])
                for (rank, stream, cat), v in d.items():
                    if cat == "host_wait":
                        self.assertEqual(v, b[(rank, stream, cat)])
                for rank, stream in {(r, s) for r, s, _ in b}:
                    def total(x):
                        return sum(x.get((rank, stream, c), 0) for c in ("kernel_wait", "other"))
                    self.assertAlmostEqual(total(d), total(b), delta=0.02)
                    if previous is not None:  # kernel wait only grows with the delay
                        self.assertGreaterEqual(d.get((rank, stream, "kernel_wait"), 0),
                                                previous.get((rank, stream, "kernel_wait"), 0) - 0.01)
                if delay == 30:
                    self.assertEqual(d, b)
                previous = d

    def test_include_last_profiler_step(self):
        last = tprof.TraceAnalysis(traces=list(self.analyzer.traces.values()), include_last_profiler_step=True)
        self.assertEqual(last.ranks, [0, 1])
        before = self.analyzer.get_temporal_breakdown()
        after = last.get_temporal_breakdown()
        # Keeping a step's kernels only widens the span and adds time.
        self.assertTrue((after["kernel_time(us)"] >= before["kernel_time(us)"]).all())
        self.assertTrue((after["compute_time(us)"] >= before["compute_time(us)"]).all())
        types_before = dict(zip(*self.analyzer.get_gpu_kernel_breakdown()[0][["kernel_type", "sum"]].T.values))
        types_after = dict(zip(*last.get_gpu_kernel_breakdown()[0][["kernel_type", "sum"]].T.values))
        self.assertGreater(sum(types_after.values()), sum(types_before.values()))

    def test_temporal_and_idle_equal_diagnose_json(self):
        temporal = self.analyzer.get_temporal_breakdown()
        idle, _ = self.analyzer.get_idle_time_breakdown(ranks=[0, 1])
        for rank in (0, 1):
            want = cli_json("diagnose", os.path.join(TRACE_FILTER, f"sampled_rank-{rank}.json.gz"))["breakdowns"]
            row = temporal[temporal["rank"] == rank].iloc[0]
            w = want["hta_temporal"][0]
            self.assertEqual(row["kernel_time(us)"] * 1000, w["kernel_time_ns"])
            self.assertEqual(row["idle_time(us)"] * 1000, w["idle_time_ns"])
            self.assertEqual(row["compute_time(us)"] * 1000, w["compute_time_ns"])
            self.assertEqual(row["non_compute_time(us)"] * 1000, w["non_compute_time_ns"])
            mine = idle[idle["rank"] == rank]
            self.assertEqual(list(mine["stream"].unique()), [s["stream"] for s in want["hta_idle"]])
            for s in want["hta_idle"]:
                got = idle_of(mine, s["stream"])
                self.assertEqual(got.get("host_wait", 0) * 1000, s["host_wait_ns"])
                self.assertEqual(got.get("kernel_wait", 0) * 1000, s["kernel_wait_ns"])
                self.assertEqual(got["other"] * 1000, s["other_ns"])

    def test_default_ranks_are_htas(self):
        idle, _ = self.analyzer.get_idle_time_breakdown()
        self.assertEqual(set(idle["rank"]), {0})  # HTA's default: ranks=[0]
        self.assertEqual(set(self.analyzer.get_queue_length_summary().index.get_level_values(0)), {0})
        both = self.analyzer.get_queue_length_summary(ranks=[0, 1])
        self.assertEqual(set(both.index.get_level_values(0)), {0, 1})
        # Every launched activity is counted up and down once.
        for (rank, stream), row in both.iterrows():
            self.assertEqual(row[("queue_length", "count")] % 2, 0)
            self.assertEqual(row[("queue_length", "min")], 0)


class RealTraceTest(unittest.TestCase):
    def test_h100_traces_equal_diagnose_json(self):
        for name in ("64_bf16_warm_eager.json", "4096_bf16_cold_compile.json"):
            path = data("gpu", "h100-torch-2.11", name)
            with self.subTest(name):
                want = cli_json("diagnose", path)["breakdowns"]["hta_temporal"][0]
                row = tprof.read(path).get_temporal_breakdown().iloc[0]
                self.assertEqual(row["kernel_time(us)"] * 1000, want["kernel_time_ns"])
                self.assertEqual(row["idle_time(us)"] * 1000, want["idle_time_ns"])
                self.assertEqual(row["compute_time(us)"] * 1000, want["compute_time_ns"])


if __name__ == "__main__":
    unittest.main()
