"""The Python module over the real traces of tests/data: reading (path,
.gz, bytes, file objects, many at once), the zero-copy columns, events(),
and the reports against `tprof ... --format json` on the same file."""

import gc
import gzip
import io
import json
import os
import subprocess
import tempfile
import threading
import unittest

import numpy as np
import pandas as pd

import tprof
from support import CLI_ENV, TPROF_BIN, cli, cli_json, data, flat_rows, records

# Traces of every era the module is tested on: torch 1.13's legacy array and
# its Kineto conversion, torch 2.11 on an H100, tprof's capture on an H200.
TORCH113_LEGACY = data("torch-1.13", "blog", "bmm8x64_fp32_warm_eager.json")
TORCH113_KINETO = data("torch-1.13", "blog", "bmm8x64_fp32_warm_eager.kineto.json")
H100_EAGER = data("gpu", "h100-torch-2.11", "64_bf16_warm_eager.json")
H100_COMPILE = data("gpu", "h100-torch-2.11", "4096_bf16_cold_compile.json")
H200_TPROF = data("gpu", "h200-tprof", "4096_bf16_warm_fused.json")
MLP_GZ_DIR = data("torch-1.13", "mlp", "tb_gz")
TRACES = [TORCH113_LEGACY, TORCH113_KINETO, H100_EAGER, H100_COMPILE, H200_TPROF]


def gz_trace() -> str:
    return os.path.join(MLP_GZ_DIR, sorted(f for f in os.listdir(MLP_GZ_DIR) if f.endswith(".gz"))[0])


class ReadTest(unittest.TestCase):
    def assert_same_events(self, a: tprof.Trace, b: tprof.Trace) -> None:
        self.assertEqual(len(a), len(b))
        for col in ("ts_ns", "dur_ns", "kind", "phase", "correlation", "external_id", "lane"):
            np.testing.assert_array_equal(getattr(a, col), getattr(b, col), err_msg=col)
        self.assertEqual(a.strings(a.name_id), b.strings(b.name_id))

    def test_bytes_file_object_and_path_read_the_same_trace(self):
        t = tprof.read(H100_EAGER)
        with open(H100_EAGER, "rb") as f:
            raw = f.read()
        self.assert_same_events(t, tprof.read(raw))
        self.assert_same_events(t, tprof.read(bytearray(raw)))
        self.assert_same_events(t, tprof.read(memoryview(raw)))
        with open(H100_EAGER, "rb") as f:
            from_file = tprof.read(f)
        self.assertEqual(from_file.path, H100_EAGER)
        self.assert_same_events(t, from_file)
        self.assert_same_events(t, tprof.read(io.BytesIO(raw)))
        with open(H100_EAGER, "r") as f, self.assertRaises(TypeError):
            tprof.read(f)

    def test_gzip_path_and_gzip_bytes(self):
        path = gz_trace()
        t = tprof.read(path)
        self.assertTrue(t.metadata["gzip"])
        self.assertGreater(len(t), 0)
        with open(path, "rb") as f:
            self.assert_same_events(t, tprof.read(f.read()))
        with gzip.open(path, "rb") as f:
            self.assert_same_events(t, tprof.read(f.read()))  # the inflated text
        # A .gz the test writes: the same events as the plain file.
        with open(H100_EAGER, "rb") as f:
            raw = f.read()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.json.gz")
            with open(p, "wb") as f:
                f.write(gzip.compress(raw))
            self.assert_same_events(tprof.read(H100_EAGER), tprof.read(p))
        self.assert_same_events(tprof.read(H100_EAGER), tprof.read(gzip.compress(raw)))
        self.assertEqual(len(tprof.read(gzip.compress(raw)).table()), len(tprof.read(H100_EAGER).table()))

    def test_read_many_reads_in_parallel_in_order(self):
        many = tprof.read_many(TRACES)
        self.assertEqual([t.path for t in many], TRACES)
        for p, t in zip(TRACES, many):
            self.assert_same_events(tprof.read(p), t)

    def test_concurrent_reads_and_analyses_from_threads(self):
        results = {}

        def work(i):
            t = tprof.read(TRACES[i % len(TRACES)])
            results[i] = (len(t), len(t.table(row_limit=-1)), len(t.kernels()))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for i, r in results.items():
            t = tprof.read(TRACES[i % len(TRACES)])
            self.assertEqual(r, (len(t), len(t.table(row_limit=-1)), len(t.kernels())))


