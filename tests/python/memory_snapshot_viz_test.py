#!/usr/bin/env python3
"""tprof's snapshot reader against torch's own reading of the same files.

  python3 tests/python/memory_snapshot_viz_test.py BUILD/memory_snapshot_dump [SNAPSHOT.pickle ...]

For each snapshot (default: every tests/data/snapshots/*.pickle) it runs
the C++ driver tests/unit/memory_snapshot_dump.cc, which prints what
read_memory_snapshot made of the file, and compares per device:

  from torch.cuda._memory_viz.stats (torch 1.13's own code, run on the
  device's segments; it also asserts that each segment's blocks add up):
    segments                 len(segments)
    segment_bytes            stats()["total_size"]
    segment_allocated_bytes  stats()["active_allocated"]
    final_reserved           stats()["total_size"] (the reserved total after the last sample)

  from a forward replay written here after torch's viewer
  (torch/utils/viz/MemoryViz.js process_alloc_data; torch 1.13 has no trace
  reader): what is live before the trace is every free_completed whose alloc
  the trace lacks plus every held block the trace did not allocate; alloc
  adds its size, free_completed takes it back, free_requested changes
  nothing, segment_alloc/map and segment_free/unmap move the reserved total:
    samples, allocs, frees, start_allocated, final_allocated, peak_allocated,
    peak_reserved
  (one difference from MemoryViz.js, on purpose: a block whose free waits on
  another stream, "active_pending_free", counts as held, as the trace holds
  it until free_completed; MemoryViz.js drops such a block when the trace
  lacks its alloc.)

Exit 0 when every number agrees, 1 with what differs, 77 (ctest's
SKIP_RETURN_CODE) when torch is not installed. Needs torch (Debian's
python3-torch 1.13); runs without CUDA.
"""

import glob
import json
import os
import pickle
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "snapshots")

SAMPLE_ACTIONS = {"alloc", "free_completed", "free", "segment_alloc", "segment_free", "segment_map", "segment_unmap"}


def requested(block):
    # As the reader does: requested_size, else the newest history entry, else the block.
    if "requested_size" in block:
        return block["requested_size"]
    if block.get("history"):
        return block["history"][0]["real_size"]
    return block["size"]


def replay(segments, trace):
    """Per-sample totals of one device's trace, forwards."""
    held = {}
    for seg in segments:
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free", "active_awaiting_free"):
                held[b.get("address", addr)] = requested(b)
            addr += b["size"]
    reserved_end = sum(s["total_size"] for s in segments)

    live = {}
    before = 0  # allocated before the trace: frees of allocations it lacks
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] in ("free_completed", "free"):
            if e["addr"] in live:
                del live[e["addr"]]
            else:
                before += e["size"]
    before += sum(size for addr, size in held.items() if addr not in live)

    reserved_change = 0
    for e in trace:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved_change += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved_change -= e["size"]
    reserved = reserved_end - reserved_change

    allocated = before
    totals = []
    allocs = frees = 0
    for e in trace:
        a = e["action"]
        if a not in SAMPLE_ACTIONS:
            continue
        if a == "alloc":
            allocated += e["size"]
            allocs += 1
        elif a in ("free_completed", "free"):
            allocated -= e["size"]
            frees += 1
        elif a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        else:
            reserved -= e["size"]
        totals.append((allocated, reserved))
    if not totals:
        # The reader's one sample of the dump-time state.
        totals.append((sum(held.values()), reserved_end))
    return {
        "samples": len(totals),
        "allocs": allocs,
        "frees": frees,
        "start_allocated": before,
        "final_allocated": totals[-1][0],
        "peak_allocated": max(t[0] for t in totals),
        "peak_reserved": max(t[1] for t in totals),
    }


def expected(path, _memory_viz):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, list):
        segments, traces = snap, []
    else:
        segments, traces = snap["segments"], snap.get("device_traces") or []
    ids = sorted({s.get("device", 0) for s in segments} | {d for d, t in enumerate(traces) if t})
    out = {}
    for d in ids:
        segs = [s for s in segments if s.get("device", 0) == d]
        stats = _memory_viz.stats(segs)
        e = {
            "segments": stats["segments"],
            "segment_bytes": stats["total_size"].value,
            "segment_allocated_bytes": stats["active_allocated"].value if "active_allocated" in stats else 0,
            "final_reserved": stats["total_size"].value,
        }
        e.update(replay(segs, traces[d] if d < len(traces) else []))
        out[d] = e
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    try:
        from torch.cuda import _memory_viz  # torch 1.13's: stats() takes a list of segments
    except ImportError as e:
        print(f"SKIP: torch is not installed ({e})")
        return 77
    driver = sys.argv[1]
    # *.cut.pickle: files cut short on purpose (tprof must refuse them; golden memory_snapshot_cut).
    files = sys.argv[2:] or sorted(f for f in glob.glob(os.path.join(DATA, "*.pickle")) if ".cut." not in f)
    if not files:
        print(f"no snapshots in {DATA}")
        return 1
    failures = 0
    for path in files:
        name = os.path.basename(path)
        run = subprocess.run([driver, path], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL {name}: the driver exited {run.returncode}: {run.stderr.strip()}")
            failures += 1
            continue
        got = {d["device"]: d for d in json.loads(run.stdout)["devices"]}
        want = expected(path, _memory_viz)
        diffs = []
        if sorted(got) != sorted(want):
            diffs.append(f"devices: tprof {sorted(got)}, torch {sorted(want)}")
        for d in sorted(set(got) & set(want)):
            for key, value in want[d].items():
                if got[d].get(key) != value:
                    diffs.append(f"device {d} {key}: tprof {got[d].get(key)}, torch {value}")
        if diffs:
            failures += 1
            print(f"FAIL {name}")
            for line in diffs:
                print(f"  {line}")
        else:
            print(f"ok   {name}: {len(want)} device(s), " +
                  ", ".join(f"cuda:{d} {w['samples']} samples, peak {w['peak_allocated']}, "
                            f"{w['segments']} segments" for d, w in sorted(want.items())))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
