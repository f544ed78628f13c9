#!/usr/bin/env python3
"""Writes the seed corpora of the args, summary and http fuzz targets from
tests/data (tests/README.md, "Fuzzing"). Run from the repository root:

    python3 tests/fuzz/make_seeds.py build/tools/tprof/tprof

corpus_args/     one args object per (category, set of keys) of the traces in
                 tests/data, as Kineto writes it ({"key": value, ...}), up to
                 4 KiB each; at most 8 per category.
corpus_summary/  `tprof summarize` of ranks of each job in tests/data/ranks
                 and of two public traces, and `tprof merge --format summary`
                 of a few ranks (under 32 KiB each).
corpus_http/     request heads: what browsers, Perfetto UI and curl send for
                 the traces of tests/data, and the malformed heads of
                 tests/unit/serve_test.cc.
The existing files of each directory are replaced.
"""
import gzip
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
FUZZ = ROOT / "tests" / "fuzz"


def fresh(name):
    d = FUZZ / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    return d


def traces():
    for p in sorted(DATA.rglob("*")):
        if p.suffix == ".json" or p.name.endswith(".json.gz"):
            yield p


def load(p):
    raw = gzip.open(p, "rb").read() if p.name.endswith(".gz") else p.read_bytes()
    try:
        return json.loads(raw)
    except ValueError:
        return None  # Kineto before 2023 wrote raw quotes; skipped here


def args_corpus():
    out = fresh("corpus_args")
    seen, per_cat = set(), {}
    for p in traces():
        doc = load(p)
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(events, list):
            continue
        for ev in events:
            if not isinstance(ev, dict) or not isinstance(ev.get("args"), dict):
                continue
            cat = str(ev.get("cat", ev.get("ph", "none")))
            key = (cat, tuple(sorted(ev["args"])))
            if key in seen or per_cat.get(cat, 0) >= 8:
                continue
            text = json.dumps(ev["args"], ensure_ascii=False)
            if len(text.encode()) > 4096:
                continue
            seen.add(key)
            per_cat[cat] = per_cat.get(cat, 0) + 1
            safe = "".join(c if c.isalnum() else "_" for c in cat)[:24]
            digest = hashlib.sha1(text.encode()).hexdigest()[:8]
            (out / f"{safe}_{digest}.json").write_text(text + "\n")
    return len(list(out.iterdir()))


def summary_corpus(tprof):
    out = fresh("corpus_summary")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = sorted(d for d in (DATA / "ranks").iterdir() if d.is_dir())
        made = []
        for job in jobs:
            ranks = sorted(job.glob("*.json.gz"))
            picked = list(dict.fromkeys(ranks[:2] + ranks[-1:]))
            for i, r in enumerate(picked):
                s = pathlib.Path(tmp) / f"{job.name}_{i}.summary.json"
                subprocess.run([tprof, "-q", "summarize", str(r), "-o", str(s)], check=True)
                made.append(s)
            # dup_rank's two processes claim one rank: merge refuses them (exit 2).
            merged = out / f"{job.name}_merged.summary.json"
            subprocess.run([tprof, "-q", "merge", "--format", "summary", "-o", str(merged)]
                           + [str(m) for m in made[-len(picked):]], check=False)
        for public in ["kineto-public/hta_backward_thread_2022-10.json",
                       "public/kineto/docs/traces/after_fix_trace.json"]:
            s = out / (pathlib.Path(public).name.split(".")[0] + ".summary.json")
            subprocess.run([tprof, "-q", "summarize", str(DATA / public), "-o", str(s)], check=True)
        for s in made:
            shutil.copy(s, out / s.name)
    for s in list(out.iterdir()):
        if s.stat().st_size > 32768:
            s.unlink()
    return len(list(out.iterdir()))


HEADS = {
    # What clients send for the traces of tests/data (tprof serve tests/data).
    "perfetto_get": "GET /public/kineto/docs/traces/after_fix_trace.json HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
                    "Connection: keep-alive\r\nsec-ch-ua-platform: \"Linux\"\r\nUser-Agent: Mozilla/5.0 (X11; Linux "
                    "x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36\r\nAccept: */*\r\n"
                    "Origin: https://ui.perfetto.dev\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: cors\r\n"
                    "Sec-Fetch-Dest: empty\r\nReferer: https://ui.perfetto.dev/\r\nAccept-Encoding: gzip, deflate, br, "
                    "zstd\r\nAccept-Language: en-US,en;q=0.9\r\n\r\n",
    "perfetto_preflight": "OPTIONS /ranks/balanced/rank-00.json.gz HTTP/1.1\r\nHost: localhost:9001\r\n"
                          "Access-Control-Request-Method: GET\r\nAccess-Control-Request-Private-Network: true\r\n"
                          "Origin: https://ui.perfetto.dev\r\n\r\n",
    "browser_index": "GET / HTTP/1.1\r\nHost: localhost:9001\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) "
                     "Gecko/20100101 Firefox/133.0\r\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,"
                     "*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
                     "Connection: keep-alive\r\nUpgrade-Insecure-Requests: 1\r\nPriority: u=0, i\r\n\r\n",
    "curl_head": "HEAD /torch-1.13/blog/64_fp32_warm_eager.json HTTP/1.1\r\nHost: [::1]:9001\r\n"
                 "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
    "curl_encoded": "GET /kineto-public/hta_backward_thread_2022-10.json?x=1#frag HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
    "percent_path": "GET /ranks/windows/trainer-0_4000.1700000000123.pt.trace%2Ejson.gz HTTP/1.1\r\n"
                    "Host: 127.0.0.1:9001\r\n\r\n",
    "http10": "GET /index.html HTTP/1.0\r\n\r\n",
    "options_star": "OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    # The malformed heads of tests/unit/serve_test.cc.
    "extra_word": "GET / HTTP/1.1 extra\r\n\r\n",
    "ftp": "GET / FTP/1.0\r\n\r\n",
    "http2": "GET / HTTP/2.0\r\n\r\n",
    "no_colon": "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
    "folded": "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n",
    "two_hosts": "GET / HTTP/1.1\r\nHost: evil.example\r\nHost: 127.0.0.1\r\n\r\n",
    "host_userinfo": "GET / HTTP/1.1\r\nHost: user@127.0.0.1\r\n\r\n",
    "host_open_bracket": "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
    "host_tab": "GET / HTTP/1.1\r\nhOsT:\t127.0.0.1:9001 \r\n\r\n",
    "bare_lf": "GET / HTTP/1.1\nHost: 127.0.0.1\n\n",
    "traversal": "GET /../../etc/passwd.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "encoded_slash": "GET /ranks%2fbalanced/rank-00.json.gz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "hidden": "GET /.git/x.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "nul_target": "GET /after_fix_trace.json\0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "utf8_value": "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Utf8: \u00e9\r\n\r\n",
}


def http_corpus():
    out = fresh("corpus_http")
    for name, head in HEADS.items():
        (out / f"{name}.txt").write_bytes(head.encode("utf-8"))
    return len(HEADS)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("corpus_args:", args_corpus())
    print("corpus_summary:", summary_corpus(sys.argv[1]))
    print("corpus_http:", http_corpus())


if __name__ == "__main__":
    main()
