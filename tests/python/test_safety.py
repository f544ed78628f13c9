"""Issue 36's defects in the Python module: buffers of any layout (a strided
view is refused, not read out of bounds), the trace holding no view of the
caller's buffer, paths with a NUL byte refused as os.open refuses them,
file names that are not UTF-8, and every str the module returns valid
whatever bytes the trace's names hold (the CLI's rule: one U+FFFD per
invalid byte). Under ASan in make test (python/CMakeLists.txt)."""

import array
import gc
import gzip
import io
import os
import pathlib
import tempfile
import threading
import unittest

import numpy as np

import tprof
from support import cli, cli_json, data

H100_EAGER = data("gpu", "h100-torch-2.11", "64_bf16_warm_eager.json")


def raw_trace() -> bytes:
    with open(H100_EAGER, "rb") as f:
        return f.read()


def padded(raw: bytes, multiple: int) -> bytes:
    """raw with trailing whitespace up to a multiple of `multiple` bytes."""
    return raw + b" " * (-len(raw) % multiple)


def assert_valid_str(test: unittest.TestCase, value, where: str) -> None:
    """Every str inside value (dicts, lists, tuples, DataFrames) is text
    UTF-8 can encode (no lone surrogate)."""
    import pandas as pd

    if isinstance(value, str):
        value.encode("utf-8")  # raises on a lone surrogate
    elif isinstance(value, dict):
        for k, v in value.items():
            assert_valid_str(test, k, where)
            assert_valid_str(test, v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            assert_valid_str(test, v, where)
    elif isinstance(value, pd.DataFrame):
        for c in value.columns:
            assert_valid_str(test, c, where)
            col = value[c]
            if isinstance(col.dtype, pd.CategoricalDtype):
                assert_valid_str(test, list(col.cat.categories), where)
            elif col.dtype == object:
                assert_valid_str(test, list(col), where)


class BufferTest(unittest.TestCase):
    def assert_same_events(self, a: tprof.Trace, b: tprof.Trace) -> None:
        self.assertEqual(len(a), len(b))
        for col in ("ts_ns", "dur_ns", "kind", "lane"):
            np.testing.assert_array_equal(getattr(a, col), getattr(b, col), err_msg=col)
        self.assertEqual(a.strings(a.name_id), b.strings(b.name_id))

    def test_a_strided_or_reversed_view_is_refused_not_read_out_of_bounds(self):
        # The review's repro: ptr is the last byte, and 64 MiB were read from
        # there (a segfault; under ASan a heap-buffer-overflow).
        with self.assertRaises(ValueError) as cm:
            tprof.read(memoryview(b" " * (64 << 20))[::-1])
        self.assertIn("not C-contiguous", str(cm.exception))
        self.assertNotIsInstance(cm.exception, tprof.TraceError)
        # view[::2] over a trace interleaved with junk: its items are the
        # trace, but its memory is not; it was read as the wrong bytes.
        raw = raw_trace()
        interleaved = bytearray(2 * len(raw))
        interleaved[::2] = raw
        interleaved[1::2] = b"#" * len(raw)
        view = memoryview(bytes(interleaved))[::2]
        with self.assertRaises(ValueError):
            tprof.read(view)
        self.assert_same_events(tprof.read(raw), tprof.read(bytes(view)))  # what the message says to do
        # NumPy: a strided slice, a Fortran-order 2-D array, a negative stride.
        arr = np.frombuffer(padded(raw, 8), dtype=np.uint8)
        for bad in (arr[::2], arr.reshape(-1, 8).T, arr.reshape(8, -1, order="F"), arr[::-1]):
            with self.subTest(strides=bad.strides), self.assertRaises(ValueError):
                tprof.read(bad)
        # A view of a view: contiguous again after the slicing.
        self.assert_same_events(tprof.read(raw), tprof.read(memoryview(interleaved)[::2].tobytes()))

    def test_any_contiguous_buffer_is_read_as_its_memory(self):
        raw = raw_trace()
        want = tprof.read(raw)
        raw4 = padded(raw, 4)
        cases = {
            "array('I')": array.array("I", raw4),
            "array('B')": array.array("B", raw),
            "memoryview cast to 'I'": memoryview(raw4).cast("I"),
            "2-D memoryview": memoryview(raw4).cast("B", shape=[4, len(raw4) // 4]),
            "read-only memoryview of a bytearray": memoryview(bytearray(raw)).toreadonly(),
            "contiguous slice": memoryview(b"xx" + raw + b"yy")[2:-2],
            "2-D numpy uint8": np.frombuffer(raw4, dtype=np.uint8).reshape(4, -1),
            "numpy uint32": np.frombuffer(raw4, dtype=np.uint32).copy(),
            "read-only numpy": np.frombuffer(raw, dtype=np.uint8),
        }
        for what, buf in cases.items():
            with self.subTest(what):
                t = tprof.read(buf)
                self.assert_same_events(want, t)
                self.assertEqual(t.path, "<bytes>")
        # gzip in a buffer of 8-byte items.
        self.assert_same_events(want, tprof.read(np.frombuffer(padded(gzip.compress(raw), 8), dtype=np.int64)))
        # A 0-d array and an empty buffer: bytes too (not a trace).
        for empty in (np.zeros((), dtype=np.uint8), array.array("I"), memoryview(b"")):
            with self.assertRaises(tprof.TraceError):
                tprof.read(empty)

    def test_a_released_memoryview_and_a_non_buffer_are_refused(self):
        m = memoryview(raw_trace())
        m.release()
        with self.assertRaises(ValueError):
            tprof.read(m)
        with self.assertRaises(TypeError):
            tprof.read(12345)
        with self.assertRaises(TypeError):
            tprof.read(object())

    def test_the_trace_keeps_no_view_of_the_callers_buffer(self):
        raw = raw_trace()
        want = tprof.read(raw)
        event = int(np.nonzero(want.correlation >= 0)[0][0])
        args = want.args(event)
        for what, payload in (("plain", raw), ("gzip", gzip.compress(raw))):
            with self.subTest(what):
                ba = bytearray(payload)
                t = tprof.read(ba)
                m = memoryview(ba)
                t2 = tprof.read(m)
                m.release()
                # The bytearray may be overwritten and resized at once: the
                # read holds no export of it once it returned.
                ba[:] = b"\xff" * len(ba)
                ba.extend(b"x" * (8 << 20))
                del ba[:]
                gc.collect()
                for tr in (t, t2):
                    self.assertEqual(tr.args(event), args)
                    self.assert_same_events(want, tr)
                    self.assertEqual(tr.events()["name"].tolist(), want.events()["name"].tolist())
                arr = np.frombuffer(payload, dtype=np.uint8).copy()
                t3 = tprof.read(arr)
                arr[:] = 0
                del arr
                gc.collect()
                self.assertEqual(t3.args(event), args)

    def test_a_bytearray_changed_by_another_thread_during_reads_is_read_whole(self):
        # Two traces that differ in one name, of the same length, written
        # over one bytearray while other threads read it: each read sees one
        # of the two whole (the buffer is copied with the GIL held), and
        # resizing it never corrupts a read (BufferError at most).
        raw = raw_trace()
        other = raw.replace(b'"aten::mm"', b'"aten::MM"')
        self.assertNotEqual(raw, other)
        for what, (a, b) in (("plain", (raw, other)), ("gzip", (gzip.compress(raw), gzip.compress(other)))):
            with self.subTest(what):
                ba = bytearray(a)
                stop = threading.Event()
                seen = []
                errors = []

                def reader():
                    try:
                        while not stop.is_set():
                            seen.append(frozenset(tprof.read(ba, threads=1).events()["name"].cat.categories))
                    except Exception as e:  # noqa: BLE001 (reported below)
                        errors.append(e)

                threads = [threading.Thread(target=reader) for _ in range(2)]
                for th in threads:
                    th.start()
                for i in range(200):
                    try:
                        ba[:] = b if i % 2 == 0 else a
                        if i % 10 == 0:
                            ba.extend(b" ")
                            del ba[-1:]
                    except BufferError:
                        pass
                stop.set()
                for th in threads:
                    th.join()
                self.assertEqual(errors, [])
                names_a = frozenset(tprof.read(a).events()["name"].cat.categories)
                names_b = frozenset(tprof.read(b).events()["name"].cat.categories)
                self.assertGreater(len(seen), 0)
                for s in seen:
                    self.assertIn(s, (names_a, names_b))


class PathTest(unittest.TestCase):
    class Fs:
        def __init__(self, p):
            self.p = p

        def __fspath__(self):
            return self.p

    def test_a_nul_in_a_path_is_a_value_error_not_another_file(self):
        # "<trace>\0junk" was read as <trace>: the bytes before the NUL.
        for bad in (H100_EAGER + "\0junk", pathlib.PurePosixPath(H100_EAGER + "\0junk"), self.Fs(H100_EAGER + "\0x"),
                    self.Fs(os.fsencode(H100_EAGER) + b"\0x")):
            with self.subTest(repr(bad)):
                with self.assertRaises(ValueError) as cm:
                    tprof.read(bad)
                self.assertIn("null byte", str(cm.exception))
                self.assertNotIsInstance(cm.exception, tprof.TraceError)
                with self.assertRaises(ValueError):
                    tprof.read_many([H100_EAGER, bad])
                with self.assertRaises(ValueError):
                    tprof.TraceAnalysis(trace_files=[bad])
                with self.assertRaises(ValueError):
                    tprof.TraceAnalysis(trace_files={0: bad})
        with self.assertRaises(ValueError):
            tprof.read_many([os.fsencode(H100_EAGER) + b"\0"])
        with self.assertRaises(ValueError):
            tprof.TraceAnalysis(trace_dir=os.path.dirname(H100_EAGER) + "\0x")
        # The C++ half refuses too, called directly.
        with self.assertRaises(ValueError):
            tprof._tprof.read(H100_EAGER + "\0junk")
        with self.assertRaises(ValueError):
            tprof._tprof.read_many([H100_EAGER + "\0junk"])
        # A path with no NUL reads, as str, bytes (read_many) and PathLike.
        self.assertEqual(len(tprof.read(pathlib.Path(H100_EAGER))), len(tprof.read(H100_EAGER)))
        self.assertEqual([t.path for t in tprof.read_many([os.fsencode(H100_EAGER), self.Fs(H100_EAGER)])],
                         [H100_EAGER, H100_EAGER])
        with self.assertRaises(TypeError):
            tprof.read_many(H100_EAGER)  # one path, not a list of its characters

    def test_file_names_that_are_not_utf8_round_trip(self):
        raw = raw_trace()
        with tempfile.TemporaryDirectory() as d:
            name = os.path.join(os.fsencode(d), b"r\xff\xfe.json")
            with open(name, "wb") as f:
                f.write(raw)
            as_str = os.fsdecode(name)  # surrogate escapes, as os.listdir gives it
            for source in (as_str, pathlib.Path(as_str)):
                t = tprof.read(source)
                self.assertEqual(t.path, as_str)
                self.assertEqual(os.fsencode(t.path), name)
            (t,) = tprof.read_many([name])
            self.assertEqual(t.path, as_str)
            with open(name, "rb") as f:
                self.assertEqual(tprof.read(f).path, as_str)  # f.name is bytes
            with open(name, "rb") as f, os.fdopen(os.dup(f.fileno()), "rb") as by_fd:
                self.assertEqual(tprof.read(by_fd).path, str(by_fd.name))  # a descriptor number
            labelled = io.BytesIO(raw)
            labelled.name = "in\0memory"  # a file object's name is only a label: kept
            self.assertEqual(tprof.read(labelled).path, "in\0memory")
            ta = tprof.TraceAnalysis(trace_dir=os.fsdecode(d))
            self.assertEqual([tr.path for tr in ta.traces.values()], [as_str])
            missing = name + b".missing"
            with self.assertRaises(tprof.TraceError) as cm:
                tprof.read(os.fsdecode(missing))
            self.assertEqual(cm.exception.path, os.fsdecode(missing))
            str(cm.exception).encode("utf-8")  # the message prints: U+FFFD, not surrogates
            self.assertIn("r\ufffd\ufffd.json.missing", str(cm.exception))


def hostile_names_trace() -> bytes:
    """A trace whose names hold bytes that are not UTF-8 (a lone byte, a cut
    sequence, two names equal once those become U+FFFD), control
    characters (ESC, C1; DEL is issue 36's defect 6 in the CLI's JSON), in op, kernel, category, thread, step,
    args and top-level names."""
    events = [
        b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}',
        b'{"ph": "X", "cat": "cpu_op", "name": "op\xff", "pid": 1, "tid": 1, "ts": 1, "dur": 10,'
        b' "args": {"External id": 1, "k\xfe": "v\xe2\x82", "esc": "\x1b[31m"}}',
        b'{"ph": "X", "cat": "cpu_op", "name": "op\xfe", "pid": 1, "tid": 1, "ts": 12, "dur": 10}',
        b'{"ph": "X", "cat": "cpu_op", "name": "cut\xe2\x82end", "pid": 1, "tid": 1, "ts": 23, "dur": 10}',
        b'{"ph": "X", "cat": "cpu_op", "name": "esc\x1b[2J\xc2\x9b", "pid": 1, "tid": 1, "ts": 34, "dur": 10}',
        b'{"ph": "X", "cat": "cat\xc0\xaf", "name": "surrogate\xed\xa0\x80", "pid": 1, "tid": 1, "ts": 45, "dur": 10}',
        b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 5,'
        b' "args": {"correlation": 7}}',
        b'{"ph": "X", "cat": "kernel", "name": "kern\xff\x1b", "pid": 0, "tid": 7, "ts": 60, "dur": 20,'
        b' "args": {"device": 0, "stream": 7, "correlation": 7}}',
        b'{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thr\xff\xfe"}}',
    ]
    return (b'{"schemaVersion": 1, "odd\xff": "v\xfe", "traceEvents": [' + b",\n".join(events) + b"]}")


class Utf8Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "hostile_names.json")
        with open(cls.path, "wb") as f:
            f.write(hostile_names_trace())
        cls.t = tprof.read(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_text_reports_are_str_and_the_clis_output(self):
        t = self.t
        # These raised UnicodeDecodeError.
        self.assertEqual(t.table(text=True), cli("table", self.path))
        self.assertEqual(t.table(text=True, events=True), cli("table", "--events", self.path))
        self.assertEqual(t.diagnose(text=True), cli("diagnose", self.path))
        self.assertEqual(t.diagnose(text=True, verbose=True), cli("diagnose", "--verbose", self.path))
        self.assertEqual(t.kernels(text=True), cli("kernels", self.path))
        self.assertEqual(t.steps(text=True), cli("steps", self.path))
        self.assertEqual(tprof.compare(t, t, text=True, label_a=self.path, label_b=self.path),
                         cli("compare", self.path, self.path))
        text = t.table(text=True, row_limit=-1)
        self.assertIn("op\ufffd", text)
        self.assertIn("cut\ufffd\ufffdend", text)  # one U+FFFD per byte, as the CLI
        self.assertIn("esc\\x1b[2J\\u009b", text)  # control characters shown, never sent raw
        self.assertNotIn("\x1b", text)

    def test_names_read_as_the_clis_json_has_them(self):
        t = self.t
        df = t.events()
        names = df["name"].cat.categories.tolist()
        self.assertEqual(len(names), len(set(names)))  # "op\xff" and "op\xfe": one category, "op\ufffd"
        self.assertEqual(df["name"].tolist(), t.strings(t.name_id))
        self.assertEqual(df["name"].tolist()[1:3], ["op\ufffd", "op\ufffd"])
        self.assertIn("cut\ufffd\ufffdend", names)  # Python's "replace" would give one
        self.assertIn("surrogate\ufffd\ufffd\ufffd", names)
        self.assertIn("esc\x1b[2J\u009b", names)  # data, not text for a terminal: kept as is
        self.assertIn("cat\ufffd\ufffd", df["cat"].cat.categories.tolist())
        # The same strings as `tprof table --format json` and kernels' JSON.
        rows = cli_json("table", "--events", "--row-limit", "-1", self.path)["rows"]
        ops = sorted(n for n in df["name"] if n != "thread_name" and not n.startswith("ProfilerStep"))
        self.assertEqual(sorted(r["name"] for r in rows if not r["name"].startswith("ProfilerStep")), ops)
        k = t.kernels()
        self.assertEqual(k["name"].tolist(), [r["name"] for r in cli_json("kernels", self.path)["kernels"]])
        self.assertEqual(k["name"].tolist(), ["kern\ufffd\x1b"])
        self.assertEqual(t.table()["name"].tolist(), [r["name"] for r in cli_json("table", self.path)["rows"]])
        self.assertEqual(t.lanes()["thread_name"].tolist()[0], "thr\ufffd\ufffd")
        args = t.args(1)
        self.assertEqual(args["k\ufffd"], "v\ufffd\ufffd")
        self.assertEqual(args["esc"], "\x1b[31m")
        self.assertEqual(t.metadata["top_level"]["odd\ufffd"], "v\ufffd")

    def test_every_str_returned_is_valid(self):
        t = self.t
        for what, value in (
            ("events", t.events()), ("lanes", t.lanes()), ("metadata", t.metadata), ("diagnostics", t.diagnostics),
            ("strings", t.strings(np.arange(len(t)))), ("args", [t.args(i) for i in range(len(t))]),
            ("table", t.table()), ("table events", t.table(events=True)), ("steps", t.steps()),
            ("kernels", t.kernels()), ("diagnose", t.diagnose().raw), ("compare", tprof.compare(t, t).raw),
            ("temporal", t.get_temporal_breakdown(visualize=False)),
            ("kernel breakdown", list(t.get_gpu_kernel_breakdown(visualize=False))),
            ("queue", t.get_queue_length_time_series()),
        ):
            with self.subTest(what):
                assert_valid_str(self, value, what)


if __name__ == "__main__":
    unittest.main()
