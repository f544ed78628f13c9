#!/usr/bin/env bash
# Opens tprof report A_DIR B_DIR's page (two jobs compared, the bytes of
# tprof compare --jobs A B --format html) in headless Chromium (offline,
# file://) at 1200x900 and checks: body[data-rendered="1"], no console
# errors, the page no wider than its window, no name left overflowing its
# box, one row per rank (section#ranks[data-ranks] = RANKS), each row's two
# bars as long as its A and B means on the page's one scale (a rank in one
# job only: one bar), the phases' bars likewise, and a screenshot that is
# not blank. One --dump-dom run and one screenshot.
#   chromium_job_compare_test.sh TPROF_BIN A_DIR B_DIR WORKDIR RANKS
# Exits 77 (CTest's SKIP_RETURN_CODE) when Chromium is not installed.
set -uo pipefail
tprof="$1" dir_a="$2" dir_b="$3" work="$4" want_ranks="$5"
fail() { echo "FAIL: $*"; exit 1; }

source "$(dirname "$0")/chromium_lib.sh"
find_browser

rm -rf "$work" && mkdir -p "$work"
"$tprof" -q report "$dir_a" "$dir_b" -o "$work/jobs.html" 2>"$work/tprof.err" || fail "tprof report A B: $(cat "$work/tprof.err")"

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
offline_flags "$profile" 3000
url="file://$work/jobs.html"

dump_drawn_dom "$url" "$work/dom.html"

python3 - "$work/dom.html" "$want_ranks" <<'PY' || fail "the page's structure (above)"
import re, sys
dom, want_ranks = open(sys.argv[1]).read(), int(sys.argv[2])
def attrs(tag):
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
body = attrs(re.search(r'<body[^>]*>', dom).group(0))
sw, ww = int(body["data-scroll-width"]), int(body["data-window-width"])
print(f"scroll width {sw}, window width {ww}; names cut {body.get('data-names-cut')}, overflowing {body.get('data-names-overflowing')}")
if sw > ww: fail(f"the page is {sw} px wide in a {ww} px window")
if body.get("data-names-overflowing") != "0": fail("names overflow their boxes")
def bars(block):
    return {r["class"]: float(r["width"]) / 1000 for r in (attrs(t) for t in re.findall(r'<rect [^>]*>', block))}
def check(label, block, a_ns, b_ns, longest):
    got = bars(block)
    for cls, ns in (("c-a", a_ns), ("c-b", b_ns)):
        want = ns / longest if longest else 0
        if ns <= 0:
            if cls in got: fail(f"{label}: a {cls} bar for nothing")
        elif abs(got.get(cls, -1) - want) > 0.001:
            fail(f"{label}: {cls} bar {got.get(cls)} of the scale, want {want:.4f}")
sec = attrs(re.search(r'<section id="ranks"[^>]*>', dom).group(0))
if int(sec["data-ranks"]) != want_ranks: fail(f"data-ranks {sec['data-ranks']}, want {want_ranks}")
rows = re.findall(r'(<div class="rank-row"[^>]*>)(.*?)</div></div>', dom, re.S)
if len(rows) != want_ranks: fail(f"{len(rows)} rank rows, want {want_ranks}")
longest = max(max(int(attrs(t)["data-a-ns"]), int(attrs(t)["data-b-ns"])) for t, _ in rows)
for tag, inner in rows:
    a = attrs(tag)
    check(f"rank {a['data-rank']}", inner, int(a["data-a-ns"]), int(a["data-b-ns"]), longest)
phases = re.findall(r'(<div class="phase"[^>]*>)(.*?)</div>', dom, re.S)
if not phases: fail("no phase bars")
plong = max(max(int(attrs(t)["data-a-ns"]), int(attrs(t)["data-b-ns"])) for t, _ in phases)
for tag, inner in phases:
    a = attrs(tag)
    check(f"phase {a['data-phase']}", inner, int(a["data-a-ns"]), int(a["data-b-ns"]), plong)
text = re.sub(r'<[^>]*>', ' ', re.sub(r'<(script|style)[^>]*>.*?</\1>', ' ', dom, flags=re.S))
if re.search(r'\w_ns\b', text): fail("a raw *_ns key in the page's text")
print(f"{len(rows)} rank rows and {len(phases)} phases, each bar as long as its mean on one scale")
PY

screenshot_not_blank "$url" "$work/jobs.png"
echo "OK: headless Chromium ($("$browser" --version 2>/dev/null | head -1)) drew the jobs compared"
