"""Fresh ground truth for `tprof table`: profile small random workloads with
the installed PyTorch and write, per profiling cycle, both trace formats and
torch's own printed `table()` outputs.

    /usr/bin/python3 tests/integration/torch_tables.py --out DIR --seed N

Everything random (sizes, models, profiler options, table() arguments) is
drawn from --seed, so a failing seed can be replayed; the timings in the
tables are measured anew on every run, which is fine: tprof only
re-aggregates the times torch itself wrote into the traces.

Per case DIR/CASE/ holds
  legacy.json   prof.export_chrome_trace(): this torch has no Kineto, so it
                is the legacy array (docs/torch-trace-formats.md section 1)
  kineto.json   the same cycle laid out as torch 1.13 + libkineto (2022)
                writes it (section 2), built here from the profiler's raw
                records, prof.profiler.kineto_results.events()
  tNN.txt       prof.key_averages(...).table(...) / prof.events().table(...)
and DIR/manifest.json lists every table with its arguments and the traces
that must reproduce it ("traces"), plus why a format cannot ("not_from").

Deliberate differences from a real torch 1.13 + libkineto file:
  * "dur" is duration_us() = floor((end_ns - start_ns) / 1000), the value
    key_averages() uses; libkineto wrote floor(end_ns/1000) - floor(start_ns/1000),
    which is 1 us larger for about a third of the ops (section 2.5), so a
    real file cannot reproduce table() to the microsecond.
  * KinetoEvent exposes no OS thread id: profiler thread 1 (the main thread)
    gets tid = pid, as on Linux; thread k >= 2 gets the synthetic pid + k.
  * python_function events (with_stack=True) are not written: the raw
    records behind them are not exposed to Python.
  * Names are JSON-escaped (libkineto of that era wrote them raw).
"""
import argparse
import json
import os
import random
import sys
import warnings

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

USER_SCOPE = 7  # at::RecordScope::USER_SCOPE: record_function labels -> "user_annotation"
SPAN = "PyTorch Profiler"
# c10::DeviceType enum values ("Device Type" of [memory] events).
DEVICE_TYPE = {"CPU": 0, "CUDA": 1, "MKLDNN": 2, "OPENGL": 3, "OPENCL": 4, "IDEEP": 5, "HIP": 6}

# Every key table() documents, plus the self_* totals; the CUDA ones are all
# 0 on CPU, which exercises the stable (first-appearance) order of ties.
SORT_KEYS = [None, "cpu_time", "cpu_time_total", "self_cpu_time_total", "cpu_memory_usage",
             "self_cpu_memory_usage", "count", "cuda_time", "cuda_time_total", "self_cuda_time_total",
             "cuda_memory_usage", "self_cuda_memory_usage"]
# Never "": `tprof table --header ""` means "no header", torch would print an empty line.
HEADERS = ["Integration run", "ünïcødé header → σ", "  two  spaces  ", "x" * 90]
# record_function labels of the "ops" case: non-ASCII (widths count code
# points), wider than the default name column, and with JSON-special
# characters. torch's legacy exporter writes names unescaped: a raw quote
# stays comparable (tprof reads a quote not followed by , : } ] as part of
# the string), but "tab\there" is read back, as JSON says, with a tab in it,
# so a cycle that may use that label is compared with its Kineto trace only.
LABELS = ["stage_a", "préparation", "σ→µ", "a_rather_long_label_that_is_wider_than_the_default_name_column",
          'say "hi"', "tab\\there"]


def legacy_safe(name):
    return "\\" not in name


# ---------------------------------------------------------------------------
# Workloads. Each draws its shape from `rng` and returns (step, description,
# extras): step(k) runs one iteration, extras holds profiler options it wants
# ("with_stack") and the labels it uses ("labels").


def workload_matmul_add(rng):
    """The blog example: torch.add(torch.matmul(x, w), b) under record_function."""
    n = rng.choice([8, 16, 32, 64, 96])
    dtype = rng.choice([torch.float32, torch.float32, torch.bfloat16])
    shape = (rng.randint(2, 4), n, n) if rng.random() < 0.3 else (n, n)
    x, w = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    b = torch.randn(n, dtype=dtype)

    def fn():
        return torch.add(torch.matmul(x, w), b)

    for _ in range(rng.randint(0, 2)):  # warm or cold, unprofiled
        fn()

    def step(_):
        with record_function("matmul_add"):
            fn()

    desc = "matmul_add shape=%s dtype=%s" % (list(shape), dtype)
    return step, desc, {}


