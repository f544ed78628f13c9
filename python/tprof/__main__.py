"""python3 -m tprof job DIR|GLOB [--scheduler ADDRESS | --local N] [--format F] [-o FILE]
python3 -m tprof compare A B [--scheduler ADDRESS | --local N] [--format F] [-o FILE] [--fail-if-slower PCT ...]

job: the job view of a job's rank traces, computed on Dask
(tprof.distributed): the same bytes as `tprof diagnose DIR`. compare: job B
against job A, every rank of both summarized on Dask: the same bytes as
`tprof compare --jobs A B`, and its exit status (1: the gate failed).
Exit status 2 with every failed rank named on stderr (bad input, a worker
that died, no scheduler), or when the gate refuses.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


def _write(text: str, output: str) -> None:
    """stdout, or `output` written whole or not at all (a temporary file
    beside it, renamed over it)."""
    if not output:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(output))
    fd, tmp = tempfile.mkstemp(prefix=".tprof-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, output)
    except BaseException:
        os.unlink(tmp)
        raise


def _on_dask(args: argparse.Namespace, run) -> int:
    """run() on Dask, its report written (stdout or -o, whole or not at
    all); exit 2 naming every failed rank, or the cluster that failed.
    run returns (report, gate line for stderr, exit status)."""
    # Dask's own log lines (cluster start, worker restarts) stay out of the
    # output unless they are errors; the worker processes inherit it.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    from .distributed import JobError

    try:
        text, gate_line, status = run()
    except JobError as e:
        print(f"tprof: {e}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as e:
        where = args.scheduler or "the local cluster"
        print(f"tprof: {where}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        _write(text, args.output)
    except OSError as e:
        print(f"tprof: {args.output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 2
    sys.stderr.write(gate_line)
    return status


def _dask_options(args: argparse.Namespace) -> dict:
    return dict(scheduler=args.scheduler, local=args.local, threads=args.threads, retries=args.retries,
                progress=not args.quiet, note=None if args.quiet else sys.stderr.write)


def _job(args: argparse.Namespace) -> int:
    def run():
        from .distributed import diagnose_job

        return diagnose_job(args.where, format=args.format, **_dask_options(args)), "", 0

    return _on_dask(args, run)


def _compare(args: argparse.Namespace) -> int:
    def run():
        from .distributed import compare_jobs

        r = compare_jobs(args.a, args.b, format=args.format, top=args.top, fail_if_slower=args.fail_if_slower,
                         metric=args.metric, min_steps=args.min_steps, allow_mismatch=args.allow_mismatch,
                         **_dask_options(args))
        return r.report, r.gate_line, r.exit_status

    return _on_dask(args, run)


def _pct(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"PCT must be a non-negative number, got {text}")
    return v


def _cluster_options(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786)")
    where.add_argument("--local", metavar="N", type=int, help="a LocalCluster of N worker processes (default: one per core)")
    p.add_argument("-o", "--output", default="", help="write to a file instead of stdout")
    p.add_argument("--threads", type=int, default=0, help="reader threads per trace (default: tprof's)")
    p.add_argument("--retries", type=int, default=1, help="tries again a rank whose worker died (default 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tprof", description="tprof from Python")
    sub = parser.add_subparsers(dest="command", required=True)
    job = sub.add_parser("job", help="the job view of a job's rank traces, computed on Dask (= tprof diagnose DIR)")
    job.add_argument("where", metavar="DIR|GLOB", help="a directory of one trace per rank, or a glob (quote it)")
    job.add_argument("--format", default="text", choices=["text", "json", "md", "html", "summary"],
                     help="text, json, md (tprof diagnose DIR), html (tprof report DIR), summary (tprof merge --format summary)")
    _cluster_options(job)
    cmp = sub.add_parser("compare", help="job B against job A, on Dask (= tprof compare --jobs A B)")
    cmp.add_argument("a", metavar="A", help="the baseline job: a directory of one trace per rank, or a glob (quote it)")
    cmp.add_argument("b", metavar="B", help="the job compared against A")
    cmp.add_argument("--format", default="text", choices=["text", "json", "md", "html"],
                     help="text, json, md or html (one self-contained page)")
    cmp.add_argument("--top", type=int, default=10, help="rank rows shown, by |delta| (0: all; JSON lists all)")
    cmp.add_argument("--fail-if-slower", type=_pct, metavar="PCT",
                     help="exit 1 when B's mean per job step is slower than A's by more than PCT percent, beyond "
                          "the noise; exit 2 when the gate cannot decide (tprof compare's gate)")
    cmp.add_argument("--metric", default="auto", choices=["auto", "steady", "step", "device", "cpu"],
                     help="what the gate compares per step (default auto: steady)")
    cmp.add_argument("--min-steps", type=int, default=5, help="the gate refuses with fewer aligned steps (default 5)")
    cmp.add_argument("--allow-mismatch", action="store_true", help="gate even when the jobs' set-ups differ")
    _cluster_options(cmp)
    args = parser.parse_args(argv)
    if args.local is not None and args.local < 1:
        parser.error("--local: 1 or more workers")
    if args.command == "compare":
        if args.top < 0:
            parser.error("--top: 0 or more rows")
        if args.min_steps < 1:
            parser.error("--min-steps: 1 or more")
        return _compare(args)
    return _job(args)


if __name__ == "__main__":
    sys.exit(main())
