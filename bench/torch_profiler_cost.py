"""torch.profiler's cost on the blog's matmul_add, for bench/cuda_capture_bench's comparison.

    python3 bench/torch_profiler_cost.py [--size 64] [--steps 2000] [--rounds 7]

Each round times `steps` calls of torch.add(torch.matmul(x, w), b) (bf16,
CUDA) with no profiler and inside torch.profiler.profile(activities=[CPU,
CUDA]), back to back; prints the medians of the per-round means and the
added cost per step. Needs PyTorch with CUDA and a GPU.
"""
import argparse
import statistics
import time

import torch


def timed(fn, steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    x, w, b = (torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def step():
        with torch.profiler.record_function("matmul_add"):
            torch.add(torch.matmul(x, w), b)

    timed(step, a.steps)
    none, prof = [], []
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    for _ in range(a.rounds):
        none.append(timed(step, a.steps))
        with torch.profiler.profile(activities=acts):
            prof.append(timed(step, a.steps))
    n, p = statistics.median(none), statistics.median(prof)
    print(f"torch {torch.__version__} matmul_add {a.size}x{a.size} bf16, {a.steps} steps x {a.rounds} rounds")
    print(f"  none            {n:10.1f} ns/step")
    print(f"  torch.profiler  {p:10.1f} ns/step")
    print(f"  added by torch.profiler: {p - n:.1f} ns/step")


if __name__ == "__main__":
    main()
