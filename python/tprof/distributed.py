"""tprof on Dask: a job's ranks diagnosed where their traces live.

    from tprof.distributed import diagnose_job
    print(diagnose_job("traces/"))                          # a LocalCluster on this machine
    print(diagnose_job("/shared/job42/*.json.gz", client=Client("tcp://scheduler:8786")))

Each rank's trace is read by a Dask worker (tprof's C++ reader, the GIL
released) and turned into its summary, a few KB (`tprof summarize`); only
summaries travel to the client, which merges them into the job view
(`tprof merge`). The output is the same bytes as `tprof diagnose DIR` over
the same traces. Paths are opened by the workers, never read by the client:
a directory or glob is listed on the workers too, and a trace that only some
workers see (a host's local disk) is summarized on one of them. A path names
one file wherever it is seen (shared storage, or each host holding its own
ranks under distinct names). docs/scale.md, "On a cluster".
"""

from __future__ import annotations

import glob as _glob
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _tprof

__all__ = ["diagnose_job", "compare_jobs", "JobComparison", "list_traces", "JobError", "RankFailure", "FORMATS"]

# What diagnose_job writes: the job view as `tprof diagnose DIR --format`
# (text, json, md), the job page of `tprof report DIR` (html), or the merged
# summary file of `tprof merge --format summary`.
FORMATS = ("text", "json", "md", "html", "summary")


