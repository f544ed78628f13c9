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

__all__ = ["diagnose_job", "list_traces", "JobError", "RankFailure", "FORMATS"]

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


def diagnose_job(
    where: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
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
    of `local` worker processes (default: one per core, at most one per
    trace) is started and closed again. format: one of FORMATS. threads:
    reader threads per trace (0: tprof's default). retries: how often a
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
    from distributed import Client, LocalCluster, as_completed

    owned = []
    try:
        if client is None:
            if scheduler is not None:
                client = Client(scheduler)
            else:
                n = local if local is not None else max(1, os.cpu_count() or 1)
                if n < 1:
                    raise ValueError(f"local must be 1 or more workers, not {n}")
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                owned.append(cluster)
                client = Client(cluster)
            owned.insert(0, client)
        return _run(client, where, format, threads, retries, progress, note, as_completed)
    finally:
        for o in owned:
            o.close()


def _run(client, where, format, threads, retries, progress, note, as_completed) -> str:
    located = _where(client, where)
    if not located:
        raise JobError(f"{os.fspath(where) if isinstance(where, (str, os.PathLike)) else 'the paths'}: "
                       "no trace seen by any worker (*.json or *.json.gz, one per rank)")
    paths = sorted(located)
    show = _progress_printer(sys.stderr) if progress is True else (progress or None)
    futures = {}
    for p in paths:
        fut = client.submit(_summarize, p, threads, key=f"tprof-summarize-{p}", pure=False,
                            retries=retries, workers=located[p] or None, allow_other_workers=False)
        futures[fut] = p
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
            show(done, len(paths))
        fut.release()
    # What the reader repaired, in path order, as `tprof diagnose DIR` notes it.
    if note is not None:
        for p in paths:
            if notes.get(p):
                note(notes[p])
    if failures:
        failures.sort(key=lambda f: f.path)
        raise JobError(f"{len(failures)} of {len(paths)} ranks failed; the job view needs every rank", failures)
    names = [os.path.basename(p) for p in paths]
    try:
        return _tprof.merge_job([summaries[p] for p in paths], names, format)
    except ValueError as e:
        raise JobError(str(e)) from None


def _reason(e: BaseException) -> str:
    name = type(e).__name__
    if name == "KilledWorker":
        return ("the worker died while summarizing it, on every try (out of memory? the worker's log says); "
                f"{e}")
    text = str(e)
    # TraceError's text starts with the file already; keep what follows it.
    return text if text else name
