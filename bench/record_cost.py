"""What a profiler adds to the blog's loop, like for like: tprof record against
torch.profiler recording the same CUDA events, and tprof's in-process
Profiler against torch.profiler recording the op layer.

    python3 bench/record_cost.py [--sizes 64,4096] [--rounds 15] [--steps 64=3000,4096=300]
                                 [--warmup 300] [--bootstrap 2000] [--seed 1]
                                 [--tprof build/tools/tprof/tprof]
                                 [--capture-bench build/bench/cuda_capture_bench]
                                 [--record-args "--gzip"] [--keep DIR]

Two comparisons, each measured on both sides with what the other records:

1. CUDA events only. The plain PyTorch loop, torch.add(torch.matmul(x, w), b)
   on size x size bf16 CUDA tensors, with no profiler ("none"), under
   torch.profiler with activities=[CUDA] ("torch cuda": the kernels and CUDA
   calls, no ops) and as an unmodified program under `tprof record`
   ("tprof record": the same kernels and calls). Target: what tprof record
   adds <= 0.5x what torch.profiler adds.
2. The op layer. torch.profiler with activities=[CPU, CUDA] on the blog's
   loop (the ops inside record_function("matmul_add"); "torch ops", against
   the same loop without a profiler, "none ops"), and tprof::Profiler with
   CPU and CUDA activities on the same ops in C++ (bench/cuda_capture_bench:
   record_function("matmul_add") around aten::matmul > aten::mm and
   aten::add scopes; its own none, and the CUPTI floor: CUPTI set up as
   tprof sets it, records discarded). The two loops differ (Python and
   C++), so besides the added us per step the table gives ns per recorded
   event.

Every round runs each PyTorch mode in a fresh child process and
cuda_capture_bench once (--rounds 1: its three modes in one process), the
children in a rotating order. A child builds its tensors, starts its
profiler (tprof record's window is open from the program's CUDA start),
runs --warmup untimed steps, then times --steps steps between two
torch.cuda.synchronize() calls and prints the mean ns per step. A mode's
added cost is taken against its baseline in the same round; the figures
are medians over rounds with a 95% bootstrap interval that resamples whole
rounds (so the pairing within a round is kept).

Needs PyTorch with CUDA, a GPU, tprof built with CUPTI and
cuda_capture_bench; without a GPU it says why and exits 2.
"""
import argparse
import gzip
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INNER_TAG = "record_cost_inner "
PY_MODES = ("none", "torch cuda", "tprof record", "none ops", "torch ops")
CPP = "cuda_capture_bench"
DEFAULT_STEPS = {64: 3000, 4096: 300}


def fail(msg, code=2):
    print(f"record_cost: {msg}", file=sys.stderr)
    sys.exit(code)


# --- statistics (tests/python/test_record_cost.py) ---------------------------


def added_per_round(rounds, mode, base):
    """What `mode` adds to `base` in each round (ns per step)."""
    return [r[mode] - r[base] for r in rounds]


