"""python3 -m tprof job DIR|GLOB [--scheduler ADDRESS | --local N] [--format F] [-o FILE]

The job view of a job's rank traces, computed on Dask (tprof.distributed):
the same bytes as `tprof diagnose DIR`. Exit status 0, or 2 with every
failed rank named on stderr (bad input, a worker that died, no scheduler).
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


def _job(args: argparse.Namespace) -> int:
    # Dask's own log lines (cluster start, worker restarts) stay out of the
    # output unless they are errors; the worker processes inherit it.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    from .distributed import JobError, diagnose_job

    try:
        text = diagnose_job(args.where, scheduler=args.scheduler, local=args.local, format=args.format,
                            threads=args.threads, retries=args.retries, progress=not args.quiet,
                            note=None if args.quiet else sys.stderr.write)
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
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tprof", description="tprof from Python")
    sub = parser.add_subparsers(dest="command", required=True)
    job = sub.add_parser("job", help="the job view of a job's rank traces, computed on Dask (= tprof diagnose DIR)")
    job.add_argument("where", metavar="DIR|GLOB", help="a directory of one trace per rank, or a glob (quote it)")
    where = job.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786)")
    where.add_argument("--local", metavar="N", type=int, help="a LocalCluster of N worker processes (default: one per core)")
    job.add_argument("--format", default="text", choices=["text", "json", "md", "html", "summary"],
                     help="text, json, md (tprof diagnose DIR), html (tprof report DIR), summary (tprof merge --format summary)")
    job.add_argument("-o", "--output", default="", help="write to a file instead of stdout")
    job.add_argument("--threads", type=int, default=0, help="reader threads per trace (default: tprof's)")
    job.add_argument("--retries", type=int, default=1, help="tries again a rank whose worker died (default 1)")
    job.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.local is not None and args.local < 1:
        parser.error("--local: 1 or more workers")
    return _job(args)


if __name__ == "__main__":
    sys.exit(main())
