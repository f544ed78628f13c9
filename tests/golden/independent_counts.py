#!/usr/bin/env python3
"""Recomputes, with nothing but Python's json module, the numbers that
tests/golden/public_traces_test.cc hard-codes, so that the golden files are
checked against something other than tprof itself.

    python3 tests/golden/independent_counts.py [tests/data]

For each trace it prints:
  events          len(traceEvents) (or of the legacy array)
  by_cat          counts of the "cat" field (None: no cat); ph "M" and the
                  "[memory]" instants are counted separately
  device_ns       sum of "dur" of X events whose cat is device work, which
                  tprof's "Self CUDA time total" is: kernel/Kernel,
                  gpu_memcpy/Memcpy, gpu_memset/Memset (gpu_user_annotation
                  is excluded, as in torch >= 2.4; so is cuda_sync, the host
                  waiting, which torch would count: docs/torch-table-semantics.md §6)
  kernel_ns       the same sum over kernel/Kernel only
  per_kernel      for names matching GEMM patterns: (count, sum dur ns)
  steps           per ProfilerStep#N on a CPU thread: dur, GPU busy (union of
                  kernel/memcpy/memset intervals clipped to the step) and
                  launches (runtime or driver calls with ts inside the step
                  whose correlation id matches a device activity)
Durations are parsed as Decimal and converted to integer ns exactly.
"""
import collections
import gzip
import json
import os
import re
import sys
from decimal import Decimal

DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data")

TRACES = [
    "public/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz",
    "public/hta/triton_example/triton_example.json.gz",
    "public/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "kineto-public/hta_rank_non_gpu_2022-08.json.gz",
    "torch-1.13/mlp/cycle0.json",
]

DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
BUSY_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
GEMM = re.compile(r"gemm|cutlass|Cijk", re.IGNORECASE)


def ns(us):
    v = Decimal(str(us)) * 1000
    assert v == v.to_integral_value(), us
    return int(v)


def union_within(intervals, lo, hi):
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo))
    total, cur_a, cur_b = 0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def main():
    for rel in TRACES:
        path = os.path.join(DATA, rel)
        opener = gzip.open if rel.endswith(".gz") else open
        with opener(path, "rt") as f:
            doc = json.load(f, parse_float=Decimal)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        by_cat = collections.Counter()
        device_ns = kernel_ns = 0
        per_kernel = collections.defaultdict(lambda: [0, 0])
        busy, device_corr, steps, launches = [], set(), [], []
        for e in events:
            ph, cat, name = e.get("ph"), e.get("cat"), e.get("name", "")
            if ph == "M":
                by_cat["<metadata>"] += 1
                continue
            if name == "[memory]":
                by_cat["<memory>"] += 1
                continue
            by_cat[cat] += 1
            if ph != "X":
                continue
            ts, dur = ns(e["ts"]), ns(e.get("dur", 0))
            args = e.get("args") or {}
            if cat in DEVICE_CATS:
                device_ns += dur
            if cat in KERNEL_CATS:
                kernel_ns += dur
                if GEMM.search(name):
                    per_kernel[name][0] += 1
                    per_kernel[name][1] += dur
            if cat in BUSY_CATS:
                busy.append((ts, ts + dur))
                if "correlation" in args:
                    device_corr.add(args["correlation"])
            if cat in LAUNCH_CATS and "correlation" in args:
                launches.append((ts, args["correlation"]))
            if name.startswith("ProfilerStep#") and cat != "gpu_user_annotation":
                steps.append((name, ts, dur))
        print(f"== {rel}")
        print(f"  events      {len(events)}")
        print(f"  by_cat      {dict(sorted(by_cat.items(), key=lambda kv: str(kv[0])))}")
        print(f"  device_ns   {device_ns}")
        print(f"  kernel_ns   {kernel_ns}")
        for name, (count, total) in sorted(per_kernel.items()):
            print(f"  gemm        count={count} ns={total} {name}")
        for name, ts, dur in steps:
            n = sum(1 for t, c in launches if ts <= t < ts + dur and c in device_corr)
            print(f"  step        {name} dur_ns={dur} gpu_busy_ns={union_within(busy, ts, ts + dur)} launches={n}")


if __name__ == "__main__":
    main()
