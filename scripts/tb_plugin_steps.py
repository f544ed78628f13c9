#!/usr/bin/env python3
"""Print the PyTorch TensorBoard plugin's own per-step overview of one trace
and compare it with tprof's `breakdowns.tb_plugin_steps`.

The plugin (pytorch/kineto tb_plugin, torch_tb_profiler; removed from kineto
in 2026, last present at commit 041e7ce99f1562dd81232ee58b7c454ef16bfae2) is
not part of tprof and nothing of it is copied here: point TB_PLUGIN_SRC at
the directory holding `torch_tb_profiler/`. Only its parser runs
(RunProfileData.parse: the overview's step rows, OverallParser.steps_costs);
tensorboard itself is not needed.

Usage:
  TB_PLUGIN_SRC=/path/to/kineto/tb_plugin python3 scripts/tb_plugin_steps.py TRACE [--compare TPROF]
Output (stdout, JSON): {"steps": [{step, kernel_us, memcpy_us, memset_us,
communication_us, runtime_us, dataloader_us, cpu_exec_us, other_us}]}, in
the plugin's µs. With --compare, each figure of both side by side on
stderr; exit status 1 where one differs by more than 1 µs.
"""
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import warnings

FIELDS = ["kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "dataloader_us",
          "cpu_exec_us", "other_us"]  # ProfileRole order, Kernel .. Other


def plugin_steps(trace):
    sys.path.insert(0, os.environ["TB_PLUGIN_SRC"])
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    from torch_tb_profiler.profiler.data import RunProfileData

    with tempfile.TemporaryDirectory() as cache:
        p = RunProfileData.parse("worker", "span", os.path.abspath(trace), cache)
    out = []
    for name, costs in zip(p.steps_names or [], p.steps_costs or []):
        m = re.search(r"(\d+)$", str(name))
        row = {"step": int(m.group(1)) if m else -1}
        for i, f in enumerate(FIELDS):
            row[f] = costs.costs[i]
        out.append(row)
    return {"trace": os.path.basename(trace), "steps": out}


def compare(ref, tprof, trace):
    p = subprocess.run([tprof, "diagnose", trace, "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("tprof failed: %s\n" % p.stderr)
        return False
    got = json.loads(p.stdout).get("breakdowns", {}).get("tb_plugin_steps", [])
    ok = len(got) == len(ref["steps"])
    if not ok:
        sys.stderr.write("steps: plugin %d, tprof %d\n" % (len(ref["steps"]), len(got)))
    for want, have in zip(ref["steps"], got):
        for f in FIELDS:
            bad = abs(want[f] - have.get(f, 0)) > 1
            ok = ok and not bad
            if bad:
                sys.stderr.write("step %s %-18s plugin %12.1f us  tprof %12.1f us  MISMATCH\n" % (
                    want["step"], f, want[f], have.get(f, 0)))
    return ok


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--compare"):
        sys.exit(__doc__)
    ref = plugin_steps(argv[1])
    print(json.dumps(ref))
    if len(argv) == 4:
        return 0 if compare(ref, argv[3], argv[1]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