def workload_mlp(rng):
    """A small MLP training step: forward, backward, optimizer."""
    width = [rng.randint(4, 48) for _ in range(rng.randint(2, 4))]
    act = rng.choice([nn.ReLU, nn.Tanh, nn.GELU, nn.Sigmoid])
    layers = []
    for i in range(len(width) - 1):
        layers.append(nn.Linear(width[i], width[i + 1]))
        if i + 2 < len(width):
            layers.append(act())
    model = nn.Sequential(*layers)
    batch = rng.randint(2, 24)
    x = torch.randn(batch, width[0])
    if rng.random() < 0.5:
        loss_fn = nn.CrossEntropyLoss()
        y = torch.randint(0, width[-1], (batch,))
    else:
        loss_fn = nn.MSELoss()
        y = torch.randn(batch, width[-1])
    if rng.random() < 0.5:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=rng.choice([0.0, 0.9]))
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(_):
        with record_function("forward"):
            loss = loss_fn(model(x), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer_step"):
            opt.step()

    desc = "mlp widths=%s act=%s batch=%d loss=%s opt=%s" % (
        width, act.__name__, batch, type(loss_fn).__name__, type(opt).__name__)
    return step, desc, {"with_stack": rng.random() < 0.4}


def workload_ops(rng):
    """Random elementwise / reduction / shape ops in nested labels, with
    tensors allocated and freed between ops (top-level [memory] rows)."""
    labels = rng.sample(LABELS, 3)
    n = rng.randint(4, 64)
    plan = [rng.choice(["add", "mul", "relu", "sigmoid", "exp", "sum", "mean", "amax", "softmax", "cat",
                        "clone", "t_contig", "cumsum", "sort", "where", "sum_dim", "norm"])
            for _ in range(rng.randint(4, 12))]
    nest = [rng.randint(0, 2) for _ in plan]

    def apply(op, a, b):
        if op == "add":
            return a + b
        if op == "mul":
            return a * b
        if op == "relu":
            return torch.relu(a)
        if op == "sigmoid":
            return torch.sigmoid(a)
        if op == "exp":
            return torch.exp(a)
        if op == "sum":
            return a.sum()
        if op == "mean":
            return a.mean()
        if op == "amax":
            return a.amax(dim=0)
        if op == "softmax":
            return torch.softmax(a, dim=-1)
        if op == "cat":
            return torch.cat([a, b])
        if op == "clone":
            return a.clone()
        if op == "t_contig":
            return a.t().contiguous()
        if op == "cumsum":
            return torch.cumsum(a, dim=1)
        if op == "sort":
            return torch.sort(a, dim=1).values
        if op == "where":
            return torch.where(a > 0, a, b)
        if op == "sum_dim":
            return a.sum(dim=1)
        return torch.linalg.norm(a)

    def step(_):
        a = torch.randn(n, n)
        b = torch.ones(n, n)
        keep = []
        for op, depth in zip(plan, nest):
            if depth == 0:
                keep.append(apply(op, a, b))
            elif depth == 1:
                with record_function(labels[0]):
                    keep.append(apply(op, a, b))
            else:
                with record_function(labels[1]):
                    with record_function(labels[2]):
                        keep.append(apply(op, a, b))
            if len(keep) > 2:
                del keep[0]  # a free outside any op
        del a, b, keep

    desc = "ops n=%d plan=%s nest=%s labels=%s" % (n, plan, nest, labels)
    return step, desc, {"labels": labels}


WORKLOADS = [("matmul_add", workload_matmul_add), ("mlp", workload_mlp), ("ops", workload_ops)]


# ---------------------------------------------------------------------------
# Kineto-format writer.


def signed_device_index(i):
    """c10::DeviceIndex is an int8 (-1 = none, as for CPU); KinetoEvent
    returns it as an unsigned byte."""
    return i - 256 if i >= 128 else i


def jdump(v):
    return json.dumps(v, ensure_ascii=False)


def memory_details(result):
    """(ptr, total_allocated, total_reserved) for each [memory] record, in
    result.events() order, from the event tree's Allocation nodes (the
    KinetoEvent itself only has nbytes). Both lists are in start order; a
    pairing that does not match is a hard error."""
    allocs = []
    todo = list(result.experimental_event_tree())
    while todo:
        node = todo.pop()
        todo.extend(node.children)
        if type(node.extra_fields).__name__.endswith("Allocation"):
            allocs.append(node)
    allocs.sort(key=lambda n: n.start_time_ns)
    mems = [e for e in result.events() if e.name() == "[memory]"]
    if len(mems) != len(allocs):
        raise SystemExit("%d [memory] records but %d Allocation nodes" % (len(mems), len(allocs)))
    out = {}
    for e, n in zip(mems, allocs):
        f = n.extra_fields
        if (e.start_us(), e.nbytes()) != (n.start_time_ns // 1000, f.alloc_size):
            raise SystemExit("cannot pair the [memory] record at %d us" % e.start_us())
        out[id(e)] = (f.ptr, f.total_allocated, f.total_reserved)
    return mems, out


def write_kineto(path, result, pid, with_stack):
    events = list(result.events())
    mems, details = memory_details(result)
    threads = sorted({e.start_thread_id() for e in events})

    def tid(profiler_thread):
        return pid if profiler_thread == 1 else pid + profiler_thread

    # torch hands records to libkineto per thread: that thread's ops in
    # result order, then its allocations; "Profiler Event Index" counts them.
    ordered = []
    for t in threads:
        ordered += [e for e in events if e.start_thread_id() == t and e.name() != "[memory]"]
        ordered += [e for e in mems if e.start_thread_id() == t]
    start = result.trace_start_us()
    end = max([e.start_us() + e.duration_us() for e in events] + [start])
    out = []
    for idx, e in enumerate(ordered):
        if e.name() == "[memory]":
            ptr, total_alloc, total_res = details[id(e)]
            args = {"Profiler Event Index": idx,
                    "Device Type": DEVICE_TYPE[str(e.device_type()).split(".")[-1]],
                    "Device Id": signed_device_index(e.device_index()), "Addr": ptr, "Bytes": e.nbytes(),
                    "Total Allocated": total_alloc, "Total Reserved": total_res}
            out.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                        "pid": pid, "tid": tid(e.start_thread_id()), "ts": e.start_us(), "args": args})
            continue
        args = {"Trace name": SPAN, "Trace iteration": 0, "External id": e.correlation_id(),
                "Profiler Event Index": idx}
        if e.shapes():
            args["Input Dims"] = e.shapes()
            args["Input type"] = e.dtypes()
        if e.sequence_nr() >= 0:
            args["Fwd thread id"] = e.fwd_thread_id()
            args["Sequence number"] = e.sequence_nr()
        if with_stack:  # 1.13 writes the key even when the stack is empty
            args["Call stack"] = ";".join(e.stack())
        out.append({"ph": "X", "cat": "user_annotation" if e.scope() == USER_SCOPE else "cpu_op",
                    "name": e.name(), "pid": pid, "tid": tid(e.start_thread_id()),
                    "ts": e.start_us(), "dur": e.duration_us(), "args": args})
    out.append({"name": "process_name", "ph": "M", "ts": start, "pid": pid, "tid": 0,
                "args": {"name": "python3"}})
    out.append({"name": "process_labels", "ph": "M", "ts": start, "pid": pid, "tid": 0,
                "args": {"labels": "CPU"}})
    out.append({"name": "process_sort_index", "ph": "M", "ts": start, "pid": pid, "tid": 0,
                "args": {"sort_index": pid}})
    for t in threads:
        out.append({"name": "thread_name", "ph": "M", "ts": start, "pid": pid, "tid": tid(t),
                    "args": {"name": "thread %d (python3)" % tid(t)}})
        out.append({"name": "thread_sort_index", "ph": "M", "ts": start, "pid": pid, "tid": tid(t),
                    "args": {"sort_index": tid(t)}})
    out.append({"ph": "X", "cat": "Trace", "ts": start, "dur": end - start, "pid": "Spans",
                "tid": SPAN, "name": SPAN + " (0)", "args": {"Op count": 0}})
    out.append({"name": "process_sort_index", "ph": "M", "ts": start, "pid": "Spans", "tid": 0,
                "args": {"sort_index": 0x20000000}})
    out.append({"name": "Iteration Start: " + SPAN, "ph": "i", "s": "g", "pid": "Traces",
                "tid": "Trace " + SPAN, "ts": start})
    out.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": end})
    # libkineto's layout: a leading newline, one event per line, traceName last.
    text = ['\n{\n  "schemaVersion": 1,\n  "deviceProperties": [\n  ],\n  "traceEvents": [\n']
    text.append(",\n".join("  " + jdump(ev) for ev in out))
    text.append('\n  ],\n  "traceName": %s\n}' % jdump(path))
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(text))


