#!/usr/bin/env python3
"""Writes the synthetic many-rank jobs of tests/data/ranks/ (docs/scale.md, "Stragglers").

Each job is a synchronous data-parallel loop, one Kineto trace per rank:
every step the host reads a batch (a DataLoader scope), launches a GEMM on
stream 7 and an all-reduce on stream 20 that waits for it, then the
optimizer kernel after the all-reduce, and synchronizes. Each wait across
streams is recorded as PyTorch makes it: cudaEventRecord after the launch
waited for, cudaStreamWaitEvent before the launch that waits. The all-reduce
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
  slow_link    24 ranks in tensor-parallel groups of 8 and data-parallel
                groups of 3 (a generated `Spec`, below): rank 13 arrives on
                time, but every collective of its two groups transfers 365 us
                (5% of a step) longer: a slow link, not a straggler
  late_before_window
                8 ranks, one profiling window per step (schedule(wait=1,
                active=1): a step unrecorded between windows; files named as
                tensorboard_trace_handler names them). Rank 3 spends 10 ms
                after its previous step's collective and before the window
                begins: every window starts late on it, and nothing in the
                window explains its lateness
  lost_kernels  8 ranks, six all-reduce buckets a step with sequence numbers
                (`bucket_job`); rank 5's trace lacks one bucket's kernel in
                5 steps: no one is late

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
CROSS_STREAM_US = 2.0  # a kernel that waits for another stream's starts this long after it ends


class Rank:
    """One rank's events on its own clock (µs, `base` + t + `offset`): its
    thread's CPU ops and launch calls (pid and tid 4000 + r), its GPU's
    kernels (pid r % 8, tid the stream)."""

    def __init__(self, r, offset, base=0.0):
        self.r, self.offset, self.base = r, offset, base
        self.events = []
        self.corr = 1000

    def ts(self, t):
        return round(self.base + t + self.offset, 3)

    def cpu(self, cat, nm, ts, dur, args=None):
        e = {"ph": "X", "cat": cat, "name": nm, "pid": 4000 + self.r, "tid": 4000 + self.r,
             "ts": self.ts(ts), "dur": round(dur, 3)}
        if args:
            e["args"] = args
        self.events.append(e)

    def launch(self, ts):
        self.corr += 1
        self.cpu("cuda_runtime", "cudaLaunchKernel", ts, 6.0, {"correlation": self.corr, "External id": self.corr})
        return self.corr

    def wait(self, record_ts, wait_ts):
        """cudaEventRecord after the last launch, then cudaStreamWaitEvent:
        the next launch, on another stream, waits for the recorded kernel."""
        self.cpu("cuda_runtime", "cudaEventRecord", record_ts, 3.0)
        self.cpu("cuda_runtime", "cudaStreamWaitEvent", wait_ts, 2.0)

    def kernel(self, nm, stream, ts, dur, c, extra=None):
        args = {"device": self.r % 8, "stream": stream, "correlation": c, "External id": c}
        args.update(extra or {})
        self.events.append({"ph": "X", "cat": "kernel", "name": nm, "pid": self.r % 8, "tid": stream,
                            "ts": self.ts(ts), "dur": round(dur, 3), "args": args})

    def step(self, number, t, dur):
        self.events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % number,
                            "pid": 4000 + self.r, "tid": 4000 + self.r, "ts": self.ts(t), "dur": round(dur, 3)})

    def doc(self, world_size, events=None):
        """The trace: `events` (default: all of them) by time, and the process names."""
        return {"schemaVersion": 1,
                "distributedInfo": {"backend": "nccl", "rank": self.r, "world_size": world_size},
                "traceEvents": sorted(self.events if events is None else events, key=lambda e: e["ts"]) + [
                    {"ph": "M", "name": "process_name", "pid": 4000 + self.r, "tid": 0, "args": {"name": "python"}},
                    {"ph": "M", "name": "process_name", "pid": self.r % 8, "tid": 0,
                     "args": {"name": "GPU %d" % (self.r % 8)}}]}


def write_gz(path, doc):
    with open(path, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as g:
            g.write(json.dumps(doc, separators=(",", ":")).encode())


def job(name, ranks, late_rank=-1, late_us=0.0, cause="", late_steps=None, old_kineto=False, seed=1, windowed=False,
        steps=STEPS):
    rng = random.Random(seed)
    # Clock offsets (µs): seconds apart; the late rank's puts it early when read raw.
    offsets = [round(rng.uniform(-4e6, 4e6), 3) for _ in range(ranks)]
    if late_rank >= 0:
        offsets[late_rank] = round(min(offsets) - 50_000.0, 3)
    rk = [Rank(r, offsets[r]) for r in range(ranks)]
    start = [0.0] * ranks  # each rank's step start, true time
    window_events = [[] for _ in range(ranks)]  # windowed: each step's events
    for n in range(steps):
        late_now = late_rank >= 0 and (late_steps is None or n in late_steps)
        plan = []
        for r in range(ranks):
            late = late_us if (late_now and r == late_rank) else 0.0
            # "outside": the delay is before the step begins, in no event.
            t = start[r] + (late if cause == "outside" else 0.0)
            loader = 300.0 + rng.uniform(0, 20) + (late if cause == "input" else 0.0)
            host = late if cause == "host" else 0.0
            gemm = 6000.0 + rng.uniform(-40, 40) + (late if cause == "compute" else 0.0)
            t_mm = t + loader + 5 + host
            gemm_start = t_mm + 30
            plan.append((t, loader, host, t_mm, gemm_start, gemm))
        # The all-reduce waits for the GEMM: it starts 2 us after the GEMM
        # ends (the stream wait's latency; at 0 the two rounded timestamps
        # could put the GEMM's end after the all-reduce's start).
        arrive = [p[4] + p[5] + CROSS_STREAM_US for p in plan]
        end = max(arrive) + 800.0  # the transfer, once every rank is there
        for r, (t, loader, host, t_mm, gemm_start, gemm) in enumerate(plan):
            step_no = FIRST_STEP + (2 * n if windowed else n)
            first_event = len(rk[r].events)
            rk[r].cpu("cpu_op" if not old_kineto else "user_annotation", LOADER, t + 2, loader - 2)
            if host:
                rk[r].cpu("user_annotation", "log_metrics", t + loader + 2, host)
            rk[r].cpu("cpu_op", "aten::mm", t_mm, 40.0)
            c = rk[r].launch(t_mm + 10)
            rk[r].kernel(GEMM, 7, gemm_start, gemm, c, {"grid": [132, 1, 1], "block": [256, 1, 1]})
            rk[r].cpu("user_annotation", "nccl:all_reduce", t_mm + 50, 30.0)
            rk[r].cpu("cpu_op", "record_param_comms", t_mm + 52, 26.0)
            rk[r].wait(t_mm + 20, t_mm + 54)
            c = rk[r].launch(t_mm + 60)
            extra = {} if old_kineto else {
                "Collective name": "allreduce", "In msg nelems": 25_000_000, "Out msg nelems": 25_000_000,
                "Group size": ranks, "dtype": "Float", "Process Group Name": "0",
                "Process Group Description": "default_pg"}
            finish = end + rng.uniform(0, 3)
            rk[r].kernel(OLD_NCCL if old_kineto else NEW_NCCL, 20, arrive[r], finish - arrive[r], c, extra)
            rk[r].wait(t_mm + 68, t_mm + 74)
            c = rk[r].launch(t_mm + 80)
            rk[r].kernel(OPTIMIZER, 7, finish + 15, 500.0, c)
            sync_end = finish + 530.0
            rk[r].cpu("cuda_runtime", "cudaStreamSynchronize", t_mm + 100, sync_end - (t_mm + 100))
            step_end = sync_end + 5 + rng.uniform(0, 5)
            rk[r].step(step_no, t, step_end - t)
            start[r] = step_end
            if windowed:
                window_events[r].append(rk[r].events[first_event:])
                start[r] += 7300.0  # the unrecorded step between windows
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, name)
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        files = [("rank-%02d.json.gz" % r, rk[r].events)]
        if windowed:
            files = [("trainer-%d_%d.%d.pt.trace.json.gz" % (r, 4000 + r, 1700000000123 + 250 * w), evs)
                     for w, evs in enumerate(window_events[r])]
        for file_name, evs in files:
            write_gz(os.path.join(out, file_name), rk[r].doc(ranks, evs))


def bucket_job(name, ranks=8, buckets=6, lost_rank=5, lost_steps=(0, 2, 3, 5, 6), seed=7):
    """Data-parallel all-reduce in buckets, as DDP runs it: after the GEMM,
    `buckets` all-reduces of process group "0" back to back (150 µs apart,
    arrivals jittering by 20 µs, each ending 100 µs after its last arrival).
    Current PyTorch: each collective's sequence number ("Seq", counting from
    41 in the window) on the kernel and on its record_param_comms op. Rank
    `lost_rank`'s trace lacks the kernel of bucket 1 in `lost_steps` (the
    GPU records CUPTI dropped; the launch and the op are there): numbered by
    order within the step, its later buckets would pair with the others'
    earlier ones, ending 150 µs apart, within the 1 ms the ends are matched
    by. No rank is late."""
    rng = random.Random(seed)
    offsets = [round(rng.uniform(-4e6, 4e6), 3) for _ in range(ranks)]
    rk = [Rank(r, offsets[r], base=T0) for r in range(ranks)]

    start = [0.0] * ranks
    for n in range(STEPS):
        gemm_end = [start[r] + 335.0 + 6000.0 + rng.uniform(-5, 5) for r in range(ranks)]
        arrive = [[0.0] * buckets for _ in range(ranks)]
        finish = [[0.0] * buckets for _ in range(ranks)]
        for b in range(buckets):
            for r in range(ranks):
                ready = gemm_end[r] + CROSS_STREAM_US + 150.0 * b + rng.uniform(0, 20)
                arrive[r][b] = max(ready, finish[r][b - 1] if b else 0.0)
            end = max(arrive[r][b] for r in range(ranks)) + 100.0
            for r in range(ranks):
                finish[r][b] = end + rng.uniform(0, 3)
        for r in range(ranks):
            t = start[r]
            rk[r].cpu("cpu_op", LOADER, t + 2, 298.0)
            rk[r].cpu("cpu_op", "aten::mm", t + 305, 40.0)
            rk[r].kernel(GEMM, 7, t + 335, gemm_end[r] - (t + 335), rk[r].launch(t + 315),
                   {"grid": [132, 1, 1], "block": [256, 1, 1]})
            rk[r].wait(t + 325, t + 345)
            for b in range(buckets):
                seq = 40 + n * buckets + b + 1
                meta = {"Collective name": "allreduce", "In msg nelems": 6_250_000, "Out msg nelems": 6_250_000,
                        "Group size": ranks, "dtype": "Float", "Process Group Name": "0",
                        "Process Group Description": "default_pg", "Process Group Ranks": str(list(range(ranks))),
                        "Seq": seq}
                t_op = t + 350 + 10 * b
                rk[r].cpu("cpu_op", "record_param_comms", t_op, 8.0, dict(meta, **{"External id": rk[r].corr + 1}))
                c = rk[r].launch(t_op + 1)
                if r == lost_rank and b == 1 and n in lost_steps:
                    continue
                rk[r].kernel(NEW_NCCL, 20, arrive[r][b], finish[r][b] - arrive[r][b], c, meta)
            last = finish[r][buckets - 1]
            rk[r].wait(t + 410, t + 415)
            rk[r].kernel(OPTIMIZER, 7, last + 15, 500.0, rk[r].launch(t + 420))
            rk[r].cpu("cuda_runtime", "cudaStreamSynchronize", t + 430, last + 530.0 - (t + 430))
            step_end = last + 535.0 + rng.uniform(0, 5)
            rk[r].step(FIRST_STEP + n, t, step_end - t)
            start[r] = step_end
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        write_gz(os.path.join(out, "rank-%02d.json.gz" % r), rk[r].doc(ranks))


# ---- Jobs of any size, one rank at a time (issue 39's scale test) ----------
#
# The jobs above are written whole. A generated job (`Spec`) is a rank at a
# time: `rank_trace(spec, r)` makes rank r's trace alone, from the seed, so
# Dask workers each make their ranks where they run and no disk holds the
# whole job. Every rank's timeline still depends on every other's arrivals
# (a collective ends when its last rank arrives); `_plan(spec)` computes
# those, a few floats per rank and step, once per process.
#
# The loop: a DataLoader scope, a GEMM on stream 7; with tensor-parallel
# groups (`tp` > 1) an all-reduce over the rank's TP group (process group
# "tp<k>", ranks k*tp .. k*tp+tp-1, stream 21), then the data-parallel
# all-reduce over every rank (process group "0", stream 20), the optimizer
# kernel after it, a synchronize. Planted stragglers (`late`) are later by
# `late_pct` of the step (1-10%) in every step, for one `cause`:
#   compute  their GEMM runs longer
#   host     their host runs "log_metrics" before launching the step's work
#   input    they wait longer for their batch (DataLoader)
#   network  they arrive on time, but every collective of a group they are
#            in transfers `late_pct` of a step longer (a slow link or NIC).
#            Only readable with groups that leave it out: `dp_groups`
#            makes the data-parallel all-reduce one group per local rank
#            ("dp<j>": ranks j, j+tp, ...), as Megatron lays them out
# `seq` puts each collective's sequence number in its group ("Seq") on its
# kernel, as current PyTorch does.


class Spec:
    def __init__(self, ranks, late=(), cause="compute", late_pct=5.0, tp=1, steps=STEPS, seed=1, dp_groups=False,
                 seq=False):
        self.ranks, self.late, self.cause = ranks, tuple(sorted(late)), cause
        self.late_pct, self.tp, self.steps, self.seed = late_pct, tp, steps, seed
        self.dp_groups = dp_groups and tp > 1
        self.seq = seq

    def key(self):
        return (self.ranks, self.late, self.cause, self.late_pct, self.tp, self.steps, self.seed, self.dp_groups)

    def dp_group(self, r):
        """Rank r's data-parallel group: its local rank's with dp_groups, else every rank's ("0")."""
        return r % self.tp if self.dp_groups else None


