#!/usr/bin/env python3
"""Writes the one-process-several-windows jobs of tests/data/ranks/ (docs/scale.md,
"One process, several windows") from the late_host job that make_jobs.py writes.

A tensorboard trace handler (torch's tensorboard_trace_handler, tprof's)
writes one file per profiling window, named "<worker>.<ms>.pt.trace.json.gz".
Cutting a rank's trace at its steps gives those windows: the same process,
the same clock, the same distributedInfo.rank, a gap between them (as
schedule(wait=1, active=2) leaves one).

  windows    ranks 0 and 6 of late_host, three windows of 2 steps each
             (steps 10-11, 13-14, 16-17): 2 ranks from 6 traces, rank 6
             still the straggler
  dup_rank   rank 0's first window, and rank 1's relabelled rank 0 (another
             pid): two processes claim rank 0, an error

Deterministic (gzip mtime 0).   tests/data/ranks/make_windows.py
"""
import gzip
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOWS = [(10, 11), (13, 14), (16, 17)]


def load(rank):
    with gzip.open(os.path.join(HERE, "late_host", "rank-%02d.json.gz" % rank)) as f:
        return json.load(f)


def cut(doc, first, last):
    """The events of steps first..last (by the host's step spans), and the metadata."""
    steps = {int(e["name"].split("#")[1]): e for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep#")}
    start = steps[first]["ts"]
    end = steps[last + 1]["ts"] if last + 1 in steps else float("inf")
    events = [e for e in doc["traceEvents"] if e["ph"] == "M" or start <= e["ts"] < end]
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    out["traceEvents"] = events
    return out


def write(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = json.dumps(doc, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(raw, mtime=0))


def main():
    for rank in (0, 6):
        doc = load(rank)
        worker = "trainer-%d_%d" % (rank, 4000 + rank)
        for i, (first, last) in enumerate(WINDOWS):
            name = "%s.%d.pt.trace.json.gz" % (worker, 1700000000123 + 250 * i)
            write(os.path.join(HERE, "windows", name), cut(doc, first, last))
    write(os.path.join(HERE, "dup_rank", "trainer-0_4000.1700000000123.pt.trace.json.gz"), cut(load(0), 10, 11))
    other = cut(load(1), 10, 11)
    other["distributedInfo"]["rank"] = 0
    write(os.path.join(HERE, "dup_rank", "trainer-1_4001.1700000000123.pt.trace.json.gz"), other)


if __name__ == "__main__":
    main()
