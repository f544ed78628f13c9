"""What a profiler adds to the blog's PyTorch loop: none, torch.profiler, tprof record.

    python3 bench/record_cost.py [--size 64] [--steps 5000] [--rounds 7] [--warmup 500]
                                 [--tprof build/tools/tprof/tprof] [--record-args "--gzip"] [--keep DIR]

The same loop, torch.add(torch.matmul(x, w), b) inside
record_function("matmul_add") on size x size bf16 CUDA tensors, runs in a
fresh child process per round and mode:

  none            python3 record_cost.py --inner none
  torch.profiler  python3 record_cost.py --inner torch   (profile(activities=[CPU, CUDA]))
  tprof record    tprof record -o DIR -- python3 record_cost.py --inner none

Each child builds its tensors, starts its profiler (torch's; tprof's window
is already open: it starts when the program initializes CUDA), runs
--warmup untimed steps, then times --steps steps between two
torch.cuda.synchronize() calls (the device drained inside the timing, so
device work a profiler delays counts) and prints its mean ns per step.
Rounds run the three modes in a rotating order; the figures are medians
over rounds. Printed: machine info, ns/step and added us/step per mode, and
the ratio of what tprof record adds to what torch.profiler adds (target
<= 0.5, bench/README.md).

Needs PyTorch with CUDA, a GPU, and a tprof built with CUPTI; without a
GPU it says why and exits 2. It replaces bench/torch_profiler_cost.py
(none against torch.profiler, one process); bench/cuda_capture_bench.cc
is the C++ side (tprof's Profiler API against a bare CUPTI subscriber).
"""
import argparse
import json
import os
import platform
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
MODES = ("none", "torch.profiler", "tprof record")


def fail(msg, code=2):
    print(f"record_cost: {msg}", file=sys.stderr)
    sys.exit(code)


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

    def step():
        with torch.profiler.record_function("matmul_add"):
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

    if mode == "torch":
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts):
            ns = run()
    else:
        ns = run()
    # Printed before the profiler's teardown and the process's exit, so a
    # failure there still leaves the measurement.
    print(INNER_TAG + json.dumps({"mode": mode, "ns_per_step": ns, "steps": steps}), flush=True)


# --- the parent: rounds, modes, the table ------------------------------------


def child_result(argv, what):
    """Runs argv; returns (parsed inner line or None, exit status, output tail)."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = next((l for l in p.stdout.splitlines() if l.startswith(INNER_TAG)), None)
    data = json.loads(line[len(INNER_TAG):]) if line else None
    if data is None:
        tail = p.stdout[-1500:]
        # The child's own refusal (no torch, no device) is the message.
        refusal = next((l for l in p.stdout.splitlines() if l.startswith("record_cost: ")), None)
        if refusal:
            fail(refusal[len("record_cost: "):])
        fail(f"{what} printed no measurement (exit {p.returncode}):\n{tail}", 1)
    # What the child said besides its measurement (tprof record's messages).
    said = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith(INNER_TAG)]
    return data, p.returncode, "\n".join(said[-3:])


def find_tprof(given):
    for cand in ([given] if given else [os.path.join(ROOT, "build", "tools", "tprof", "tprof"), shutil.which("tprof")]):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail("no tprof binary: build it (cmake --build build --target tprof) or name it with --tprof")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--tprof", default="", help="the tprof binary (default: build/tools/tprof/tprof, else PATH)")
    ap.add_argument("--record-args", default="", help="extra tprof record options, e.g. \"--gzip\"")
    ap.add_argument("--keep", default="", help="keep tprof's traces in this directory")
    ap.add_argument("--inner", choices=["none", "torch", "info"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if min(a.size, a.steps, a.rounds) < 1 or a.warmup < 0:
        fail("--size, --steps and --rounds must be positive, --warmup not negative")
    if a.inner:
        inner(a.inner, a.size, a.steps, a.warmup)
        return

    me = [sys.executable, os.path.abspath(__file__), "--size", str(a.size), "--steps", str(a.steps),
          "--warmup", str(a.warmup)]
    info, _, _ = child_result(me + ["--inner", "info"], "the device check")
    tprof = find_tprof(a.tprof)
    out_dir = a.keep or tempfile.mkdtemp(prefix="tprof_record_cost_")
    os.makedirs(out_dir, exist_ok=True)
    argv = {
        "none": me + ["--inner", "none"],
        "torch.profiler": me + ["--inner", "torch"],
        "tprof record": [tprof, "record", "-o", out_dir, *shlex.split(a.record_args), "--"] + me + ["--inner", "none"],
    }
    ns = {m: [] for m in MODES}
    notes = []
    try:
        for r in range(a.rounds):
            for i in range(len(MODES)):
                mode = MODES[(r + i) % len(MODES)]
                if mode == "tprof record":
                    before = set(os.listdir(out_dir))
                data, rc, tail = child_result(argv[mode], mode)
                ns[mode].append(data["ns_per_step"])
                if mode == "tprof record":
                    written = set(os.listdir(out_dir)) - before
                    if rc != 0 or not written:
                        said = tail.splitlines()[-1] if tail else "(nothing printed)"
                        notes.append(f"round {r + 1}: tprof record exit {rc}, "
                                     f"{'no trace written' if not written else 'trace written'}: {said}")
                print(f"round {r + 1}/{a.rounds}  {mode:15s} {data['ns_per_step']:12.1f} ns/step",
                      file=sys.stderr, flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(out_dir, ignore_errors=True)

    med = {m: statistics.median(v) for m, v in ns.items()}
    base = med["none"]
    print(f"record_cost: torch.add(torch.matmul(x, w), b), {a.size}x{a.size} bf16, "
          f"{a.steps} timed steps after {a.warmup}, {a.rounds} rounds, median of per-round means")
    for line in machine_info(tprof, info):
        print("  " + line)
    print()
    print(f"  {'mode':16s} {'ns/step':>12s} {'min':>12s} {'max':>12s} {'added us/step':>14s}")
    for m in MODES:
        added = "" if m == "none" else f"{(med[m] - base) / 1000:14.2f}"
        print(f"  {m:16s} {med[m]:12.1f} {min(ns[m]):12.1f} {max(ns[m]):12.1f} {added:>14s}")
    torch_added = med["torch.profiler"] - base
    tprof_added = med["tprof record"] - base
    if torch_added > 0:
        ratio = tprof_added / torch_added
        verdict = "met" if ratio <= 0.5 else "NOT met"
        print(f"\n  tprof record / torch.profiler (added per step): {ratio:.2f}  (target <= 0.5: {verdict})")
    else:
        print("\n  torch.profiler added nothing measurable: no ratio")
    for n in notes:
        print("  note: " + n)


if __name__ == "__main__":
    main()