# ---------------------------------------------------------------------------
# Tables.


def random_table_args(rng, record_shapes, with_stack):
    """table() arguments the CLI can express: max_name_column_width is never
    None or negative, header never "" (both are rejected or mean "none")."""
    aggregate = rng.random() < 0.85
    a = {
        "aggregate": aggregate,
        "group_by_input_shape": aggregate and rng.random() < (0.5 if record_shapes else 0.15),
        "group_by_stack_n": rng.randint(1, 5) if aggregate and with_stack and rng.random() < 0.5 else 0,
        "sort_by": rng.choice(SORT_KEYS),
        "row_limit": rng.choice([-1, 0, 1, 2, 5, 10, 100, rng.randint(3, 40)]),
        "header": rng.choice(HEADERS) if rng.random() < 0.25 else None,
        "top_level_events_only": rng.random() < 0.2,
        "max_name_column_width": 55,
    }
    r = rng.random()
    if r < 0.15:
        a["max_name_column_width"] = rng.randint(0, 12)
    elif r < 0.35:
        a["max_name_column_width"] = rng.randint(13, 80)
    return a


def render(prof, a):
    if a["aggregate"]:
        rows = prof.key_averages(group_by_input_shape=a["group_by_input_shape"],
                                 group_by_stack_n=a["group_by_stack_n"])
        call = "prof.key_averages(group_by_input_shape=%r, group_by_stack_n=%d)" % (
            a["group_by_input_shape"], a["group_by_stack_n"])
    else:
        rows = prof.events()
        call = "prof.events()"
    kwargs = {k: a[k] for k in ("sort_by", "row_limit", "header", "top_level_events_only",
                                "max_name_column_width")}
    call += ".table(%s)" % ", ".join("%s=%r" % kv for kv in kwargs.items())
    text = rows.table(**kwargs)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in rows)
    has_stack = any(e.stack for e in rows)
    return text, call, has_shapes, has_stack