@dataclass
class RankFailure:
    """One rank that could not be summarized: its trace and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class JobError(Exception):
    """The job has no view: traces failed (each named), none was found, or
    the summaries do not merge (a rank number from two processes, ...)."""

    message: str
    failures: List[RankFailure] = field(default_factory=list)

    def __str__(self) -> str:
        if not self.failures:
            return self.message
        return self.message + "".join(f"\n  {f}" for f in self.failures)


def _is_trace(name: str) -> bool:
    return (name.endswith(".json") or name.endswith(".json.gz")) and not name.endswith(".summary.json")


def list_traces(where: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]) -> List[str]:
    """The traces `where` names on this machine, sorted: a directory's
    *.json / *.json.gz files at any depth (rank summaries, *.summary.json,
    left out, as `tprof diagnose DIR` does), a glob's matches, or the paths
    of a list that exist. Runs on a worker when the client cannot see them."""
    if not isinstance(where, (str, os.PathLike)):
        return sorted(os.fspath(p) for p in where if os.path.isfile(p))
    where = os.fspath(where)
    if os.path.isdir(where):
        found = []
        for root, _dirs, files in os.walk(where):
            found.extend(os.path.join(root, f) for f in files if _is_trace(f))
        return sorted(found)
    if _glob.has_magic(where):
        return sorted(p for p in _glob.glob(where, recursive=True) if os.path.isfile(p))
    return [where] if os.path.isfile(where) else []


def _summarize(path: str, threads: int) -> Tuple[str, str]:
    # Runs on a worker: the trace is read there; its summary and the note
    # on what the reader repaired (a truncated file) come back.
    from tprof import _tprof as core

    return core.summarize_rank(path, threads=threads)


def _where(client, where) -> Dict[str, List[str]]:
    """Each trace and the workers that see it (all: [])."""
    listings = client.run(list_traces, where)
    seen: Dict[str, List[str]] = {}
    for worker, paths in listings.items():
        for p in paths:
            seen.setdefault(p, []).append(worker)
    everywhere = len(listings)
    return {p: ([] if len(w) == everywhere else sorted(w)) for p, w in seen.items()}


def _progress_printer(stream) -> Callable[[int, int], None]:
    last = [0.0]

    tty = getattr(stream, "isatty", lambda: False)()

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= (0.5 if tty else 10.0):
            last[0] = now
            line = f"tprof: ranks summarized {done}/{total}"
            # A terminal: one line, rewritten; a log: a line every 10 s.
            stream.write(("\r" + line + ("\n" if done == total else "")) if tty else line + "\n")
            stream.flush()

    return show


Where = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


class _Cluster:
    """The client to use: the given one, one connected to `scheduler`, or a
    LocalCluster of `local` worker processes started (and closed) here."""

    def __init__(self, client, scheduler, local):
        from distributed import Client, LocalCluster

        self.owned = []
        self.client = client
        if client is not None:
            return
        if scheduler is not None:
            self.client = Client(scheduler)
        else:
            n = local if local is not None else max(1, os.cpu_count() or 1)
            if n < 1:
                raise ValueError(f"local must be 1 or more workers, not {n}")
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            try:
                self.client = Client(cluster)
            except BaseException:
                cluster.close()
                raise
            self.owned.append(cluster)
        self.owned.insert(0, self.client)

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        for o in self.owned:
            o.close()
        return False


def diagnose_job(
    where: Where,
    client=None,
    *,
    scheduler: Optional[str] = None,
    local: Optional[int] = None,
    format: str = "text",
    threads: int = 0,
    retries: int = 1,
    progress: Union[bool, Callable[[int, int], None]] = False,
    note: Optional[Callable[[str], None]] = None,
) -> str:
    """The job view of the ranks' traces `where` names (a directory, a glob,
    or a list of paths), computed on Dask.

    client: a distributed.Client to use; else `scheduler` (an address, as
    Nsight Systems' recipes take one) is connected to; else a LocalCluster
    of `local` worker processes (default: one per core) is started and
    closed again. format: one of FORMATS. threads: reader threads per
    trace (0: tprof's default). retries: how often a
    rank whose worker died is tried again on another. progress: True prints
    "ranks summarized k/N" to stderr; a callable gets (done, total).
    note: gets the line `tprof diagnose DIR` prints for each trace the
    reader repaired ("tprof: note: PATH: truncated=2 ..."), in path order.

    Raises JobError naming every trace that failed (its file, byte offset
    and what was expected, or the worker that died reading it); a rank is
    never dropped silently.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    from distributed import as_completed

    with _Cluster(client, scheduler, local) as c:
        return _run(c, where, format, threads, retries, progress, note, as_completed)


@dataclass
class JobComparison:
    """What compare_jobs returns: the report (as `tprof compare --jobs`
    prints it), the gate's outcome ("pass", "fail", "refused"; None without
    a gate), and its one line for a CI log ("compare gate: ...")."""

    report: str
    outcome: Optional[str] = None
    gate_line: str = ""

    @property
    def exit_status(self) -> int:
        """tprof compare's: 0 pass or no gate, 1 fail, 2 refused."""
        return {"fail": 1, "refused": 2}.get(self.outcome or "", 0)


def compare_jobs(
    a: Where,
    b: Where,
    client=None,
    *,
    scheduler: Optional[str] = None,
    local: Optional[int] = None,
    format: str = "text",
    label_a: Optional[str] = None,
    label_b: Optional[str] = None,
    top: int = 10,
    fail_if_slower: Optional[float] = None,
    metric: str = "auto",
    min_steps: int = 5,
    allow_mismatch: bool = False,
    threads: int = 0,
    retries: int = 1,
    progress: Union[bool, Callable[[int, int], None]] = False,
    note: Optional[Callable[[str], None]] = None,
) -> JobComparison:
    """Job B against job A, each a directory, glob or list of its ranks'
    traces, summarized on Dask workers as diagnose_job does (both jobs'
    ranks at once); the same report as `tprof compare --jobs A B` over the
    same traces (docs/compare.md, "Jobs").

    format: text, json, md or html (one self-contained page, as `tprof
    compare --jobs A B --format html`). label_a / label_b: how the report names the
    jobs (default: `a` and `b` as given). fail_if_slower, metric,
    min_steps, allow_mismatch: the gate of `tprof compare`
    (--fail-if-slower PCT and its options); without fail_if_slower there is
    no gate. The other arguments are diagnose_job's. Raises JobError naming
    every trace that failed; ValueError for bad arguments.
    """
    # Arguments are checked before any rank is read.
    if format not in ("text", "json", "md", "html"):
        raise ValueError(f"format must be text, json, md or html, not {format!r}")
    if metric not in ("auto", "steady", "step", "device", "cpu"):
        raise ValueError(f"metric must be auto, steady, step, device or cpu, not {metric!r}")
    if fail_if_slower is not None and not 0 <= fail_if_slower < float("inf"):
        raise ValueError(f"fail_if_slower must be a non-negative number, not {fail_if_slower!r}")
    from distributed import as_completed

    with _Cluster(client, scheduler, local) as c:
        (pa, sa), (pb, sb) = _summarize_jobs(c, [a, b], threads, retries, progress, note, as_completed)
    try:
        report, outcome, line = _tprof.compare_jobs(
            sa, [os.path.basename(p) for p in pa], sb, [os.path.basename(p) for p in pb], format=format,
            label_a=label_a if label_a is not None else _describe(a),
            label_b=label_b if label_b is not None else _describe(b), top=top,
            fail_if_slower=fail_if_slower, metric=metric, min_steps=min_steps, allow_mismatch=allow_mismatch)
    except ValueError as e:  # a summary that does not merge (a rank number from two processes, ...)
        raise JobError(str(e)) from None
    return JobComparison(report, outcome, line)


def _run(client, where, format, threads, retries, progress, note, as_completed) -> str:
    (paths, summaries), = _summarize_jobs(client, [where], threads, retries, progress, note, as_completed)
    try:
        return _tprof.merge_job(summaries, [os.path.basename(p) for p in paths], format)
    except ValueError as e:
        raise JobError(str(e)) from None


def _describe(where) -> str:
    return os.fspath(where) if isinstance(where, (str, os.PathLike)) else "the paths"


def _summarize_jobs(client, jobs, threads, retries, progress, note, as_completed) -> List[Tuple[List[str], List[str]]]:
    """Each job's traces (sorted) and their summaries, every rank of every
    job summarized on the workers at once. Raises JobError naming every
    trace that failed, or a job of which no worker sees a trace."""
    located = [_where(client, where) for where in jobs]
    for where, found in zip(jobs, located):
        if not found:
            raise JobError(f"{_describe(where)}: no trace seen by any worker (*.json or *.json.gz, one per rank)")
    paths = [sorted(found) for found in located]
    total = sum(len(p) for p in paths)
    show = _progress_printer(sys.stderr) if progress is True else (progress or None)
    futures = {}
    for found, job_paths in zip(located, paths):
        for p in job_paths:
            # A trace in two jobs is summarized once (the same key).
            fut = client.submit(_summarize, p, threads, key=f"tprof-summarize-{p}", pure=False,
                                retries=retries, workers=found[p] or None, allow_other_workers=False)
            futures.setdefault(fut, p)
    summaries: Dict[str, str] = {}
    notes: Dict[str, str] = {}
    failures: List[RankFailure] = []
    done = 0
    for fut in as_completed(list(futures)):
        p = futures[fut]
        try:
            summaries[p], notes[p] = fut.result()
        except Exception as e:  # noqa: BLE001 - every failure is reported by its trace
            failures.append(RankFailure(p, _reason(e)))
        done += 1
        if show is not None:
            show(done, len(futures))
        fut.release()
    # What the reader repaired, in path order, as `tprof diagnose DIR` notes it.
    if note is not None:
        for job_paths in paths:
            for p in job_paths:
                if notes.get(p):
                    note(notes[p])
    if failures:
        failures.sort(key=lambda f: f.path)
        raise JobError(f"{len(failures)} of {total} ranks failed; the job view needs every rank", failures)
    return [(job_paths, [summaries[p] for p in job_paths]) for job_paths in paths]


def _reason(e: BaseException) -> str:
    name = type(e).__name__
    if name == "KilledWorker":
        return ("the worker died while summarizing it, on every try (out of memory? the worker's log says); "
                f"{e}")
    text = str(e)
    # TraceError's text starts with the file already; keep what follows it.
    return text if text else name
