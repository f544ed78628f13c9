#!/usr/bin/python3
"""What a Python user waits for, and how much memory it takes, to get a
trace into a DataFrame: `tprof.read(path).events()` against
`json.load` + `pandas.DataFrame(trace["traceEvents"])` (what
HolisticTraceAnalysis' parser is built on), on the same file, in one run.

Each measurement is a fresh child process of this script (the two never
share a heap or an allocator's cache): it imports what it needs, then
times from opening the file to the finished DataFrame, and reports its
peak RSS (getrusage ru_maxrss: the whole process, interpreter and
libraries included). A third child that only imports numpy, pandas and
tprof gives the baseline RSS every process pays. The file is read once
beforehand, so both paths start from the page cache.

    cmake --build build --target tprof_python gen_trace
    /usr/bin/python3 bench/python_read.py --sizes 100M,1G --build build

Traces come from bench/gen_trace (deterministic, seed 1), written to --dir
and kept there for the next run. --json-max skips the json+pandas path for
larger files (it needs several bytes of RAM per trace byte).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHILD = {
    "baseline": """
import numpy, pandas, tprof
""",
    "tprof": """
import numpy, pandas, tprof
t0 = time.perf_counter()
df = tprof.read(PATH).events()
seconds = time.perf_counter() - t0
rows = len(df)
""",
    "json": """
import json, numpy, pandas, tprof
t0 = time.perf_counter()
with open(PATH, "rb") as f:
    trace = json.load(f)
df = pandas.DataFrame(trace["traceEvents"])
seconds = time.perf_counter() - t0
rows = len(df)
""",
}


def child(mode: str, path: str) -> None:
    scope = {"PATH": path, "time": time, "seconds": 0.0, "rows": 0}
    exec(CHILD[mode], scope)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": scope["seconds"], "rows": scope["rows"], "rss_bytes": rss_kb * 1024}))


def run(mode: str, path: str, pythonpath: str) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, __file__, "--child", mode, path], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def parse_size(s: str) -> int:
    mult = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1] in mult else int(s)


def trace_for(size: str, directory: str, build: str) -> str:
    path = os.path.join(directory, f"tprof_python_read_{size}.json")
    if not os.path.exists(path):
        gen = os.path.join(build, "bench", "gen_trace")
        subprocess.run([gen, "--size", size, "--out", path, "--seed", "1"], check=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100M", help="trace sizes, e.g. 100M,1G")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--build", default="build", help="the build directory (bench/gen_trace, python/tprof)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each path per size (the best time is kept)")
    ap.add_argument("--json-repeat", type=int, default=0, help="runs of the json path, at most --repeat (default: --repeat)")
    ap.add_argument("--json-max", default="2G", help="skip json+pandas above this size")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    pythonpath = os.path.join(a.build, "python")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of {a.repeat}; "
          "time: open to DataFrame; peak RSS: whole process")
    print("| file | path | seconds | rows | peak RSS MB | RSS / file |")
    print("|---|---|---:|---:|---:|---:|")
    results = []
    for size in a.sizes.split(","):
        path = trace_for(size, a.dir, a.build)
        file_bytes = os.path.getsize(path)
        with open(path, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
        base = run("baseline", path, pythonpath)
        modes = ["tprof"]
        if file_bytes <= parse_size(a.json_max):
            modes.append("json")
        runs = {mode: [] for mode in modes}
        for r in range(a.repeat):
            for mode in modes:  # interleaved, so drift on a shared machine hits both
                if mode == "json" and r >= (a.json_repeat or a.repeat):
                    continue
                runs[mode].append(run(mode, path, pythonpath))
        # The best time, and the largest peak RSS of the runs.
        best = {mode: {"seconds": min(m["seconds"] for m in ms), "rows": ms[0]["rows"],
                       "rss_max": max(m["rss_bytes"] for m in ms)} for mode, ms in runs.items()}
        mb = file_bytes / 1e6
        print(f"| {mb:.0f} MB | baseline (imports) | | | {base['rss_bytes'] / 1e6:.0f} | |")
        for mode in modes:
            m = best[mode]
            label = "`tprof.read(p).events()`" if mode == "tprof" else "`json.load` + `pandas.DataFrame`"
            print(f"| | {label} | {m['seconds']:.2f} | {m['rows']} | {m['rss_max'] / 1e6:.0f} | "
                  f"{m['rss_max'] / file_bytes:.2f} |")
        if "json" in best:
            t, j = best["tprof"], best["json"]
            speed = j["seconds"] / t["seconds"]
            memory = j["rss_max"] / t["rss_max"]
            net = (j["rss_max"] - base["rss_bytes"]) / max(1, t["rss_max"] - base["rss_bytes"])
            print(f"| | **ratio** | **{speed:.1f}x faster** | | **1/{memory:.1f} the peak** "
                  f"(1/{net:.1f} above the imports) | |")
            results.append((size, speed, memory))
        sys.stdout.flush()
    for size, speed, memory in results:
        ok = speed >= 20 and memory >= 5
        print(f"{size}: {speed:.1f}x faster, 1/{memory:.1f} the peak RSS of json+pandas "
              f"(targets 20x, 1/5): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