def legacy_blockers(opts, has_shapes, has_stack, names_ok):
    """Why the legacy array cannot reproduce a table: it holds names, times
    and profiler thread ids only."""
    why = []
    if opts["profile_memory"]:
        why.append("no [memory] events (CPU Mem columns)")
    if has_shapes:
        why.append("no input shapes")
    if has_stack:
        why.append("no call stacks")
    if not names_ok:
        why.append("torch writes names unescaped: a backslash in a label changes the name")
    return "; ".join(why)


def run_case(out_dir, case, factory, rng, tables_per_case, pid):
    step, desc, extra = factory(rng)
    opts = {
        "record_shapes": rng.random() < 0.6,
        "profile_memory": rng.random() < 0.6,
        "with_stack": extra.get("with_stack", False),
    }
    use_schedule = case != "ops" or rng.random() < 0.5
    wait, warmup, active = rng.randint(0, 1), rng.randint(0, 1), rng.randint(1, 3)
    steps = wait + warmup + active + rng.randint(0, 1) if use_schedule else rng.randint(1, 2)
    names_ok = all(legacy_safe(n) for n in extra.get("labels", []))
    case_dir = os.path.join(out_dir, case)
    os.makedirs(case_dir, exist_ok=True)
    entries = []

    def on_ready(prof):
        legacy = os.path.join(case_dir, "legacy.json")
        kineto = os.path.join(case_dir, "kineto.json")
        prof.export_chrome_trace(legacy)
        write_kineto(kineto, prof.profiler.kineto_results, pid, opts["with_stack"])
        for i in range(tables_per_case):
            a = random_table_args(rng, opts["record_shapes"], opts["with_stack"])
            text, call, has_shapes, has_stack = render(prof, a)
            name = "t%02d.txt" % i
            with open(os.path.join(case_dir, name), "w", encoding="utf-8") as f:
                f.write(text)
            traces = {"kineto": os.path.join(case, "kineto.json")}
            not_from = {}
            why = legacy_blockers(opts, has_shapes, has_stack, names_ok)
            if why:
                not_from["legacy"] = why
            else:
                traces["legacy"] = os.path.join(case, "legacy.json")
            args = dict(a)
            args["profile_memory"] = opts["profile_memory"]
            entries.append({"case": case, "expected": os.path.join(case, name), "call": call,
                            "args": args, "traces": traces, "not_from": not_from})

    sched = schedule(wait=wait, warmup=warmup, active=active, repeat=1) if use_schedule else None
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=on_ready,
                 record_shapes=opts["record_shapes"], profile_memory=opts["profile_memory"],
                 with_stack=opts["with_stack"]) as prof:
        for k in range(steps):
            step(k)
            if use_schedule:
                prof.step()
    if not entries:
        raise SystemExit("%s: on_trace_ready never ran" % case)
    info = {"case": case, "workload": desc, "profile": opts,
            "schedule": ({"wait": wait, "warmup": warmup, "active": active, "repeat": 1}
                         if use_schedule else None),
            "steps": steps}
    return info, entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--tables", type=int, default=8, help="random tables per case")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # warmup=0 and friends warn; the output is the files
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    cases, tables = [], []
    for case, factory in WORKLOADS:
        info, entries = run_case(args.out, case, factory, rng, args.tables, os.getpid())
        cases.append(info)
        tables += entries
    manifest = {"seed": args.seed, "torch_version": torch.__version__,
                "kineto_available": bool(torch.autograd.kineto_available()),
                "cases": cases, "tables": tables}
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("seed %d: %d cases, %d tables -> %s" % (args.seed, len(cases), len(tables), args.out))


if __name__ == "__main__":
    sys.exit(main())