STEP_US = 7300.0  # about one step of this loop, for late_pct
_plans = {}


def _plan(spec):
    """Per step: each rank's (start, loader, host, gemm, arrival at the TP
    all-reduce, its end, arrival at the DP all-reduce, its end, step end)."""
    key = spec.key()
    if key in _plans:
        return _plans[key]
    late_us = spec.late_pct / 100.0 * STEP_US
    start = [0.0] * spec.ranks
    steps = []
    for n in range(spec.steps):
        rows = []
        for r in range(spec.ranks):
            rng = random.Random(spec.seed * 1_000_003 + n * 65_537 + r)
            late = late_us if r in spec.late else 0.0
            loader = 300.0 + rng.uniform(0, 20) + (late if spec.cause == "input" else 0.0)
            host = late if spec.cause == "host" else 0.0
            gemm = 6000.0 + rng.uniform(-40, 40) + (late if spec.cause == "compute" else 0.0)
            t_mm = start[r] + loader + 5 + host
            rows.append([start[r], loader, host, t_mm, t_mm + 30, gemm, rng.uniform(0, 3), rng.uniform(0, 3),
                         rng.uniform(0, 5)])
        arrive_tp = [row[4] + row[5] + CROSS_STREAM_US for row in rows]
        tp_end = list(arrive_tp)
        slow_net = set(spec.late) if spec.cause == "network" else set()

        def transfer(base, members):
            return base + (late_us if slow_net.intersection(members) else 0.0)

        if spec.tp > 1:
            for g in range(0, spec.ranks, spec.tp):
                members = range(g, min(g + spec.tp, spec.ranks))
                end = max(arrive_tp[g:g + spec.tp]) + transfer(300.0, members)
                for r in members:
                    tp_end[r] = end + rows[r][6]
        arrive_dp = [tp_end[r] + (20.0 if spec.tp > 1 else 0.0) for r in range(spec.ranks)]
        dp_members = {}
        for r in range(spec.ranks):
            dp_members.setdefault(spec.dp_group(r), []).append(r)
        dp_end = {j: max(arrive_dp[r] for r in m) + transfer(800.0, m) for j, m in dp_members.items()}
        out = []
        for r, row in enumerate(rows):
            finish = dp_end[spec.dp_group(r)] + row[7]
            step_end = finish + 530.0 + 5 + row[8]
            out.append((row[0], row[1], row[2], row[3], row[4], row[5], arrive_tp[r], tp_end[r], arrive_dp[r], finish,
                        step_end))
            start[r] = step_end
        steps.append(out)
    _plans.clear()  # one spec at a time per process
    _plans[key] = steps
    return steps


