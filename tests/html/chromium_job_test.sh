#!/usr/bin/env bash
# Opens tprof report DIR's job page in headless Chromium (offline, file://)
# at 1200x900 and checks: body[data-rendered="1"], no console errors, the
# page no wider than its window (body[data-scroll-width] <= data-window-width),
# one row of step bars per rank (section#ranks[data-ranks]), every step bar's
# parts (computation + exposed communication + idle) summing to its step,
# the straggler section naming STRAGGLER (or none: -1), and a screenshot
# that is not blank, long names cut in their middle (none overflowing its
# box: body[data-names-overflowing="0"]). One --dump-dom run and one
# screenshot.
#   chromium_job_test.sh TPROF_BIN DIR WORKDIR RANKS STRAGGLER
#   ONE_STEP=1: every rank has one step: its stats say "1 step: no spread"
#     (never "±0 ns"), the text view's step MAD "-" (never "0 ns"), and its step is one horizontal bar as long as the
#     step on one scale for every rank (the screenshot: no bar taller than
#     24 px)
# Exits 77 (CTest's SKIP_RETURN_CODE) when Chromium is not installed.
set -uo pipefail
tprof="$1" dir="$2" work="$3" want_ranks="$4" want_straggler="$5"
fail() { echo "FAIL: $*"; exit 1; }

source "$(dirname "$0")/chromium_lib.sh"
find_browser

rm -rf "$work" && mkdir -p "$work"
"$tprof" -q report "$dir" -o "$work/job.html" 2>"$work/tprof.err" || fail "tprof report DIR: $(cat "$work/tprof.err")"

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
offline_flags "$profile" 3000
url="file://$work/job.html"

dump_drawn_dom "$url" "$work/dom.html"

python3 - "$work/dom.html" "$want_ranks" "$want_straggler" "${ONE_STEP:-0}" <<'PY' || fail "the page's structure (above)"
import re, sys
dom, want_ranks, want_straggler, one_step = open(sys.argv[1]).read(), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
def attrs(tag):
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
body = attrs(re.search(r'<body[^>]*>', dom).group(0))
sw, ww = int(body["data-scroll-width"]), int(body["data-window-width"])
print(f"scroll width {sw}, window width {ww}")
if sw > ww: fail(f"the page is {sw} px wide in a {ww} px window")
# Long names cut in their middle, none left overflowing (cut at its end).
print(f"names cut in the middle: {body.get('data-names-cut')}, overflowing: {body.get('data-names-overflowing')}")
if body.get("data-names-overflowing") != "0": fail("names overflow their boxes (CSS cuts their end)")
for t in re.findall(r'<[a-z]+ [^>]*data-elided="1"[^>]*>([^<]*)<', dom):
    head, _, tail = t.rpartition("\u2026")
    if len(head) < 4 or len(tail) < 4: fail(f"a name not cut in its middle: {t!r}")
ranks = attrs(re.search(r'<section id="ranks"[^>]*>', dom).group(0))
if int(ranks["data-ranks"]) != want_ranks: fail(f"data-ranks {ranks['data-ranks']}, want {want_ranks}")
rows = [attrs(t) for t in re.findall(r'<div class="rank-row[^"]*"[^>]*>', dom)]
if len(rows) != want_ranks: fail(f"{len(rows)} rank rows, want {want_ranks}")
bars = [attrs(t) for t in re.findall(r'<g class="step"[^>]*>', dom)]
if len(bars) != int(ranks["data-steps-drawn"]): fail(f"{len(bars)} step bars, the section says {ranks['data-steps-drawn']}")
for r in rows:
    if int(r["data-drawn"]) < 1: fail(f"rank {r['data-rank']} has no step bars")
if sum(int(r["data-drawn"]) for r in rows) != len(bars): fail("step bars do not add up per rank")
for b in bars:
    parts = int(b["data-computation-ns"]) + int(b["data-communication-ns"]) + int(b["data-idle-ns"])
    if parts != int(b["data-dur-ns"]): fail(f"step {b['data-step']}: parts {parts} != step {b['data-dur-ns']}")
