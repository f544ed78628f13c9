"""`tprof export --sqlite` read back as Python reads databases: every table
through the sqlite3 module (TEXT decoded as UTF-8, as its default does) and
pandas.read_sql, on a trace whose names, args and metadata hold bytes that
are not UTF-8 (issue 36: sqlite3 and pandas failed on such databases), in
memory and streamed. (The streamed export past the model limit is checked
in tests/unit/sqlite_stream_test.cc.)"""

import os
import sqlite3
import subprocess
import tempfile
import unittest

import pandas as pd

from support import CLI_ENV, TPROF_BIN, data

# Overlong forms, surrogates (raw and escaped), a cut sequence, 0xFF, a code
# point past U+10FFFF, in names, categories, args, ids, metadata and
# top-level keys; and valid UTF-8 that must stay as it is.
HOSTILE = (
    b'{"traceEvents": [\n'
    b'{"ph": "X", "name": "overlong\xc0\xaf", "cat": "cpu_op\xff", "pid": 1, "tid": 1, "ts": 1, "dur": 10,'
    b' "args": {"k\xff": "v\xed\xa0\x80", "External id": 1}},\n'
    b'{"ph": "X", "name": "surrogate\xed\xa0\x80 escaped\\ud800", "cat": "kernel", "pid": 0, "tid": 7,'
    b' "ts": 2, "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 5}},\n'
    b'{"ph": "X", "name": "cut\xe2\x82", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 2, "dur": 1,'
    b' "args": {"correlation": 5}},\n'
    b'{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 20},\n'
    b'{"ph": "X", "name": "past\xf4\x90\x80\x80 and \xff\xfe", "pid": "p\xff", "tid": "t\xc3", "ts": 4, "dur": 1},\n'
    b'{"ph": "i", "s": "t", "name": "ok \xe2\x82\xac", "pid": 1, "tid": 1, "ts": 5},\n'
    b'{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "proc\xa0"}},\n'
    b'{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thr\xf8"}}\n'
    b'], "deviceProperties": [{"name": "GPU\xff"}], "key\xfe": "value\xc1"}\n'
)


def export(trace: str, db: str, *flags: str) -> None:
    if not TPROF_BIN:
        raise unittest.SkipTest("TPROF_BIN is not set (run through ctest)")
    r = subprocess.run([TPROF_BIN, "-q", "export", "--sqlite", *flags, trace, "-o", db],
                       capture_output=True, check=False, env=CLI_ENV)
    if b"built without SQLite" in r.stderr:
        raise unittest.SkipTest("this tprof was built without SQLite")
    if r.returncode != 0:
        raise AssertionError(f"tprof export {trace}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")


def tables(db: str) -> list:
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


class SqliteUtf8Test(unittest.TestCase):
    def check(self, db: str) -> None:
        replaced = 0
        con = sqlite3.connect(db)  # text_factory str: TEXT is decoded as UTF-8 (strict)
        try:
            for table in tables(db):
                with self.subTest(table=table):
                    rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
                    frame = pd.read_sql(f'SELECT * FROM "{table}"', con)
                    self.assertEqual(len(frame), len(rows))
                    for row in rows:
                        replaced += sum(1 for v in row if isinstance(v, str) and "\ufffd" in v)
            names = {r[0] for r in con.execute("SELECT text FROM strings")}
        finally:
            con.close()
        self.assertGreaterEqual(replaced, 10)
        self.assertIn("overlong\ufffd\ufffd", names)
        self.assertIn("cut\ufffd\ufffd", names)
        self.assertIn("ok \u20ac", names)  # valid text as it was

    def test_invalid_utf8_reads_back_in_sqlite3_and_pandas(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "bad_utf8.json")
            with open(trace, "wb") as f:
                f.write(HOSTILE)
            memory, streamed = os.path.join(d, "memory.db"), os.path.join(d, "streamed.db")
            export(trace, memory)
            export(trace, streamed, "--stream")
            for db in (memory, streamed):
                with self.subTest(db=os.path.basename(db)):
                    self.check(db)

    def test_a_real_trace_reads_back_whole(self):
        # The plain case beside the hostile one: every table of a real
        # trace through pandas, with as many events as the trace has.
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "t.db")
            export(data("gpu", "h100-torch-2.11", "64_bf16_warm_eager.json"), db)
            with sqlite3.connect(db) as con:
                events = pd.read_sql("SELECT * FROM event_view", con)
                self.assertEqual(len(events), con.execute("SELECT value FROM meta WHERE key = 'events'").fetchone()[0])


if __name__ == "__main__":
    unittest.main()
