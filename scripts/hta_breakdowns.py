#!/usr/bin/env python3
"""Print HolisticTraceAnalysis' own temporal and idle-time breakdowns of one trace.

This is how the HTA reference files in tests/data (*.hta_breakdowns.json)
are made, and how tprof's `breakdowns.hta_temporal` / `hta_idle` are
checked against HTA itself (see docs/diagnose.md, "Breakdowns").

HTA is not part of tprof and nothing of it is copied here: point HTA_SRC at
an unpacked HolisticTraceAnalysis source tree (the directory holding `hta/`).
HTA imports plotly (figures) and networkx (critical path) at import time;
neither touches the breakdown numbers. Where they are not installed, put a
directory of stubs on HTA_STUBS (modules whose every use raises) so the
import succeeds; a computation that needed them would fail loudly.

Usage:
  HTA_SRC=/path/to/HolisticTraceAnalysis [HTA_STUBS=/path/to/stubs] [HTA_COMMIT=sha] \
    python3 scripts/hta_breakdowns.py TRACE [--compare TPROF_BINARY]
  python3 scripts/hta_breakdowns.py --csv OUT.csv OUTPUT.json...

TRACE is one Kineto trace (.json or .json.gz). HTA is run the way a user runs
it, TraceAnalysis(trace_files={rank: TRACE}, trace_dir=DIR) over a directory
that holds only TRACE, rank = distributedInfo.rank (else 0), with its
defaults (include_last_profiler_step=False, consecutive_kernel_delay=30).
Output (stdout, JSON): HTA's numbers converted to ns (HTA works in µs):
  {"hta_commit": ..., "trace": ..., "hta_temporal": [{rank, kernel_time_ns,
   idle_time_ns, compute_time_ns, non_compute_time_ns}] or {"error": ...},
   "hta_idle": [{rank, stream, host_wait_ns, kernel_wait_ns, other_ns}]}
Where HTA's own `assert non_compute_time >= 0` fails, the temporal figures
are read by running HTA again under `python3 -O` ("hta_temporal_note" says
so); tprof reports HTA's negative figure as 0.
With --compare, also runs `TPROF diagnose TRACE --format json` and prints
each figure of both side by side to stderr; exit status 1 on a mismatch
(above 1 ns per figure; tprof reports a negative HTA sum as 0, which is
not counted as a mismatch).
"""
import json
import logging
import os
import subprocess
import sys
import tempfile


def _import_hta():
    src = os.environ.get("HTA_SRC")
    if not src:
        sys.exit("hta_breakdowns.py: set HTA_SRC to a HolisticTraceAnalysis source tree")
    sys.path.insert(0, src)
    if os.environ.get("HTA_STUBS"):
        sys.path.append(os.environ["HTA_STUBS"])
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis  # noqa: E402

    return TraceAnalysis


def _hta_commit():
    return os.environ.get("HTA_COMMIT", "unknown")


def _rank(trace):
    import gzip

    with (gzip.open(trace, "rt") if trace.endswith(".gz") else open(trace)) as f:
        d = json.load(f)
    info = d.get("distributedInfo") if isinstance(d, dict) else None
    r = info.get("rank") if isinstance(info, dict) else None
    return r if isinstance(r, int) and r >= 0 else 0