def rank_trace(spec, r):
    """Rank r's trace of the generated job, as gzip bytes (deterministic)."""
    rng = random.Random(spec.seed * 7919 + r)
    offset = round(rng.uniform(-4e6, 4e6), 3)
    if r in spec.late:
        offset = -4.05e6 - r  # read raw, it would seem to arrive first
    rk = Rank(r, offset, base=T0)

    def comm(pg, desc, size, stream, t_launch, arrive, end, n):
        rk.cpu("cpu_op", "record_param_comms", t_launch - 8, 26.0)
        c = rk.launch(t_launch)
        meta = {"Collective name": "allreduce", "In msg nelems": 25_000_000, "Out msg nelems": 25_000_000,
                "Group size": size, "dtype": "Float", "Process Group Name": pg, "Process Group Description": desc}
        if spec.seq:  # one collective of each group a step; the window starts at its 101st
            meta["Seq"] = 100 + n + 1
        rk.kernel(NEW_NCCL, stream, arrive, end - arrive, c, meta)

    for n, row in enumerate(_plan(spec)):
        (t, loader, host, t_mm, gemm_start, gemm, arrive_tp, tp_end, arrive_dp, finish, step_end) = row[r]
        rk.cpu("cpu_op", LOADER, t + 2, loader - 2)
        if host:
            rk.cpu("user_annotation", "log_metrics", t + loader + 2, host)
        rk.cpu("cpu_op", "aten::mm", t_mm, 40.0)
        rk.kernel(GEMM, 7, gemm_start, gemm, rk.launch(t_mm + 10), {"grid": [132, 1, 1], "block": [256, 1, 1]})
        if spec.tp > 1:
            g = r // spec.tp
            rk.wait(t_mm + 20, t_mm + 30)
            comm("tp%d" % g, "tensor_parallel", spec.tp, 21, t_mm + 45, arrive_tp, tp_end, n)
            rk.wait(t_mm + 53, t_mm + 56)
        else:
            rk.wait(t_mm + 20, t_mm + 56)
        if spec.dp_groups:
            j = spec.dp_group(r)
            comm("dp%d" % j, "data_parallel", len(range(j, spec.ranks, spec.tp)), 20, t_mm + 60, arrive_dp, finish, n)
        else:
            comm("0", "default_pg", spec.ranks, 20, t_mm + 60, arrive_dp, finish, n)
        rk.wait(t_mm + 68, t_mm + 74)
        rk.kernel(OPTIMIZER, 7, finish + 15, 500.0, rk.launch(t_mm + 80))
        rk.cpu("cuda_runtime", "cudaStreamSynchronize", t_mm + 100, finish + 530.0 - (t_mm + 100))
        rk.step(FIRST_STEP + n, t, step_end - t)
    doc = rk.doc(spec.ranks)
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=1, mtime=0)


