#!/usr/bin/env python3
"""Writes a job whose ranks hold one step each, for the job page's Chromium
test (chromium_job_test.sh): every rank of tests/data/ranks/late_compute
(16 ranks, rank 11's GEMM 12 ms longer) cut to its ProfilerStep#12, with the
events that start inside it and the metadata, as make_windows.py cuts a
trace into windows.
   one_step_job.py DATA_DIR OUT_DIR"""
import glob
import gzip
import json
import os
import sys

STEP = 12

data, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for path in sorted(glob.glob(os.path.join(data, "ranks", "late_compute", "rank-*.json.gz"))):
    with gzip.open(path) as f:
        doc = json.load(f)
    steps = {int(e["name"].split("#")[1]): e for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep#")}
    start, end = steps[STEP]["ts"], steps[STEP + 1]["ts"]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ph"] == "M" or start <= e["ts"] < end]
    with open(os.path.join(out, os.path.basename(path)), "wb") as f:
        f.write(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
