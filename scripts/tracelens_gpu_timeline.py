#!/usr/bin/env python3
"""Print TraceLens' own GPU timeline of one trace and compare it with tprof's
`breakdowns.tracelens_gpu_timeline`.

TraceLens (AMD-AGI/TraceLens) is not part of tprof and nothing of it is
copied here: point TRACELENS_SRC at the directory holding `TraceLens/`.
It runs TreePerfAnalyzer.from_file(TRACE) with its defaults and
get_df_gpu_timeline(), what TraceLens' perf report writes as
gpu_timeline.csv. TraceLens imports tqdm for a progress bar only; where it
is not installed, put a stub directory on TRACELENS_STUBS.

Usage:
  TRACELENS_SRC=/path/to/TraceLens-repo [TRACELENS_STUBS=dir] \\
    python3 scripts/tracelens_gpu_timeline.py TRACE [--compare TPROF]
Output (stdout, JSON): {type: ms}. With --compare, each row of both on
stderr; exit status 1 where one differs by more than 100 ns (TraceLens
sums floating-point µs).
"""
import json
import logging
import os
import subprocess
import sys
import warnings


def tracelens_timeline(trace):
    sys.path.insert(0, os.environ["TRACELENS_SRC"])
    if os.environ.get("TRACELENS_STUBS"):
        sys.path.append(os.environ["TRACELENS_STUBS"])
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    from TraceLens import TreePerfAnalyzer

    a = TreePerfAnalyzer.from_file(os.path.abspath(trace))
    df = a.get_df_gpu_timeline()
    return {r["type"]: float(r["time ms"]) for _, r in df.iterrows()}


def compare(ref, tprof, trace):
    p = subprocess.run([tprof, "diagnose", trace, "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("tprof failed: %s\n" % p.stderr)
        return False
    got = json.loads(p.stdout).get("breakdowns", {}).get("tracelens_gpu_timeline") or {}
    ok = True
    for k, ms in ref.items():
        have = got.get(k + "_ns")
        bad = have is None or abs(have - ms * 1e6) > 100
        ok = ok and not bad
        sys.stderr.write("%-22s TraceLens %14.6f ms  tprof %14s  %s\n" % (
            k, ms, "-" if have is None else "%.6f ms" % (have / 1e6), "MISMATCH" if bad else "ok"))
    return ok


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--compare"):
        sys.exit(__doc__)
    ref = tracelens_timeline(argv[1])
    print(json.dumps(ref))
    if len(argv) == 4:
        return 0 if compare(ref, argv[3], argv[1]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
