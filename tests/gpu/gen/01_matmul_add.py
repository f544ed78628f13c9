"""The blog's 01_matmul_add.py (trace-reading.md, "The experiment"), as run on
the lent GPU machine to record the real PyTorch traces under
tests/data/gpu/. torch.add(torch.matmul(x, w), b), x, w, b all size x size;
schedule wait=0, warmup=1, active=20, repeat=1.

    python3 01_matmul_add.py --size 64 [--dtype bf16] [--compile] [--warmup]
"""
import argparse
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def matmul_add(x, w, b):
    return torch.add(torch.matmul(x, w), b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup", action="store_true")
    p.add_argument("--trace_dir", default="./traces/01_matmul_add")
    a = p.parse_args()

    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    dev = "cuda"
    x = torch.randn(a.size, a.size, device=dev, dtype=dtype)
    w = torch.randn(a.size, a.size, device=dev, dtype=dtype)
    b = torch.randn(a.size, a.size, device=dev, dtype=dtype)
    fn = torch.compile(matmul_add) if a.compile else matmul_add
    if a.compile:
        fn(x, w, b)  # compile outside the profile, as the post does
        torch.cuda.synchronize()
    if a.warmup:
        for _ in range(3):
            fn(x, w, b)
        torch.cuda.synchronize()

    os.makedirs(a.trace_dir, exist_ok=True)
    stem = f"{a.size}_{a.dtype}_{'warm' if a.warmup else 'cold'}_{'compile' if a.compile else 'eager'}"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=20, repeat=1)) as prof:
        for _ in range(21):
            with record_function("matmul_add"):
                fn(x, w, b)
            prof.step()
    prof.export_chrome_trace(os.path.join(a.trace_dir, stem + ".json"))
    with open(os.path.join(a.trace_dir, stem + ".txt"), "w") as f:
        f.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))
        f.write("\n")


if __name__ == "__main__":
    main()