def paired_bootstrap(rounds, stat, resamples=2000, seed=1, level=0.95):
    """stat(rounds) and its percentile interval over `resamples` resamplings
    of whole rounds with replacement: (point, low, high)."""
    if not rounds:
        raise ValueError("paired_bootstrap: no rounds")
    rng = random.Random(seed)
    n = len(rounds)
    values = sorted(stat([rounds[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    cut = (1 - level) / 2
    low = values[min(resamples - 1, int(cut * resamples))]
    high = values[min(resamples - 1, int((1 - cut) * resamples))]
    return stat(rounds), low, high


def median_added(mode, base):
    return lambda rounds: statistics.median(added_per_round(rounds, mode, base))


def ratio_of_added(mode_a, base_a, mode_b, base_b):
    """median added by a / median added by b (inf when b adds nothing)."""
    def stat(rounds):
        b = statistics.median(added_per_round(rounds, mode_b, base_b))
        a = statistics.median(added_per_round(rounds, mode_a, base_a))
        return a / b if b > 0 else float("inf")
    return stat


# --- the child: one timed run ------------------------------------------------


def cuda_or_exit():
    """Imports torch and checks for a device, or exits 2 with the reason."""
    try:
        import torch
    except ImportError as e:
        fail(f"needs PyTorch with CUDA and a GPU: PyTorch is not importable ({e})")
    if not torch.cuda.is_available():
        fail(f"needs PyTorch with CUDA and a GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) "
             "sees no CUDA device")
    return torch


def inner(mode, size, steps, warmup):
    torch = cuda_or_exit()
    if mode == "info":
        p = torch.cuda.get_device_properties(0)
        print(INNER_TAG + json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": p.name,
                                      "capability": f"{p.major}.{p.minor}",
                                      "memory_gib": round(p.total_memory / 2**30, 1)}), flush=True)
        return
    x, w, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    blog = mode in ("none ops", "torch ops")

    def step():
        if blog:
            with torch.profiler.record_function("matmul_add"):
                torch.add(torch.matmul(x, w), b)
        else:
            torch.add(torch.matmul(x, w), b)

    def run():
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / steps

    out = {"mode": mode, "steps": steps}
    if mode in ("torch cuda", "torch ops"):
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if mode == "torch ops":
            acts.insert(0, torch.profiler.ProfilerActivity.CPU)
        with torch.profiler.profile(activities=acts) as prof:
            out["ns_per_step"] = run()
        # After the timing: torch's post-processing of what it recorded.
        out["events_per_step"] = len(prof.events()) / (warmup + steps)
    else:
        out["ns_per_step"] = run()
    # Printed before the profiler's teardown and the process's exit, so a
    # failure there still leaves the measurement.
    print(INNER_TAG + json.dumps(out), flush=True)


# --- the parent: rounds, modes, the tables -----------------------------------


def child_output(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.stdout, p.returncode


def py_result(argv, what):
    """Runs a PyTorch child; returns (its measurement, exit status, what else it said)."""
    out, rc = child_output(argv, what)
    line = next((l for l in out.splitlines() if l.startswith(INNER_TAG)), None)
    if line is None:
        refusal = next((l for l in out.splitlines() if l.startswith("record_cost: ")), None)
        if refusal:  # the child's own refusal (no torch, no device) is the message
            fail(refusal[len("record_cost: "):])
        fail(f"{what} printed no measurement (exit {rc}):\n{out[-1500:]}", 1)
    said = [l for l in out.splitlines() if l.strip() and not l.startswith(INNER_TAG)]
    return json.loads(line[len(INNER_TAG):]), rc, "\n".join(said[-3:])


def cpp_result(argv):
    out, rc = child_output(argv, CPP)
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if rc == 2 and not rows:
        fail(f"{CPP}: {out.strip()}")
    if rc != 0 or len(rows) != 1:
        fail(f"{CPP} exit {rc}, {len(rows)} rounds printed:\n{out[-1500:]}", 1)
    return rows[0]


def find_binary(given, default, target, flag):
    for cand in ([given] if given else [os.path.join(ROOT, *default), shutil.which(target)]):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail(f"no {target} binary: build it (cmake --build build --target {target}) or name it with {flag}")


def trace_events_per_step(directory, before, steps):
    """Device activity and CUDA calls per step in the trace tprof record wrote."""
    written = sorted(set(os.listdir(directory)) - before)
    if not written:
        return None
    path = os.path.join(directory, written[-1])
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    kinds = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"}
    return sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in kinds) / steps


def machine_info(tprof, info):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?") \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    driver = "?"
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        driver = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "?"
    version = subprocess.run([tprof, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return [
        f"gpu      {info['gpu']} (sm_{info['capability'].replace('.', '')}, {info['memory_gib']} GiB), driver {driver}",
        f"torch    {info['torch']}, CUDA {info['cuda']}; python {platform.python_version()}",
        f"cpu      {cpu}, {os.cpu_count()} logical CPUs; {platform.system()} {platform.release()}",
        f"tprof    {version.stdout.strip()} ({tprof})",
    ]


def parse_steps(text, sizes):
    steps = {s: DEFAULT_STEPS.get(s, 1000) for s in sizes}
    for part in filter(None, text.split(",")):
        if "=" in part:
            k, v = part.split("=", 1)
            steps[int(k)] = int(v)
        else:
            steps = {s: int(part) for s in sizes}
    return steps


def report(size, steps, rounds, resamples, seed):
    fmt = lambda ns: f"{ns / 1000:8.2f}"  # noqa: E731
    print(f"\n{size}x{size} bf16, {steps} timed steps, {len(rounds)} rounds "
          f"(medians over rounds, 95% bootstrap interval over rounds)")
    print(f"  {'mode':24s} {'us/step':>9s}   {'added us/step [95% interval]':>32s}   {'events/step':>11s}")
    rows = [("none", None), ("torch cuda", "none"), ("tprof record", "none"),
            ("none ops", None), ("torch ops", "none ops"),
            ("C++ none", None), ("C++ cupti floor", "C++ none"), ("C++ tprof Profiler", "C++ none")]
    for mode, base in rows:
        med = statistics.median(r[mode] for r in rounds)
        events = [r[mode + " events"] for r in rounds if r.get(mode + " events") is not None]
        ev = f"{statistics.median(events):11.1f}" if events else ""
        if base is None:
            print(f"  {mode:24s} {fmt(med)}   {'':32s}   {ev}")
            continue
        point, low, high = paired_bootstrap(rounds, median_added(mode, base), resamples, seed)
        print(f"  {mode:24s} {fmt(med)}   {fmt(point)} [{fmt(low).strip()}, {fmt(high).strip()}]{'':8s}   {ev}")
    point, low, high = paired_bootstrap(rounds, ratio_of_added("tprof record", "none", "torch cuda", "none"),
                                        resamples, seed)
    verdict = "met" if high <= 0.5 else ("met at the point, not over the interval" if point <= 0.5 else "NOT met")
    print(f"\n  tprof record / torch.profiler (CUDA), added per step: {point:.2f} [{low:.2f}, {high:.2f}]"
          f"  (target <= 0.5: {verdict})")
    point, low, high = paired_bootstrap(rounds, ratio_of_added("C++ tprof Profiler", "C++ none",
                                                               "C++ cupti floor", "C++ none"), resamples, seed)
    print(f"  C++ tprof Profiler / CUPTI floor, added per step: {point:.2f} [{low:.2f}, {high:.2f}]"
          f"  (target <= 1.2)")

    def per_event(mode, base):
        events = [r.get(mode + " events") for r in rounds]
        if any(e is None or e <= 0 for e in events):
            return None
        return statistics.median((r[mode] - r[base]) / r[mode + " events"] for r in rounds)
    torch_ops, tprof_ops = per_event("torch ops", "none ops"), per_event("C++ tprof Profiler", "C++ none")
    if torch_ops is not None and tprof_ops is not None:
        print(f"  the op layer, added ns per recorded event: torch.profiler (CPU + CUDA) {torch_ops:.0f}, "
              f"tprof::Profiler (CPU + CUDA) {tprof_ops:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="64,4096", help="matrix sizes, comma-separated (64: overhead-bound, "
                    "4096: GPU-bound)")
    ap.add_argument("--steps", default="", help="timed steps: N, or SIZE=N,... (default 64=3000,4096=300)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tprof", default="", help="the tprof binary (default: build/tools/tprof/tprof, else PATH)")
    ap.add_argument("--capture-bench", default="", help="cuda_capture_bench (default: build/bench/cuda_capture_bench)")
    ap.add_argument("--record-args", default="", help="extra tprof record options, e.g. \"--gzip\"")
    ap.add_argument("--keep", default="", help="keep tprof record's traces in this directory")
    ap.add_argument("--inner", choices=["none", "torch cuda", "none ops", "torch ops", "info"], help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=64, help=argparse.SUPPRESS)
    ap.add_argument("--inner-steps", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        inner(a.inner, a.size, a.inner_steps, a.warmup)
        return
    try:
        sizes = [int(s) for s in a.sizes.split(",") if s]
        steps = parse_steps(a.steps, sizes)
    except ValueError:
        fail(f"--sizes and --steps take integers (got --sizes {a.sizes!r} --steps {a.steps!r})")
    if not sizes or min(sizes) < 1 or min(steps.values()) < 1 or a.rounds < 2 or a.warmup < 0 or a.bootstrap < 100:
        fail("--sizes and --steps must be positive, --rounds at least 2, --warmup not negative, --bootstrap >= 100")

    me = [sys.executable, os.path.abspath(__file__), "--warmup", str(a.warmup)]
    info, _, _ = py_result(me + ["--inner", "info"], "the device check")
    tprof = find_binary(a.tprof, ("build", "tools", "tprof", "tprof"), "tprof", "--tprof")
    bench = find_binary(a.capture_bench, ("build", "bench", CPP), CPP, "--capture-bench")
    out_dir = a.keep or tempfile.mkdtemp(prefix="tprof_record_cost_")
    os.makedirs(out_dir, exist_ok=True)
    print("record_cost: " + __doc__.split("\n")[0])
    for line in machine_info(tprof, info):
        print("  " + line)
    notes = []
    try:
        for size in sizes:
            n = steps[size]
            child = me + ["--size", str(size), "--inner-steps", str(n)]
            argv = {
                "none": child + ["--inner", "none"],
                "torch cuda": child + ["--inner", "torch cuda"],
                "tprof record": [tprof, "record", "-o", out_dir, *shlex.split(a.record_args), "--"] + child
                + ["--inner", "none"],
                "none ops": child + ["--inner", "none ops"],
                "torch ops": child + ["--inner", "torch ops"],
                CPP: [bench, "--size", str(size), "--steps", str(n), "--rounds", "1", "--json"],
            }
            order = list(PY_MODES) + [CPP]
            rounds = []
            for r in range(a.rounds):
                row = {}
                for i in range(len(order)):
                    mode = order[(r + i) % len(order)]
                    if mode == CPP:
                        c = cpp_result(argv[CPP])
                        row.update({"C++ none": c["none"], "C++ cupti floor": c["floor"],
                                    "C++ tprof Profiler": c["tprof"],
                                    "C++ tprof Profiler events": c["tprof_events_per_step"]})
                        continue
                    before = set(os.listdir(out_dir))
                    data, rc, tail = py_result(argv[mode], mode)
                    row[mode] = data["ns_per_step"]
                    row[mode + " events"] = data.get("events_per_step")
                    if mode == "tprof record":
                        per_step = trace_events_per_step(out_dir, before, a.warmup + n)
                        row[mode + " events"] = per_step
                        if rc != 0 or per_step is None:
                            said = tail.splitlines()[-1] if tail else "(nothing printed)"
                            notes.append(f"{size}, round {r + 1}: tprof record exit {rc}, "
                                         f"{'no trace written' if per_step is None else 'trace written'}: {said}")
                rounds.append(row)
                print(f"{size}x{size} round {r + 1}/{a.rounds}: " +
                      ", ".join(f"{m} {row[m] / 1000:.2f}" for m in (*PY_MODES, "C++ none", "C++ tprof Profiler")) +
                      " us/step", file=sys.stderr, flush=True)
            report(size, n, rounds, a.bootstrap, a.seed)
    finally:
        if not a.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    for n in notes:
        print("  note: " + n)


if __name__ == "__main__":
    main()