class ErrorTest(unittest.TestCase):
    DAMAGED = (
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}, '
        b'{"ph": "X", "name": "b", "ts": 3, "dur": 2, "pid": 1, "tid": 1 "x"}, '
        b'{"ph": "X", "name": "c", "ts": 5, "dur": 2, "pid": 1, "tid": 1}]}'
    )

    def test_damaged_file_is_a_trace_error_with_file_offset_and_expectation(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "damaged.json")
            with open(p, "wb") as f:
                f.write(self.DAMAGED)
            # Salvaged by default: the damaged event is skipped, with a diagnostic.
            t = tprof.read(p)
            self.assertEqual(len(t), 2)
            self.assertEqual(t.diagnostic_counts(), {"skipped_bytes": 1})
            self.assertEqual(t.diagnostics[0]["byte_offset"], 82)
            # strict: refused, with the offset of the error.
            with self.assertRaises(tprof.TraceError) as cm:
                tprof.read(p, strict=True)
            e = cm.exception
            self.assertIsInstance(e, ValueError)
            self.assertEqual(e.path, p)
            self.assertEqual(e.offset, 145)
            self.assertEqual(e.code, "parse")
            self.assertIn("expected ',' or '}' in an event", e.reason)
            self.assertEqual(str(e), f"{p}: byte 145: expected ',' or '}}' in an event, found '\"'")
            # The CLI says the same.
            with self.assertRaises(AssertionError) as cli_err:
                cli("--strict", "info", p)
            self.assertIn(f"{p}: byte 145: expected ',' or '}}' in an event", str(cli_err.exception))

    # Issue 36, defect 8: args objects the reader let through (its lenient
    # strings, a grammar it only skipped) were stored as written, and t.args()
    # and SQLite's json_extract failed on them. (args, what t.args() gives:
    # repaired, or {} when dropped.)
    MALFORMED_ARGS = [
        (b'{"ctl": "a\x01b"}', {"ctl": "a\x01b"}),
        (b'{"path": "C:\\path"}', {"path": "C:\\path"}),
        (b'{"q": "say "hi" now"}', {"q": 'say "hi" now'}),
        (b'{"u": "a\xffb"}', {"u": "a\ufffdb"}),
        (b'{"s": "\\ud800x"}', {"s": "\ufffdx"}),
        (b'{"x": NaN, "y": [-Infinity, 1]}', {"x": None, "y": [None, 1]}),
        (b'{"n": 01}', {}),
        (b'{"n": 1.}', {}),
        (b'{"a": [1 2]}', {}),
        (b'{"a": [1,]}', {}),
        (b'{"a": {k: 1}}', {}),
        (b'{"a": [true, nul]}', {}),
    ]

    def malformed_args_trace(self, d):
        events = [
            b'{"ph": "X", "cat": "cpu_op", "name": "e%d", "ts": %d, "dur": 5, "pid": 1, "tid": 1, "args": %s}'
            % (i, i * 10, args)
            for i, (args, _) in enumerate(self.MALFORMED_ARGS)
        ]
        events.append(b'{"ph": "X", "cat": "cpu_op", "name": "ok", "ts": 500, "dur": 5, "pid": 1, "tid": 1, '
                      b'"args": {"dup": 1, "dup": 2, "del": "\x7f"}}')
        p = os.path.join(d, "malformed_args.json")
        with open(p, "wb") as f:
            f.write(b'{"traceEvents": [\n' + b",\n".join(events) + b"\n]}")
        return p

    def test_malformed_args_are_stored_as_json_repaired_or_dropped(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.malformed_args_trace(d)
            t = tprof.read(p)
            self.assertEqual(len(t), len(self.MALFORMED_ARGS) + 1)
            for i, (args, expected) in enumerate(self.MALFORMED_ARGS):
                self.assertEqual(t.args(i), expected, args)
            self.assertEqual(t.args(len(self.MALFORMED_ARGS)), {"dup": 2, "del": "\x7f"})
            self.assertEqual(t.diagnostic_counts(), {"malformed_args": len(self.MALFORMED_ARGS)})
            # --strict refuses the first, at its offending byte (the raw \x01).
            with self.assertRaises(tprof.TraceError) as cm:
                tprof.read(p, strict=True)
            with open(p, "rb") as f:
                self.assertEqual(cm.exception.offset, f.read().index(b"\x01"))
            self.assertIn('in "args"', cm.exception.reason)
            # What SQLite stores is JSON too: json_valid, json_extract.
            if not TPROF_BIN:
                self.skipTest("TPROF_BIN is not set (run through ctest)")
            db = os.path.join(d, "t.db")
            r = subprocess.run([TPROF_BIN, "-q", "export", "--sqlite", p, "-o", db], capture_output=True, env=CLI_ENV)
            if r.returncode != 0 and b"without SQLite" in r.stderr:
                self.skipTest("tprof built without SQLite")
            self.assertEqual(r.returncode, 0, r.stderr)
            import sqlite3

            con = sqlite3.connect(db)
            rows = con.execute("SELECT json_valid(json), json FROM args ORDER BY event_id").fetchall()
            self.assertEqual(len(rows), sum(1 for _, e in self.MALFORMED_ARGS if e) + 1)
            for valid, text in rows:
                self.assertEqual(valid, 1, text)
                json.loads(text)
            self.assertEqual(con.execute("SELECT COUNT(json_extract(json, '$')) FROM args").fetchone()[0], len(rows))
            con.close()

    def test_not_a_trace_and_missing_file(self):
        with self.assertRaises(tprof.TraceError) as cm:
            tprof.read(b'{"traceEvents": 5')
        self.assertEqual(cm.exception.offset, 16)
        self.assertEqual(cm.exception.path, "<bytes>")
        self.assertIn('"traceEvents" is not an array', str(cm.exception))
        with self.assertRaises(tprof.TraceError) as cm:
            tprof.read(io.BytesIO(b"hello"))
        self.assertEqual(cm.exception.offset, 0)
        with self.assertRaises(tprof.TraceError) as cm:
            tprof.read("/nonexistent/trace.json")
        self.assertEqual(cm.exception.code, "io")
        self.assertIsNone(cm.exception.offset)
        self.assertIn("/nonexistent/trace.json", str(cm.exception))

    def test_bad_arguments_are_value_errors(self):
        t = tprof.read(H100_EAGER)
        with self.assertRaises(ValueError) as cm:
            t.table(sort_by="no_such_key")
        self.assertNotIsInstance(cm.exception, tprof.TraceError)
        with self.assertRaises(ValueError):
            t.diagnose(only=["no_such_rule"])


class ColumnsTest(unittest.TestCase):
    def test_views_are_zero_copy_read_only_and_keep_the_trace_alive(self):
        t = tprof.read(H100_EAGER)
        ts = t.ts_ns
        self.assertEqual(ts.dtype, np.int64)
        self.assertEqual(len(ts), len(t))
        self.assertFalse(ts.flags.writeable)
        self.assertFalse(ts.flags.owndata)
        self.assertIs(ts.base, t._core)  # the view's owner is the trace itself
        # Two views of a column are the same memory: nothing is copied.
        self.assertEqual(ts.__array_interface__["data"][0], t.column("ts_ns").__array_interface__["data"][0])
        self.assertTrue(np.shares_memory(ts, t.ts_ns))
        with self.assertRaises(ValueError):
            ts[0] = 0
        expected = ts.copy()
        kinds = t.kind
        del t
        gc.collect()
        np.testing.assert_array_equal(ts, expected)  # still valid: the view holds the trace
        self.assertEqual(len(kinds), len(expected))

    def test_every_column_has_the_model_type(self):
        t = tprof.read(H100_COMPILE)
        types = {"ts_ns": np.int64, "dur_ns": np.int64, "name_id": np.uint32, "cat_id": np.uint32,
                 "lane": np.uint32, "phase": np.uint8, "kind": np.uint8, "flags": np.uint8,
                 "external_id": np.int64, "correlation": np.int64, "flow_id": np.int64,
                 "args_ref": np.uint64, "src_offset": np.uint64}
        for name, dtype in types.items():
            col = getattr(t, name)
            self.assertEqual(col.dtype, dtype, name)
            self.assertEqual(len(col), len(t), name)
        with self.assertRaises(AttributeError):
            t.no_such_column

    def test_events_frame(self):
        t = tprof.read(H100_COMPILE)
        df = t.events()
        self.assertEqual(df.shape, (len(t), 13))
        self.assertEqual(list(df.columns), ["name", "cat", "ph", "kind", "ts_ns", "dur_ns", "pid", "tid", "device",
                                            "stream", "correlation", "external_id", "flow_id"])
        self.assertIsInstance(df.index, pd.RangeIndex)  # file order: the index is the event index
        derived = t.events(derived=True)
        self.assertEqual(list(derived.columns), list(df.columns) + ["parent", "depth", "step"])
        pd.testing.assert_frame_equal(derived[df.columns], df)
        for c in df.columns[4:]:
            self.assertEqual(df[c].dtype, np.int64, c)
        # The frame owns its memory: it does not hold the trace.
        self.assertFalse(np.shares_memory(df["ts_ns"].to_numpy(), t.ts_ns))
        np.testing.assert_array_equal(df["correlation"].to_numpy(), t.correlation)
        lanes = t.lanes()
        np.testing.assert_array_equal(df["stream"].to_numpy(), lanes["stream"].to_numpy()[t.lane])
        for c in ("name", "cat", "ph", "kind"):
            self.assertIsInstance(df[c].dtype, pd.CategoricalDtype, c)
        self.assertEqual(list(df["name"].astype(object)), t.strings(t.name_id))
        self.assertEqual(list(df["cat"].astype(object)), t.strings(t.cat_id))
        np.testing.assert_array_equal(df["ts_ns"].to_numpy(), t.ts_ns)
        np.testing.assert_array_equal(df["dur_ns"].to_numpy(), t.dur_ns)
        self.assertEqual(list(df["ph"].astype(str)), [chr(p) for p in t.phase])
        # Counts by kind, as `tprof info` counts them.
        info = cli_json("info", H100_COMPILE)
        by_kind = df["kind"].value_counts()
        for kind, n in info["events_by_kind"].items():
            self.assertEqual(by_kind.get(kind, 0), n, kind)
        # Kernels: the rows `tprof kernels` aggregates.
        kernels = df[df["kind"] == "kernel"]
        ours = kernels.groupby("name", observed=True)["dur_ns"].sum()
        k = cli_json("kernels", H100_COMPILE)
        for row in k["kernels"]:
            if row["category"] == "kernel":
                self.assertEqual(ours[row["name"]], row["total_ns"], row["name"])
        # GPU lanes: device and stream come from the lane.
        device = df[df["kind"].isin(["kernel", "gpu_memcpy", "gpu_memset"])]
        self.assertGreater(len(device), 0)
        self.assertTrue((device["stream"] >= 0).all() and (device["device"] >= 0).all())
        self.assertTrue((df.loc[df["kind"] == "cpu_op", "stream"] == -1).all())
        self.assertEqual(set(lanes.columns), {"pid", "tid", "kind", "device", "stream", "thread_name"})

    def test_events_sorted_by_time(self):
        t = tprof.read(H100_COMPILE)
        plain = t.events(derived=True)
        by_time = t.events(sort=True, derived=True)
        self.assertFalse(plain["ts_ns"].is_monotonic_increasing)  # Kineto writes device rows after host rows
        self.assertEqual(list(by_time.columns), list(plain.columns))
        # Stable: equal times keep file order, and the index is the event index.
        want = sorted(range(len(t)), key=lambda e: (int(t.ts_ns[e]), e))
        self.assertEqual(list(by_time.index), want)
        pd.testing.assert_frame_equal(by_time.astype({"name": object, "cat": object}),
                                      plain.loc[want].astype({"name": object, "cat": object}))
        # parent is an event index: the same rows whichever the order.
        kids = by_time[by_time["parent"] >= 0]
        self.assertTrue((by_time.loc[kids["parent"], "ts_ns"].to_numpy() <= kids["ts_ns"].to_numpy()).all())
        self.assertTrue((by_time.loc[kids["parent"], "depth"].to_numpy() + 1 == kids["depth"].to_numpy()).all())
        self.assertEqual(list(t.events(sort=False).index), list(range(len(t))))
        self.assertEqual(list(t.events(sort=True).columns), list(t.events().columns))

    def test_parent_depth_step_equal_the_sql_export(self):
        # The same computation as `tprof export --sqlite`: events.parent_id,
        # its depth (a recursive query), kernels.step for device activity,
        # steps.step for the ProfilerStep events, memory_timeline.step for
        # [memory] records; every other event's step is the step its ts
        # falls in.
        if not TPROF_BIN:
            self.skipTest("TPROF_BIN is not set (run through ctest)")
        for path in (data("gpu", "h100-tprof", "64_bf16_warm_eager.json"),
                     data("public", "tracelens", "h100", "gaunernst_bert-small-uncased__1016001.json.gz")):
            with self.subTest(os.path.basename(path)), tempfile.TemporaryDirectory() as d:
                db = os.path.join(d, "t.db")
                r = subprocess.run([TPROF_BIN, "-q", "export", "--sqlite", path, "-o", db], capture_output=True,
                                   env=CLI_ENV, check=False)
                if b"built without SQLite" in r.stderr:
                    self.skipTest("this tprof was built without SQLite")
                self.assertEqual(r.returncode, 0, r.stderr)
                import sqlite3
                with sqlite3.connect(db) as con:
                    sql = pd.read_sql("""
                        WITH RECURSIVE depth(id, depth) AS (
                          SELECT id, 0 FROM events WHERE parent_id IS NULL
                          UNION ALL SELECT e.id, depth.depth + 1 FROM events e JOIN depth ON e.parent_id = depth.id)
                        SELECT e.id, coalesce(e.parent_id, -1) AS parent, depth.depth, e.ts_ns
                        FROM events e JOIN depth ON depth.id = e.id ORDER BY e.id""", con)
                    kernels = pd.read_sql("SELECT event_id, coalesce(step, -1) AS step FROM kernels", con)
                    steps = pd.read_sql("SELECT event_id, step FROM steps", con)
                    memory = pd.read_sql("SELECT event_id, coalesce(step, -1) AS step FROM memory_timeline", con)
                    spans = pd.read_sql("SELECT step, ts_ns, ts_ns + dur_ns AS end_ns FROM steps", con)
                df = tprof.read(path).events(derived=True)
                self.assertEqual(len(sql), len(df))
                np.testing.assert_array_equal(df["parent"].to_numpy(), sql["parent"].to_numpy())
                np.testing.assert_array_equal(df["depth"].to_numpy(), sql["depth"].to_numpy())
                self.assertGreater(df["depth"].max(), 2)
                self.assertGreater(len(kernels), 0)
                self.assertGreater(len(memory), 0)
                for table in (kernels, steps, memory):
                    np.testing.assert_array_equal(df.loc[table["event_id"], "step"].to_numpy(),
                                                  table["step"].to_numpy())
                others = df.drop(index=pd.concat([kernels, memory])["event_id"])
                others = others[others["ph"] != "M"]
                want = np.full(len(others), -1)
                for step, start, end in spans.itertuples(index=False):
                    want[(others["ts_ns"] >= start).to_numpy() & (others["ts_ns"] < end).to_numpy()] = step
                np.testing.assert_array_equal(others["step"].to_numpy(), want)
                self.assertTrue((df.loc[df["ph"] == "M", "step"] == -1).all())

    def test_events_args_columns(self):
        t = tprof.read(data("public", "hta", "trace_filter", "sampled_rank-0.json.gz"))
        keys = ["Input Dims", "grid", "correlation", "memory bandwidth (GB/s)", "no such key"]
        df = t.events(args=keys + ["grid"])  # a key asked twice is one column
        self.assertEqual(list(df.columns[13:]),
                         ["Input Dims", "grid", "args.correlation", "memory bandwidth (GB/s)", "no such key"])
        for key, column in zip(keys, df.columns[13:]):
            with self.subTest(key=key):
                self.assertEqual(df[column].dtype, object)
                want = [t.args(e).get(key) for e in range(len(t))]  # json's decoding of each event's args
                self.assertEqual(df[column].tolist(), want)
        self.assertGreater(df["Input Dims"].notna().sum(), 1000)
        self.assertEqual(df["grid"].dropna().map(type).unique().tolist(), [list])
        self.assertEqual(df["memory bandwidth (GB/s)"].dropna().map(type).unique().tolist(), [float])
        self.assertTrue(df["no such key"].isna().all())
        by_time = t.events(sort=True, args=["grid"])
        self.assertEqual(by_time["grid"].tolist(), df.loc[by_time.index, "grid"].tolist())
        # Every JSON type, ints past int64, a key the file writes with an
        # escape, and a key holding a quote (read by parsing the whole
        # object rather than in one pass).
        odd = tprof.read(rb"""{"traceEvents": [
  {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": [1, 2.5, "s", null, true, {"k": [false]}], "n": 123456789012345678901234567890}},
  {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"q\"k": 1, "x": -0.0, "caf\u00e9": "\u20ac", "n": -7}},
  {"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 3, "dur": 1}
]}""")
        o = odd.events(args=["x", "n", 'q"k', "caf\u00e9"])
        self.assertEqual(o["x"].tolist(), [[1, 2.5, "s", None, True, {"k": [False]}], -0.0, None])
        self.assertEqual(o["n"].tolist(), [123456789012345678901234567890, -7, None])
        self.assertEqual(o['q"k'].tolist(), [None, 1, None])
        self.assertEqual(o["caf\u00e9"].tolist(), [None, "\u20ac", None])
        self.assertEqual([odd.args(e).get('q"k') for e in range(3)], [None, 1, None])
        with self.assertRaises(TypeError):
            odd.events(args="x")

    def test_legacy_array_and_args(self):
        t = tprof.read(TORCH113_LEGACY)
        self.assertEqual(t.metadata["format"], "legacy_array")
        df = t.events()
        self.assertTrue((df["cat"] == "cpu_op").all())  # torch's legacy array: every event is an op
        k = tprof.read(H100_EAGER)
        corr = int(np.nonzero(k.correlation >= 0)[0][0])
        self.assertEqual(k.args(corr)["correlation"], int(k.correlation[corr]))
        self.assertIn("deviceProperties", k.metadata["top_level"])


def table_cases():
    """tests/data/torch-1.13/tables.json: every table torch 1.13 printed,
    with its arguments and the traces that reproduce it."""
    root = data("torch-1.13")
    with open(os.path.join(root, "tables.json")) as f:
        manifest = json.load(f)
    for case in manifest["tables"]:
        for fmt, trace in case["traces"].items():
            yield case["expected"] + " from " + fmt, os.path.join(root, case["expected"]), os.path.join(root, trace), case["args"]


class TableTest(unittest.TestCase):
    def test_every_torch_table_byte_for_byte(self):
        n = 0
        for name, expected, trace, a in table_cases():
            with self.subTest(name):
                t = tprof.read(trace)
                text = t.table(
                    sort_by=a["sort_by"], row_limit=a["row_limit"], max_name_column_width=a["max_name_column_width"],
                    header=a["header"], top_level_events_only=a["top_level_events_only"],
                    group_by_input_shape=a["group_by_input_shape"], group_by_stack_n=a["group_by_stack_n"],
                    memory="on" if a["profile_memory"] else "off", events=not a["aggregate"], text=True)
                with open(expected, encoding="utf-8") as f:
                    self.assertEqual(text, f.read())
                n += 1
        self.assertGreaterEqual(n, 59)

    def test_frames_equal_the_cli_json(self):
        options = [
            ({}, []),
            ({"sort_by": "cuda_time_total", "row_limit": 5}, ["--sort-by", "cuda_time_total", "--row-limit", "5"]),
            ({"sort_by": "self_cpu_time_total", "row_limit": -1, "top_level_events_only": True},
             ["--sort-by", "self_cpu_time_total", "--row-limit", "-1", "--top-level-only"]),
            ({"group_by_input_shape": True, "row_limit": -1}, ["--group-by-input-shape", "--row-limit", "-1"]),
            ({"events": True, "row_limit": 30}, ["--events", "--row-limit", "30"]),
        ]
        for path in TRACES:
            t = tprof.read(path)
            for kwargs, args in options:
                with self.subTest(path=os.path.basename(path), args=args):
                    want = cli_json("table", path, *args)
                    df = t.table(**kwargs)
                    self.assertEqual(df.shape[0], len(want["rows"]))
                    keys = list(dict.fromkeys(k for r in want["rows"] for k in r))
                    self.assertEqual(list(df.columns), keys)
                    self.assertEqual(records(df), want["rows"])
                    self.assertEqual(df.attrs["device"], want["device"])
                    self.assertEqual(t.table(text=True, **kwargs), cli("table", path, *args))


class ReportsTest(unittest.TestCase):
    def test_steps_equal_the_cli_json(self):
        for path in TRACES:
            with self.subTest(os.path.basename(path)):
                want = cli_json("steps", path)
                df = tprof.read(path).steps()
                self.assertEqual(len(df), len(want["steps"]))
                self.assertEqual(records(df), flat_rows(want["steps"]))
                self.assertEqual(df.attrs["has_device"], want["has_device"])
                if len(df):
                    self.assertEqual(df["start_ns"].dtype, np.int64)  # ns timestamps stay exact
                self.assertEqual(tprof.read(path).steps(text=True), cli("steps", path))

    def test_step_range_equals_the_cli(self):
        # A range named (the CLI's --step-range), and one found (tprof
        # record's NVTX "step" ranges): the same steps as the CLI's.
        named = data("gpu", "h100-torch-2.11", "64_bf16_warm_eager.json")
        want = cli_json("steps", "--step-range", "matmul_add", named)
        for t in (tprof.read(named, step_range="matmul_add"),
                  tprof.read_many([named], step_range="matmul_add")[0]):
            df = t.steps()
            self.assertGreater(len(df), 2)
            self.assertEqual(records(df), flat_rows(want["steps"]))
        # Not its ProfilerSteps: the ranges lie inside them.
        self.assertNotEqual(records(tprof.read(named).steps()), records(df))
        found = data("gpu", "h200-tprof", "record_plain_64.json")
        self.assertEqual(len(tprof.read(found).steps()), 20)
        # A name the trace lacks: ValueError with the ranges it has, as the CLI's exit 2.
        with self.assertRaises(ValueError) as e:
            tprof.read(found, step_range="no such range")
        self.assertIn('step_range "no such range": no host event of that name; repeated ranges here: "step"',
                      str(e.exception))
        with self.assertRaises(ValueError):
            tprof.read(found, step_range="")

    def test_kernels_equal_the_cli_json(self):
        for path in TRACES:
            with self.subTest(os.path.basename(path)):
                want = cli_json("kernels", path)
                df = tprof.read(path).kernels()
                self.assertEqual(len(df), len(want["kernels"]))
                self.assertEqual(records(df), flat_rows(want["kernels"]))
                self.assertEqual(df.attrs["total_ns"], want["total_ns"])
                self.assertEqual(tprof.read(path).kernels(text=True), cli("kernels", path))

    def test_memory_is_the_cli_csv_and_json(self):
        # A trace with totals, addresses and stacks; one with neither totals nor addresses.
        bert = data("public", "tracelens", "h100", "gaunernst_bert-small-uncased__1016001.json.gz")
        resnet = data("public", "kineto", "tb_plugin", "samples", "resnet50_num_workers_4",
                      "worker0.1623213129365.excerpt.pt.trace.json.gz")
        for path in (bert, resnet):
            with self.subTest(os.path.basename(path)):
                t = tprof.read(path)
                df = t.memory()
                self.assertEqual(list(df.columns),
                                 ["device", "ts_ns", "bytes", "addr", "allocated", "reserved", "step", "op", "stack"])
                report = cli_json("memory", path)
                self.assertEqual(df.attrs["report"], report)
                self.assertEqual(len(df), sum(d["records"] for d in report["devices"]))
                for d in report["devices"]:
                    rows = df[df["device"] == d["device"]]
                    self.assertEqual(int(rows["allocated"].max()), d["peak_bytes"])
                    self.assertEqual(int(rows["bytes"].sum()), d["allocated_bytes"] - d["freed_bytes"])
                self.assertEqual(t.memory(text=True), cli("memory", path))
        dev = tprof.read(bert).memory(device=0)
        self.assertEqual(set(dev["device"]), {"CUDA 0"})
        self.assertTrue(dev["stack"].str.contains("modeling_bert.py").any())
        self.assertTrue(tprof.read(resnet).memory()["addr"].isna().all())
        with self.assertRaises(ValueError):
            tprof.read(bert).memory(device=-7)

    def test_diagnose_equals_the_cli_json(self):
        for path in (H100_EAGER, H100_COMPILE, H200_TPROF, TORCH113_KINETO):
            with self.subTest(os.path.basename(path)):
                want = cli_json("diagnose", path)
                d = tprof.read(path).diagnose()
                self.assertEqual(d.raw, want)
                self.assertEqual(d.verdict, want["verdict"])
                self.assertEqual([f.id for f in d.findings], [f["id"] for f in want["findings"]])
                for f, w in zip(d.findings, want["findings"]):
                    self.assertEqual((f.severity, f.title, f.evidence, f.advice),
                                     (w["severity"], w["title"], w["evidence"], w["advice"]))
                self.assertEqual(len(d.steps), len(want["steps"]))
                if d.findings:
                    self.assertIs(d.finding(d.findings[0].id), d.findings[0])
        only = tprof.read(H100_EAGER).diagnose(only=["kernel_launch_stats"])
        self.assertTrue(all(f.id == "kernel_launch_stats" for f in only.findings))
        self.assertIn("kernel_launch_stats", tprof.rule_ids())

    def test_compare_equals_the_cli_json(self):
        a, b = tprof.read(H100_EAGER), tprof.read(data("gpu", "h100-torch-2.11", "64_bf16_warm_compile.json"))
        want = cli_json("compare", a.path, b.path)
        c = tprof.compare(a, b, label_a=a.path, label_b=b.path)
        self.assertEqual(c.raw, want)
        self.assertEqual(records(c.steps), want["steps"])
        self.assertEqual(len(c.ops), len(want["ops"]))
        self.assertEqual(len(c.kernels), len(want["kernels"]))
        self.assertEqual(tprof.compare(a, b, text=True, label_a=a.path, label_b=b.path), cli("compare", a.path, b.path))
        same = tprof.compare(a, a)
        self.assertFalse(same.verdict_changed)


if __name__ == "__main__":
    unittest.main()