rects = len(re.findall(r'<rect class="c-(comp|comm|idle)"', dom))
if rects < len(bars): fail(f"{rects} bar rectangles for {len(bars)} steps")
s = attrs(re.search(r'<section id="straggler"[^>]*>', dom).group(0))
if want_straggler == "-1":
    if s["data-named"] != "0": fail(f"a straggler named: rank {s.get('data-rank')}")
elif s["data-named"] != "1" or s["data-rank"] != want_straggler:
    fail(f"straggler {s.get('data-rank')} (named {s['data-named']}), want rank {want_straggler}")
for key in ("_ns", "_pct"):
    text = re.sub(r'<[^>]*>', ' ', re.sub(r'<(script|style)[^>]*>.*?</\1>', ' ', dom, flags=re.S))
    if re.search(r'\w' + key + r'\b', text): fail(f"a raw *{key} key in the page's text")
print(f"{len(rows)} ranks, {len(bars)} step bars whose parts sum to the step, straggler {s.get('data-rank', 'none')}")
if one_step:
    page = re.sub(r'<pre>.*?</pre>', ' ', dom, flags=re.S)  # the text view is tprof diagnose's, as it prints
    stats = [re.sub(r'<[^>]*>', ' ', t) for t in re.findall(r'<div class="rank-stats">(.*?)</div>', dom, re.S)]
    print("rank stats:", stats[0] if stats else None)
    if "\u00b1" in page or "&plusmn;" in page: fail("a spread of one step (\u00b1) on the page")
    if len(stats) != want_ranks or not all(t.startswith("1 step: no spread") for t in stats):
        fail("a rank of one step whose stats do not say '1 step: no spread'")
    if ranks.get("data-layout") != "horizontal": fail(f"one step per rank drawn as {ranks.get('data-layout', 'vertical')} bars")
    longest = int(ranks["data-max-step-ns"])
    for g in re.findall(r'<g class="step"[^>]*>.*?</g>', dom, re.S):
        a = attrs(re.match(r'<g[^>]*>', g).group(0))
        rects = [attrs(r) for r in re.findall(r'<rect[^>]*>', g)]
        heights = {r["height"] for r in rects}
        length = sum(float(r["width"]) for r in rects) / 1000
        if len(heights) != 1 or abs(length - int(a["data-dur-ns"]) / longest) > 0.01:
            fail(f"step {a['data-step']}: not one horizontal bar as long as its step ({length:.3f} of the scale, heights {heights})")
    # The text view (tprof diagnose DIR's table) gives no step MAD for one
    # step: "-", never "0 ns".
    pre = "\n".join(re.findall(r'<pre>(.*?)</pre>', dom, re.S))
    mads = re.findall(r'^\s*\d+\s+1\s+[\d.]+ \w+\s+(\S+(?: ns)?)\s', pre, re.M)
    if len(mads) != want_ranks or any(m != "-" for m in mads):
        fail(f"the text view's step MAD of one-step ranks: {mads[:4]} (want '-' for {want_ranks} ranks)")
    print("one step per rank: horizontal bars, '1 step: no spread', step MAD '-'")
PY

screenshot_not_blank "$url" "$work/job.png"
if [[ "${ONE_STEP:-}" == 1 ]]; then
  # Bars a few pixels tall, in rows: the exposed communication (orange)
  # never runs down more than one bar's height.
  run=$(python3 "$(dirname "$0")/png_stats.py" "$work/job.png" --vrun 245,133,24)
  echo "tallest run of a bar's colour in the screenshot: $run px"
  (( run > 0 && run <= 24 )) || fail "one-step bars $run px tall: not horizontal bars"
fi
echo "OK: headless Chromium ($("$browser" --version 2>/dev/null | head -1)) drew the job page"
