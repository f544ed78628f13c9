#!/usr/bin/python3
"""Generated jobs of 64, 256 and 1,024 ranks diagnosed on Dask (issue 39):
recall and precision of the planted stragglers and their causes, whether
the critical path across ranks runs mostly through a planted rank, wall
time, and peak memory per worker and on the client.

Each job is generated on the workers, a rank at a time
(tests/data/ranks/make_jobs.py: Spec, summarize_generated): a worker makes
its rank's trace in its temporary directory, summarizes it with tprof and
deletes it, so no disk holds the whole job; the client gathers the summaries
and merges them (tprof merge). Ground truth: the planted late ranks (1-10%
of a step late in every step; compute, host or input; one or two ranks; with
and without tensor-parallel process groups of 8) and jobs with none.

  bench/scale_job.py [--ranks 64 256 1024] [--jobs 20] [--network 10] [--workers 2] [--build build] [--seed 100]

Then the slow-link jobs (cause "network"): one rank's links slow, read from
the slow transfers of its groups (docs/scale.md, "Slow transfers").

Prints one row per size; figures in bench/README.md, "Jobs on Dask".
"""
import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CAUSE = {"compute": "computation", "host": "host", "input": "input"}


def specs(ranks, jobs, make_jobs, seed=100):
    """`jobs` specs: every 5th without a straggler; the others cycle causes,
    1-10% late, one or two late ranks (in different TP groups), TP 8 or none."""
    out = []
    pcts = [1.0, 2.0, 5.0, 10.0]
    for j in range(jobs):
        tp = 8 if j % 2 == 0 else 1
        if j % 5 == 4:
            out.append(make_jobs.Spec(ranks, late=(), tp=tp, seed=seed + j))
            continue
        n_late = 1 + (j % 3 == 1)
        first = (j * 37 + 5) % ranks
        late = [first] + ([(first + ranks // 2 + 3) % ranks] if n_late == 2 else [])
        cause = ["compute", "host", "input"][j % 3]
        out.append(make_jobs.Spec(ranks, late=late, cause=cause, late_pct=pcts[j % 4], tp=tp, seed=seed + j))
    return out


def network_specs(ranks, jobs, make_jobs, seed=100):
    """`jobs` network specs (tensor-parallel groups of 8, data-parallel
    groups per local rank): every 5th without a slow link; the others with
    one rank whose links are 1, 2, 5 or 10% of a step slow."""
    out = []
    pcts = [1.0, 2.0, 5.0, 10.0]
    for j in range(jobs):
        late = [] if j % 5 == 4 else [(j * 37 + 5) % ranks]
        out.append(make_jobs.Spec(ranks, late=late, cause="network", late_pct=pcts[j % 4], tp=8, seed=seed + 50 + j,
                                  dp_groups=True))
    return out


def network_table(a, client, make_jobs, _tprof):
    """The slow-link jobs' table: suspects found per size."""
    print()
    print(f"Slow links ({a.network} jobs per size: tensor-parallel groups of 8, data-parallel groups per local rank; "
          "found = named the suspect)")
    print("| ranks | jobs | planted | found | suspects named | stragglers named | recall | precision | by slow % (found/planted) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in a.ranks:
        planted = found = named = stragglers = 0
        by_pct = {}
        for spec in network_specs(n, a.network, make_jobs, a.seed):
            summaries = client.gather(client.map(make_jobs.summarize_generated, [spec] * n, range(n), pure=False))
            view = json.loads(_tprof.merge_job(summaries, [], "json"))
            suspects = set(view["slow_transfers"]["suspects"])
            planted += len(spec.late)
            named += len(suspects)
            stragglers += len(view["stragglers"])
            hit = len(suspects.intersection(spec.late))
            found += hit
            if spec.late:
                f, p = by_pct.get(spec.late_pct, (0, 0))
                by_pct[spec.late_pct] = (f + hit, p + len(spec.late))
            del summaries, view
        recall = found / planted if planted else 1.0
        precision = found / named if named else 1.0
        pct = ", ".join(f"{k:g}%: {f}/{p}" for k, (f, p) in sorted(by_pct.items()))
        print(f"| {n} | {a.network} | {planted} | {found} | {named} | {stragglers} | {100 * recall:.1f}% | "
              f"{100 * precision:.1f}% | {pct} |", flush=True)


def path_top_rank(view):
    """The rank holding most of the job's critical path across ranks, or None."""
    by_rank = {}
    for p in view["critical_path"]["parts"]:
        if p["rank"] >= 0:
            by_rank[p["rank"]] = by_rank.get(p["rank"], 0) + p["per_step_ns"]
    return max(by_rank, key=by_rank.get) if by_rank else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--network", type=int, default=10, help="slow-link jobs per size (0: none)")
    ap.add_argument("--seed", type=int, default=100,
                    help="job j's seed is SEED + j (100: the jobs the thresholds were set on; others: unseen jobs)")
    a = ap.parse_args()
    ranks_dir = os.path.join(ROOT, "tests", "data", "ranks")
    py = os.path.join(os.path.abspath(a.build), "python")
    os.environ["PYTHONPATH"] = os.pathsep.join([py, ranks_dir, os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    sys.path[:0] = [py, ranks_dir]
    import make_jobs
    from distributed import Client, LocalCluster
    from tprof import _tprof

    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    print(f"{a.workers} worker processes, {a.jobs} jobs per size, seeds {a.seed}-{a.seed + a.jobs - 1}")
    print("| ranks | jobs | planted | found (right cause) | named | recall | precision | critical path's top rank planted | "
          "median job wall | s per 1,000 ranks | worker peak RSS | summaries per job | client RSS growth |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in a.ranks if a.jobs > 0 else []:
        planted = found = named = right = 0
        with_late = path_right = 0  # jobs with a planted rank; of them, the path's top rank is one
        walls, sizes = [], []
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for spec in specs(n, a.jobs, make_jobs, a.seed):
            t = time.perf_counter()
            summaries = client.gather(client.map(make_jobs.summarize_generated, [spec] * n, range(n), pure=False))
            view = json.loads(_tprof.merge_job(summaries, [], "json"))
            walls.append(time.perf_counter() - t)
            sizes.append(sum(len(s) for s in summaries))
            got = {s["rank"]: (s["before"][0]["what"] if s["before"] else "") for s in view["stragglers"]}
            planted += len(spec.late)
            named += len(got)
            for r in spec.late:
                if r in got:
                    found += 1
                    right += got[r] == CAUSE[spec.cause]
            if spec.late:
                with_late += 1
                path_right += path_top_rank(view) in spec.late
            del summaries, view
        rss = max(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
        growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        walls.sort()
        med = walls[len(walls) // 2]
        recall = right / planted if planted else 1.0
        precision = right / named if named else 1.0
        print(f"| {n} | {a.jobs} | {planted} | {found} ({right}) | {named} | {100 * recall:.1f}% | "
              f"{100 * precision:.1f}% | {path_right}/{with_late} | {med:.2f} s | {1000 * med / n:.2f} | {rss / 1024:.0f} MB | "
              f"{sorted(sizes)[len(sizes) // 2] / 1024:.0f} KB | {growth / 1024:.0f} MB |", flush=True)
    if a.network > 0:
        network_table(a, client, make_jobs, _tprof)
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
