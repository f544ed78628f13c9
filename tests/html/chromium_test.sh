#!/usr/bin/env bash
# Opens tprof report's page in headless Chromium (offline, file://, a
# 1200x900 window) and checks that its scripts ran: body[data-rendered="1"],
# no body[data-errors], no uncaught errors on the console, the page no wider
# than its window (body[data-scroll-width] <= body[data-window-width]), one
# chart per step / kernel as the page announces them, every step's stacked
# bar summing to the step, the timeline's lanes and the flame graph's nodes
# drawn, tick labels in sensible units, the JavaScript Perfetto links equal
# to the C++ ones, each step's critical-path bar summing to the path's
# length (its bound-type shares and the unexplained time), the path's
# stretches drawn on the timeline with the "critical path" box checked, and
# a screenshot that is not blank. With TRACE_B the page
# is `tprof report TRACE TRACE_B` (B against A; STEPS and KERNELS are B's)
# and must carry the compare section.
#   chromium_test.sh TPROF_BIN TRACE WORKDIR STEPS KERNELS [TRACE_B]
#   QUEUE_GROWS=1: the steps' queue (data-lag-ns) grows from step to step
#   CPU_BUSY=1: every step shows CPU busy time (a CPU-only trace)
#   CRITICAL_STEPS=N: the critical path has N steps, all of them marked
#   MEMORY_OP=NAME: the memory chart's caption names NAME as the op that reached the peak
#   MEMORY_SPIKES=N: the first memory chart marks N steps' spikes
#   FLAME_EMPTY=1: the trace has no host ops: no flame graph
#   STEP_COMPUTE_PIXELS=N: the step chart, alone, shows N pixels of compute
#   IDLE_COLOURS=1: with every part injected in every step, one colour each,
#     in the legend and the bars
#   and check_page.py's: STEP_SCALE, STEP_DEVICE_MIN_US, STEP_COMPUTE_MIN_PCT,
#     BACKLOG, NO_STEPS, LOG_X, NAMES_ELIDED (tooltips, names and the
#     histograms' labels and ticks are checked on every page)
#   chromium_test.sh TPROF_BIN sweep:MATMUL_ADD WORKDIR SIZES
#     tprof sweep's page (sizes like 16,64,256): drawn, no dates on its x
#     axis (the sizes themselves), no wider than its window.
# Exits 77 (CTest's SKIP_RETURN_CODE) when Chromium is not installed.
set -uo pipefail
tprof="$1" trace="$2" work="$3" want_steps="$4" want_kernels="${5:-}" trace_b="${6:-}"
fail() { echo "FAIL: $*"; exit 1; }

source "$(dirname "$0")/chromium_lib.sh"
find_browser

rm -rf "$work" && mkdir -p "$work"
if [[ "$trace" == sweep:* && ! -x "${trace#sweep:}" ]]; then
  echo "SKIPPED: ${trace#sweep:} not built (examples/matmul_add needs OpenBLAS): no sweep page"
  exit 0
fi
if [[ "$trace" == sweep:* ]]; then
  "$tprof" -q sweep --program "${trace#sweep:}" --sizes "$want_steps" --steps 2 --html "$work/report.html" \
    >"$work/sweep.txt" 2>"$work/tprof.err" || fail "tprof sweep: $(cat "$work/tprof.err")"
else
  "$tprof" -q report "$trace" ${trace_b:+"$trace_b"} -o "$work/report.html" 2>"$work/tprof.err" \
    || fail "tprof report: $(cat "$work/tprof.err")"
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
offline_flags "$profile" 5000
url="file://$work/report.html"

timeout 120 "$browser" "${flags[@]}" --dump-dom "$url" >"$work/dom.html" 2>"$work/chromium.log"
rc=$?
[[ $rc == 0 ]] || { tail -20 "$work/chromium.log"; fail "chromium --dump-dom exited $rc"; }