def hta_breakdowns(trace):
    TraceAnalysis = _import_hta()
    out = {"hta_commit": _hta_commit(), "trace": os.path.basename(trace)}
    with tempfile.TemporaryDirectory() as d:
        os.symlink(os.path.abspath(trace), os.path.join(d, os.path.basename(trace)))
        # The rank as distributedInfo.rank says (tprof's rank). HTA's own
        # discovery (trace_dir alone) finds it with the regex '"rank":\s+(\d+)',
        # which needs a space after the colon: compact JSON would be rank 0.
        analyzer = TraceAnalysis(trace_files={_rank(trace): os.path.basename(trace)}, trace_dir=d)
        ranks = sorted(analyzer.t.traces.keys())
        try:
            df = analyzer.get_temporal_breakdown(visualize=False)
            out["hta_temporal"] = [
                {
                    "rank": int(r["rank"]),
                    "kernel_time_ns": round(float(r["kernel_time(us)"]) * 1000),
                    "idle_time_ns": round(float(r["idle_time(us)"]) * 1000),
                    "compute_time_ns": round(float(r["compute_time(us)"]) * 1000),
                    "non_compute_time_ns": round(float(r["non_compute_time(us)"]) * 1000),
                }
                for _, r in df.iterrows()
            ]
        except AssertionError as e:
            # HTA's own `assert non_compute_time >= 0` (its rounding can make
            # compute_time exceed the merged busy time). Its figures are
            # computed before the assert: run HTA again under `python3 -O`
            # (asserts off, HTA's code unchanged) to read them.
            if sys.flags.optimize:
                raise
            p = subprocess.run([sys.executable, "-O", os.path.abspath(__file__), trace],
                               capture_output=True, text=True, check=True)
            out["hta_temporal"] = json.loads(p.stdout)["hta_temporal"]
            out["hta_temporal_note"] = "HTA's assert failed (%s); figures from python3 -O" % (str(e) or "AssertionError")
        except Exception as e:  # HTA raises on a trace without rows with a stream
            out["hta_temporal"] = {"error": "%s: %s" % (type(e).__name__, e)}
        idle = []
        for rank in ranks:
            try:
                df, _ = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)
            except Exception as e:
                out["hta_idle"] = {"error": "%s: %s" % (type(e).__name__, e)}
                break
            streams = {}
            for _, r in df.iterrows():
                s = streams.setdefault(
                    int(r["stream"]),
                    {"rank": rank, "stream": int(r["stream"]), "host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0},
                )
                key = {"host_wait": "host_wait_ns", "kernel_wait": "kernel_wait_ns", "other": "other_ns"}[r["idle_category"]]
                s[key] = round(float(r["idle_time"]) * 1000)
            idle.extend(streams.values())
        else:
            out["hta_idle"] = idle
    return out


def compare(ref, tprof, trace):
    p = subprocess.run([tprof, "diagnose", trace, "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("tprof failed: %s\n" % p.stderr)
        return False
    got = json.loads(p.stdout).get("breakdowns", {})
    ok = True

    def cmp(label, want, have):
        nonlocal ok
        # tprof reports HTA's negative sums as 0 (docs/diagnose.md).
        bad = have is None or (abs(want - have) > 1 and not (want < 0 and have == 0))
        ok = ok and not bad
        sys.stderr.write("%-42s HTA %16.3f ms  tprof %16s  %s\n" % (
            label, want / 1e6, "-" if have is None else "%.3f ms" % (have / 1e6), "MISMATCH" if bad else "ok"))

    if isinstance(ref["hta_temporal"], dict):
        sys.stderr.write("HTA temporal: %s; tprof: %s\n" % (ref["hta_temporal"]["error"], got.get("hta_temporal")))
    else:
        tt = {e["rank"]: e for e in got.get("hta_temporal", [])}
        for e in ref["hta_temporal"]:
            for k in ("kernel_time_ns", "idle_time_ns", "compute_time_ns", "non_compute_time_ns"):
                cmp("temporal rank %d %s" % (e["rank"], k), e[k], tt.get(e["rank"], {}).get(k))
    if isinstance(ref["hta_idle"], dict):
        sys.stderr.write("HTA idle: %s\n" % ref["hta_idle"]["error"])
    else:
        ti = {(e["rank"], e["stream"]): e for e in got.get("hta_idle", [])}
        for e in ref["hta_idle"]:
            for k in ("host_wait_ns", "kernel_wait_ns", "other_ns"):
                cmp("idle rank %d stream %d %s" % (e["rank"], e["stream"], k), e[k],
                    ti.get((e["rank"], e["stream"]), {}).get(k))
        extra = set(ti) - {(e["rank"], e["stream"]) for e in ref["hta_idle"]}
        if extra:
            ok = False
            sys.stderr.write("tprof has streams HTA has not: %s\n" % sorted(extra))
    return ok


CSV_COLUMNS = ["trace", "breakdown", "rank", "stream", "kernel_time_ns", "idle_time_ns", "compute_time_ns",
               "non_compute_time_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]


def write_csv(out_csv, outputs):
    """The reference file tests/golden/breakdowns_test.cc reads
    (hta_breakdowns.csv next to the traces): one row per temporal entry and
    per idle stream, or one "none" row where HTA raised (no row with a
    stream), from this script's JSON outputs for traces in out_csv's
    directory."""
    import csv

    rows = []
    for path in outputs:
        ref = json.load(open(path))
        t = ref["trace"]
        if isinstance(ref["hta_temporal"], dict) or isinstance(ref["hta_idle"], dict):
            if not (isinstance(ref["hta_temporal"], dict) and isinstance(ref["hta_idle"], dict)):
                sys.exit("%s: HTA raised on one breakdown only; not a reference" % path)
            rows.append({"trace": t, "breakdown": "none"})
            continue
        for e in ref["hta_temporal"]:
            rows.append(dict(e, trace=t, breakdown="temporal"))
        for e in ref["hta_idle"]:
            rows.append(dict(e, trace=t, breakdown="idle"))
    rows.sort(key=lambda r: (r["trace"], r["breakdown"] != "temporal", r.get("stream", 0)))
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main(argv):
    if len(argv) >= 3 and argv[1] == "--csv":
        write_csv(argv[2], argv[3:])
        return 0
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--compare"):
        sys.exit(__doc__)
    ref = hta_breakdowns(argv[1])
    print(json.dumps(ref, indent=1))
    if len(argv) == 4:
        return 0 if compare(ref, argv[3], argv[1]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
