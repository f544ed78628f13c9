#!/usr/bin/env python3
"""Writes the synthetic many-rank jobs of tests/data/ranks/ (docs/scale.md, "Stragglers").

Each job is a synchronous data-parallel loop, one Kineto trace per rank:
every step the host reads a batch (a DataLoader scope), launches a GEMM on
stream 7 and an all-reduce on stream 20 that waits for it, then the
optimizer kernel after the all-reduce, and synchronizes. The all-reduce
ends at the same instant on every rank: when the last rank has arrived,
plus the transfer. Every rank's clock is off by its own amount (up to
seconds), so raw timestamps cannot be compared across ranks.

  balanced      8 ranks, arrivals jitter by +-40 us: no straggler
  late_compute 16 ranks, rank 11's GEMM runs 12 ms longer every step
  late_input    8 ranks, rank 2 waits 9 ms longer for its batch every step
                (old Kineto: no process group on the kernels, NCCL 2.18 names)
  late_host     8 ranks, rank 6's host spends 15 ms in "log_metrics" before
                launching the step's work, every step
  late_some     8 ranks, rank 4 is 12 ms late in 2 of 8 steps only: no straggler

The late rank's clock is set so that, read raw, it would seem to arrive
first. Deterministic: the same bytes every run (gzip mtime 0).

  tests/data/ranks/make_jobs.py            # rewrites every job next to this file
"""
import gzip
import json
import os
import random

T0 = 1_700_000_000_000_000.0  # µs, a Kineto-like epoch base
STEPS = 8
FIRST_STEP = 10
GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn"
OPTIMIZER = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4> >"
NEW_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
OLD_NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def job(name, ranks, late_rank=-1, late_us=0.0, cause="", late_steps=None, old_kineto=False, seed=1):
    rng = random.Random(seed)
    # Clock offsets (µs): seconds apart; the late rank's puts it early when read raw.
    offsets = [round(rng.uniform(-4e6, 4e6), 3) for _ in range(ranks)]
    if late_rank >= 0:
        offsets[late_rank] = round(min(offsets) - 50_000.0, 3)
    events = [[] for _ in range(ranks)]
    corr = [1000] * ranks

    def cpu(r, cat, nm, ts, dur, args=None):
        e = {"ph": "X", "cat": cat, "name": nm, "pid": 4000 + r, "tid": 4000 + r,
             "ts": round(ts + offsets[r], 3), "dur": round(dur, 3)}
        if args:
            e["args"] = args
        events[r].append(e)

    def launch(r, ts):
        corr[r] += 1
        cpu(r, "cuda_runtime", "cudaLaunchKernel", ts, 6.0, {"correlation": corr[r], "External id": corr[r]})
        return corr[r]

    def kernel(r, nm, stream, ts, dur, c, extra=None):
        args = {"device": r % 8, "stream": stream, "correlation": c, "External id": c}
        args.update(extra or {})
        events[r].append({"ph": "X", "cat": "kernel", "name": nm, "pid": r % 8, "tid": stream,
                          "ts": round(ts + offsets[r], 3), "dur": round(dur, 3), "args": args})

    start = [0.0] * ranks  # each rank's step start, true time
    for n in range(STEPS):
        late_now = late_rank >= 0 and (late_steps is None or n in late_steps)
        plan = []
        for r in range(ranks):
            late = late_us if (late_now and r == late_rank) else 0.0
            t = start[r]
            loader = 300.0 + rng.uniform(0, 20) + (late if cause == "input" else 0.0)
            host = late if cause == "host" else 0.0
            gemm = 6000.0 + rng.uniform(-40, 40) + (late if cause == "compute" else 0.0)
            t_mm = t + loader + 5 + host
            gemm_start = t_mm + 30
            plan.append((t, loader, host, t_mm, gemm_start, gemm))
        arrive = [p[4] + p[5] for p in plan]  # the all-reduce waits for the GEMM
        end = max(arrive) + 800.0  # the transfer, once every rank is there
        for r, (t, loader, host, t_mm, gemm_start, gemm) in enumerate(plan):
            step_no = FIRST_STEP + n
            cpu(r, "cpu_op" if not old_kineto else "user_annotation", LOADER, t + 2, loader - 2)
            if host:
                cpu(r, "user_annotation", "log_metrics", t + loader + 2, host)
            cpu(r, "cpu_op", "aten::mm", t_mm, 40.0)
            c = launch(r, t_mm + 10)
            kernel(r, GEMM, 7, gemm_start, gemm, c, {"grid": [132, 1, 1], "block": [256, 1, 1]})
            cpu(r, "user_annotation", "nccl:all_reduce", t_mm + 50, 30.0)
            cpu(r, "cpu_op", "record_param_comms", t_mm + 52, 26.0)
            c = launch(r, t_mm + 60)
            extra = {} if old_kineto else {
                "Collective name": "allreduce", "In msg nelems": 25_000_000, "Out msg nelems": 25_000_000,
                "Group size": ranks, "dtype": "Float", "Process Group Name": "0",
                "Process Group Description": "default_pg"}
            finish = end + rng.uniform(0, 3)
            kernel(r, OLD_NCCL if old_kineto else NEW_NCCL, 20, arrive[r], finish - arrive[r], c, extra)
            c = launch(r, t_mm + 80)
            kernel(r, OPTIMIZER, 7, finish + 15, 500.0, c)
            sync_end = finish + 530.0
            cpu(r, "cuda_runtime", "cudaStreamSynchronize", t_mm + 100, sync_end - (t_mm + 100))
            step_end = sync_end + 5 + rng.uniform(0, 5)
            events[r].append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % step_no,
                              "pid": 4000 + r, "tid": 4000 + r, "ts": round(t + offsets[r], 3),
                              "dur": round(step_end - t, 3)})
            start[r] = step_end
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, name)
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        doc = {"schemaVersion": 1,
               "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
               "traceEvents": sorted(events[r], key=lambda e: e["ts"]) + [
                   {"ph": "M", "name": "process_name", "pid": 4000 + r, "tid": 0, "args": {"name": "python"}},
                   {"ph": "M", "name": "process_name", "pid": r % 8, "tid": 0, "args": {"name": "GPU %d" % (r % 8)}}]}
        data = json.dumps(doc, separators=(",", ":")).encode()
        with open(os.path.join(out, "rank-%02d.json.gz" % r), "wb") as f:
            with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as g:
                g.write(data)


def main():
    job("balanced", 8, seed=1)
    job("late_compute", 16, late_rank=11, late_us=12000.0, cause="compute", seed=2)
    job("late_input", 8, late_rank=2, late_us=9000.0, cause="input", old_kineto=True, seed=3)
    job("late_host", 8, late_rank=6, late_us=15000.0, cause="host", seed=4)
    job("late_some", 8, late_rank=4, late_us=12000.0, cause="compute", late_steps={2, 5}, seed=5)


if __name__ == "__main__":
    main()