body="$(grep -o '<body[^>]*>' "$work/dom.html" | head -1)"
echo "body: $body"
[[ "$body" == *'data-rendered="1"'* ]] || fail "page did not finish drawing (no data-rendered=\"1\")"
[[ "$body" != *'data-errors='* ]] || fail "page reported errors: $body"
if grep -E 'CONSOLE.*(Uncaught|Error)|Uncaught ' "$work/chromium.log"; then fail "errors on the console"; fi

attr() {  # attr ID NAME: the attribute NAME of the element with id ID in the DOM
  grep -o "<[a-z]* id=\"$1\"[^>]*>" "$work/dom.html" | head -1 | grep -o " $2=\"[^\"]*\"" | cut -d'"' -f2
}
battr() { grep -o " $1=\"[^\"]*\"" <<<"$body" | cut -d'"' -f2; }
scroll_w="$(battr data-scroll-width)" window_w="$(battr data-window-width)"
echo "page width $scroll_w in a window of $window_w"
[[ -n "$scroll_w" && -n "$window_w" ]] || fail "no data-scroll-width / data-window-width on body"
(( scroll_w <= window_w )) || fail "the page is wider ($scroll_w px) than its window ($window_w px)"

shoot() {  # a 1200x900 screenshot that is not blank
  timeout 120 "$browser" "${flags[@]}" --hide-scrollbars --screenshot="$work/report.png" "$url" \
    >/dev/null 2>"$work/chromium-shot.log"
  local rc=$?
  [[ $rc == 0 && -s "$work/report.png" ]] || { tail -20 "$work/chromium-shot.log"; fail "no screenshot (exit $rc)"; }
  read -r w h nonwhite colors < <(python3 "$(dirname "$0")/png_stats.py" "$work/report.png") || fail "cannot read the screenshot"
  echo "screenshot $work/report.png: ${w}x${h}, non-white fraction $nonwhite, $colors colours"
  python3 -c "import sys; sys.exit(0 if float('$nonwhite') > 0.03 and int('$colors') > 50 else 1)" \
    || fail "the screenshot looks blank"
}

if [[ "$trace" == sweep:* ]]; then
  xticks="$(attr sweep-chart data-xticks)"
  echo "sweep chart: drawn $(attr sweep-chart data-drawn), x ticks $xticks"
  [[ "$(attr sweep-chart data-drawn)" == "$(attr sweep-chart data-points)" ]] || fail "sweep chart not drawn"
  [[ "$xticks" == "${want_steps//,/|}" ]] || fail "sweep x axis labels '$xticks', want the sizes ${want_steps}"
  shoot
  echo "OK: headless Chromium drew tprof sweep's page"
  exit 0
fi
steps="$(attr steps-chart data-steps)" drawn_steps="$(attr steps-chart data-drawn)"
kernels="$(attr kernels-chart data-kernels)" drawn_kernels="$(attr kernels-chart data-drawn)"
rows="$(attr ops-table data-rows)"
echo "steps $steps (drawn $drawn_steps), kernels $kernels (drawn $drawn_kernels), op rows $rows"
[[ "$steps" == "$want_steps" && "$drawn_steps" == "$want_steps" ]] || fail "steps: want $want_steps"
[[ "$kernels" == "$want_kernels" && "$drawn_kernels" == "$want_kernels" ]] || fail "kernels: want $want_kernels"
hists=$(grep -o 'class="kernel-hist"' "$work/dom.html" | wc -l)
plots=$(grep -o 'class="uplot' "$work/dom.html" | wc -l)
[[ $hists == "$want_kernels" ]] || fail "$hists kernel histograms in the DOM, want $want_kernels"
# The memory charts (docs/memory.md): one per device the page announces,
# each caption naming the op that reached the peak (MEMORY_OP, when set).
mem="$(attr memory-chart data-devices)" drawn_mem="$(attr memory-chart data-drawn)"
echo "memory charts ${mem:-0} (drawn ${drawn_mem:-0})"
[[ "${mem:-0}" == "${drawn_mem:-0}" ]] || fail "memory charts: $drawn_mem drawn of $mem"
if [[ -n "${MEMORY_SPIKES:-}" ]]; then
  spikes="$(grep -o 'class="memory-device"[^>]*' "$work/dom.html" | grep -o 'data-spikes="[0-9]*"' | head -1 | cut -d'"' -f2)"
  [[ "$spikes" == "$MEMORY_SPIKES" ]] || fail "memory chart marks ${spikes:-no} spikes, want $MEMORY_SPIKES"