def summarize_generated(spec, r):
    """On a worker: rank r's trace made, written to the worker's temporary
    directory, summarized by tprof, deleted; its summary returned."""
    import tempfile

    from tprof import _tprof

    fd, path = tempfile.mkstemp(prefix="rank-%05d-" % r, suffix=".json.gz")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(rank_trace(spec, r))
        summary, _note = _tprof.summarize_rank(path)
    finally:
        os.unlink(path)
    # The file name the view shows, whatever the temporary one was.
    return summary.replace(os.path.basename(path), "rank-%05d.json.gz" % r)


def main():
    job("balanced", 8, seed=1)
    job("late_compute", 16, late_rank=11, late_us=12000.0, cause="compute", seed=2)
    job("late_input", 8, late_rank=2, late_us=9000.0, cause="input", old_kineto=True, seed=3)
    job("late_host", 8, late_rank=6, late_us=15000.0, cause="host", seed=4)
    job("late_some", 8, late_rank=4, late_us=12000.0, cause="compute", late_steps={2, 5}, seed=5)
    job("late_before_window", 8, late_rank=3, late_us=10000.0, cause="outside", seed=6, windowed=True, steps=5)
    bucket_job("lost_kernels")
    write_spec("slow_link", Spec(24, late=[13], cause="network", late_pct=5.0, tp=8, seed=3, dp_groups=True))


def write_spec(name, spec):
    """A generated job (`Spec`) written whole, one file per rank."""
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    os.makedirs(out, exist_ok=True)
    for r in range(spec.ranks):
        with open(os.path.join(out, "rank-%02d.json.gz" % r), "wb") as f:
            f.write(rank_trace(spec, r))


if __name__ == "__main__":
    main()
