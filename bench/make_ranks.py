#!/usr/bin/env python3
"""Writes a synthetic N-rank job for docs/scale.md's measurements.

Each rank is a copy of one real trace (default: HTA's sampled rank 0) with
distributedInfo.rank set to its number and every ts/dur stretched by a
factor of its own: 1 + up to 1% of jitter, and one straggler rank (the
last, unless --straggler) stretched by --slow. Stretching the whole trace
keeps its structure (steps, launches, kernels) intact.

  bench/make_ranks.py --ranks 64 --out /tmp/ranks64
  tprof diagnose /tmp/ranks64
"""
import argparse
import gzip
import json
import os
import random


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", default=os.path.join(here, "..", "tests", "data", "public", "hta", "trace_filter",
                                                 "sampled_rank-0.json.gz"))
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--out", required=True)
    p.add_argument("--slow", type=float, default=1.5, help="the straggler's stretch factor")
    p.add_argument("--straggler", type=int, default=-1, help="the straggler's rank (default: the last)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    with gzip.open(a.src, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    rng = random.Random(a.seed)
    straggler = a.straggler if a.straggler >= 0 else a.ranks - 1
    os.makedirs(a.out, exist_ok=True)
    for r in range(a.ranks):
        k = a.slow if r == straggler else 1.0 + rng.uniform(0.0, 0.01)
        out = dict(doc)
        out["distributedInfo"] = dict(doc.get("distributedInfo", {}), rank=r, world_size=a.ranks)
        evs = []
        for e in events:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = round(t0 + (e["ts"] - t0) * k, 3)
            if isinstance(e.get("dur"), (int, float)):
                e["dur"] = round(e["dur"] * k, 3)
            evs.append(e)
        out["traceEvents"] = evs
        with gzip.open(os.path.join(a.out, "rank-%04d.json.gz" % r), "wt", compresslevel=1) as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