fi
if [[ -n "${MEMORY_OP:-}" ]]; then
  op_html="$(sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g' <<<"$MEMORY_OP")"
  grep -qF "class=\"memory-caption\" data-op=\"${op_html}\"" "$work/dom.html" \
    || fail "no memory chart caption names ${MEMORY_OP} at the peak: $(grep -o 'class="memory-caption"[^>]*>[^<]*' "$work/dom.html")"
fi
[[ $plots == $((want_kernels + ${mem:-0})) ]] || fail "$plots uPlot charts in the DOM, want $want_kernels + ${mem:-0}"
[[ -n "$rows" && "$rows" -gt 0 ]] || fail "op table has no rows"
[[ $(grep -o '<tr>' "$work/dom.html" | wc -l) -gt "$rows" ]] || fail "op table rows missing from the DOM"

# Where the step went: one bar per step whose parts sum to the step (the
# data are integer ns: within 1 us of rounding), the queue and CPU busy.
python3 - "$work/dom.html" "$want_steps" "${QUEUE_GROWS:-0}" "${CPU_BUSY:-0}" <<'PY' || fail "step bars"
import re, sys
dom, want, queue, cpu = open(sys.argv[1]).read(), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
bars = [dict(re.findall(r'data-([a-z-]+)="(-?\d+)"', b)) for b in re.findall(r'<i class="step-bar"[^>]*>', dom)]
print("step bars:", len(bars), "lags (us):", [int(b["lag-ns"]) // 1000 for b in bars])
if len(bars) != want: sys.exit(f"{len(bars)} step bars, want {want}")
for b in bars:
    if abs(int(b["sum-ns"]) - int(b["dur-ns"])) > 1000:
        sys.exit(f"step {b['step']}: parts sum to {b['sum-ns']} ns, the step is {b['dur-ns']} ns")
lags = [int(b["lag-ns"]) for b in bars]
if queue and not (all(b > a for a, b in zip(lags, lags[1:])) and lags[0] > 0):
    sys.exit(f"the queue does not grow from step to step: {lags}")
if cpu and not all(int(b["cpu-busy-ns"]) > 0 for b in bars):
    sys.exit("a step shows no CPU busy time")
PY
# The critical path per step: one bar per step whose bound-type shares and
# unexplained time sum to the path's length exactly (integer ns), and its
# stretches drawn on the timeline, the "critical path" box checked.
python3 - "$work/dom.html" "${CRITICAL_STEPS:-}" <<'PY' || fail "critical path"
import re, sys
dom, want = open(sys.argv[1]).read(), sys.argv[2]
chart = re.search(r'<div id="critical-chart"[^>]*>', dom)
if not chart: sys.exit("no #critical-chart")
attrs = dict(re.findall(r' (data-[a-z-]+)="([^"]*)"', chart.group(0)))
bounds = ["cpu-bound", "gpu-compute-bound", "gpu-communication-bound", "kernel-launch-overhead",
          "kernel-kernel-overhead", "data-loading"]
bars = [dict(re.findall(r'data-([a-z-]+)="(-?\d+)"', b)) for b in re.findall(r'<i class="cp-bar"[^>]*>', dom)]
print("critical path:", attrs.get("data-steps"), "steps, drawn", attrs.get("data-drawn"), "; stretches",
      attrs.get("data-segments"), "of", attrs.get("data-segments-total"))
if attrs.get("data-drawn") != attrs.get("data-steps") or len(bars) != int(attrs["data-steps"]) or not bars:
    sys.exit(f"{len(bars)} critical-path bars, the chart announces {attrs.get('data-steps')}")
if want and (int(attrs["data-steps"]) != int(want) or int(attrs["data-steps-marked"]) != int(want)):
    sys.exit(f"want {want} steps, all marked: {attrs}")
for b in bars:
    shares = sum(int(b[k]) for k in bounds) + int(b["unexplained-ns"])
    if not (int(b["sum-ns"]) == shares == int(b["length-ns"])):
        sys.exit(f"step {b['step']}: shares sum to {shares} ns (drawn {b['sum-ns']}), the path is {b['length-ns']} ns")
tl = re.search(r'<div id="timeline"[^>]*>', dom).group(0)
crit, drawn = re.search(r' data-critical="(\d+)"', tl), re.search(r' data-critical-drawn="(\d+)"', tl)
print("timeline: critical stretches", crit and crit.group(1), "drawn", drawn and drawn.group(1))
if crit and int(crit.group(1)) > 0:
    if not drawn or int(drawn.group(1)) == 0: sys.exit("no critical-path stretch drawn on the timeline")
    box = re.search(r'<input[^>]*id="tl-critical"[^>]*>', dom)
    if not box or "checked" not in box.group(0): sys.exit("no checked \"critical path\" box on the timeline")
PY
# Ticks: the unit follows the visible range ("250 us", "1.5 ms"): no
# trailing zeros, never 1000 or more of a unit.
for id in steps-chart critical-chart timeline; do
  [[ "$id" == steps-chart && "$want_steps" == 0 ]] && continue  # no steps, no step chart
  ticks="$(attr "$id" data-ticks)"
  echo "$id ticks: $ticks"
  [[ -n "$ticks" ]] || fail "$id: no data-ticks"
  if tr '|' '\n' <<<"$ticks" | grep -Ev '^-?(0|[1-9][0-9]{0,2})(\.[0-9]*[1-9])? (s|ms|us|ns)$'; then
    fail "$id: tick labels out of form"
  fi
done
# The script's Perfetto links are the C++ ones (src/base/url.h): the first
# mark's equals the first cause's "open in Perfetto UI" link.
first_cause_link="$(grep -o '<a class="perfetto" href="[^"]*"' "$work/dom.html" | head -1 | cut -d'"' -f4)"
first_mark_link="$(grep -o '<li data-perfetto="[^"]*"' "$work/dom.html" | head -1 | cut -d'"' -f2)"
echo "perfetto link: $first_mark_link"
[[ -z "$first_cause_link$first_mark_link" || "$first_cause_link" == "$first_mark_link" ]] \
  || fail "the page's Perfetto link ($first_mark_link) differs from the C++ one ($first_cause_link)"

lanes="$(attr timeline data-lanes)" drawn_lanes="$(attr timeline data-drawn)"
intervals="$(attr timeline data-intervals)" marks="$(attr timeline data-marks)"
nodes="$(attr flame data-nodes)" drawn_nodes="$(attr flame data-drawn)"
echo "timeline: $lanes lanes (drawn $drawn_lanes), $intervals intervals, $marks marks; flame graph: $nodes nodes (drawn $drawn_nodes)"
[[ -n "$lanes" && "$lanes" -gt 0 && "$drawn_lanes" == "$lanes" ]] || fail "timeline lanes not drawn"
[[ -n "$intervals" && "$intervals" -gt 0 ]] || fail "timeline has no intervals"
[[ -n "$marks" ]] || fail "timeline has no data-marks"
if [[ "${FLAME_EMPTY:-}" == 1 ]]; then
  [[ "$nodes" == 0 && "$drawn_nodes" == 0 ]] || fail "a flame graph of $nodes nodes, want none (no host ops)"
else
  [[ -n "$nodes" && "$nodes" -gt 1 && "$drawn_nodes" == "$nodes" ]] || fail "flame graph not drawn"
fi
# A canvas per kernel chart, the timeline, the step chart and the flame
# graph (the last two when there are steps and host ops).
[[ $(grep -o '<canvas' "$work/dom.html" | wc -l) -ge $((want_kernels + 1 + (want_steps > 0) + (${FLAME_EMPTY:-0} != 1))) ]] \
  || fail "canvases missing"
if [[ -n "$trace_b" ]]; then
  [[ "$(attr compare data-compare)" == 1 ]] || fail "no compare section (data-compare=\"1\")"
  grep -q '>aten::addmm</code>' "$work/dom.html" || fail "compare section lists no aten::addmm"
  echo "compare section: alignment $(attr compare data-alignment), verdict changed $(attr compare data-verdict-changed)"
else
  [[ -z "$(attr compare data-compare)" ]] || fail "one trace, yet a compare section"
fi

shoot

# What a reader sees (issue 40, item 6): a copy of the page carrying
# page_probe.js hovers the charts, measures tooltips, names and labels, and
# can rewrite the data first (#inject=idle) or show one part alone
# (#focus=ID) for a screenshot. check_page.py reads what it left; every
# check runs, then the failures are listed.
python3 "$(dirname "$0")/probe_page.py" "$work/report.html" "$work/probe.html" || fail "cannot write the probed copy"
purl="file://$work/probe.html"
probe_dom() {  # probe_dom HASH NAME: the probed copy's DOM at #HASH, in $work/NAME.dom
  timeout 120 "$browser" "${flags[@]}" --dump-dom "$purl#$1" >"$work/$2.dom" 2>"$work/$2.log" \
    || { tail -20 "$work/$2.log"; fail "chromium --dump-dom of the probed page exited $?"; }
  grep -q 'data-probed="1"' "$work/$2.dom" || fail "the probe did not run (#$1)"
}
probe_shot() {  # probe_shot HASH PNG: a screenshot of the probed copy at #HASH
  timeout 120 "$browser" "${flags[@]}" --hide-scrollbars --screenshot="$work/$2" "$purl#$1" >/dev/null 2>"$work/$2.log"
  [[ -s "$work/$2" ]] || { tail -20 "$work/$2.log"; fail "no screenshot of #$1"; }
}
pstats() { python3 "$(dirname "$0")/png_stats.py" "$@"; }
status=0
probe_dom "" probe
COMPARE=$([[ -n "$trace_b" ]] && echo 1 || echo 0) python3 "$(dirname "$0")/check_page.py" "$work/probe.dom" || status=1
# The device's work per step fills the step chart (its compute colour).
if [[ -n "${STEP_COMPUTE_PIXELS:-}" ]]; then
  probe_shot "focus=steps-chart" steps.png
  px=$(pstats "$work/steps.png" --count 60,120,200)
  echo "step chart ($work/steps.png): $px pixels of compute, want ${STEP_COMPUTE_PIXELS} or more"
  (( px >= STEP_COMPUTE_PIXELS )) || { echo "FAIL: the step chart shows $px pixels of the device's compute"; status=1; }
fi
# Every part in every step: one colour each in the legend, each of them
# seen in the bars.
if [[ "${IDLE_COLOURS:-}" == 1 ]]; then
  probe_dom "inject=idle" inject
  python3 "$(dirname "$0")/check_page.py" "$work/inject.dom" --inject --colours "$work/colours.txt" || status=1
  if [[ -s "$work/colours.txt" ]]; then
    probe_shot "inject=idle&focus=steps-chart" idle.png
    mapfile -t cols <"$work/colours.txt"
    mapfile -t counts < <(pstats "$work/idle.png" --count "${cols[@]}")
    for i in "${!cols[@]}"; do
      # 20 px wide in the legend's swatches alone; the bars hold hundreds.
      (( counts[i] >= 300 )) || { echo "FAIL: colour ${cols[i]} of the legend covers ${counts[i]} pixels of the chart ($work/idle.png)"; status=1; }
    done
    echo "legend colours in the bars ($work/idle.png): ${counts[*]}"
  fi
fi
# The compare page's lists: each name a chip of its own.
if [[ -n "$trace_b" ]]; then
  probe_shot "focus=compare-changes" lists.png
  px=$(pstats "$work/lists.png" --count 238,241,245)
  echo "compare lists ($work/lists.png): $px pixels of name chips"
  (( px >= 2000 )) || { echo "FAIL: the new / vanished names are not set apart (no chips)"; status=1; }
fi
(( status == 0 )) || fail "what the page shows (above)"
echo "OK: headless Chromium ($("$browser" --version 2>/dev/null | head -1)) drew the report"
