#!/usr/bin/env bash
# Opens tprof report's page in headless Chromium (offline, file://) and checks
# that its scripts ran: body[data-rendered="1"], no body[data-errors], no
# uncaught errors on the console, one chart per step / kernel as the page
# announces them, the timeline's lanes and the flame graph's nodes drawn,
# and a screenshot that is not blank. With TRACE_B the page is
# `tprof report TRACE TRACE_B` (B against A; STEPS and KERNELS are B's) and
# must carry the compare section.
#   chromium_test.sh TPROF_BIN TRACE WORKDIR STEPS KERNELS [TRACE_B]
# Exits 77 (CTest's SKIP_RETURN_CODE) when Chromium is not installed.
set -uo pipefail
tprof="$1" trace="$2" work="$3" want_steps="$4" want_kernels="$5" trace_b="${6:-}"
fail() { echo "FAIL: $*"; exit 1; }

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$(command -v "$b")"; break; fi
done
if [[ -z "$browser" ]]; then
  echo "SKIPPED: chromium not installed (scripts/setup.sh --test installs it)"
  exit 77
fi

rm -rf "$work" && mkdir -p "$work"
"$tprof" -q report "$trace" ${trace_b:+"$trace_b"} -o "$work/report.html" 2>"$work/tprof.err" || fail "tprof report: $(cat "$work/tprof.err")"

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# As the root user Chromium needs --no-sandbox; everything that could reach
# the network is off, so a page that fetched anything would fail to draw.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --virtual-time-budget=5000
       --enable-logging=stderr --v=0)
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
  grep -o "<[a-z]* id=\"$1\"[^>]*>" "$work/dom.html" | head -1 | grep -o "$2=\"[^\"]*\"" | cut -d'"' -f2
}
steps="$(attr steps-chart data-steps)" drawn_steps="$(attr steps-chart data-drawn)"
kernels="$(attr kernels-chart data-kernels)" drawn_kernels="$(attr kernels-chart data-drawn)"
rows="$(attr ops-table data-rows)"
echo "steps $steps (drawn $drawn_steps), kernels $kernels (drawn $drawn_kernels), op rows $rows"
[[ "$steps" == "$want_steps" && "$drawn_steps" == "$want_steps" ]] || fail "steps: want $want_steps"
[[ "$kernels" == "$want_kernels" && "$drawn_kernels" == "$want_kernels" ]] || fail "kernels: want $want_kernels"
hists=$(grep -o 'class="kernel-hist"' "$work/dom.html" | wc -l)
plots=$(grep -o 'class="uplot' "$work/dom.html" | wc -l)
[[ $hists == "$want_kernels" ]] || fail "$hists kernel histograms in the DOM, want $want_kernels"
[[ $plots == $((want_kernels + 1)) ]] || fail "$plots uPlot charts in the DOM, want $((want_kernels + 1))"
[[ -n "$rows" && "$rows" -gt 0 ]] || fail "op table has no rows"
[[ $(grep -o '<tr>' "$work/dom.html" | wc -l) -gt "$rows" ]] || fail "op table rows missing from the DOM"

lanes="$(attr timeline data-lanes)" drawn_lanes="$(attr timeline data-drawn)"
intervals="$(attr timeline data-intervals)" marks="$(attr timeline data-marks)"
nodes="$(attr flame data-nodes)" drawn_nodes="$(attr flame data-drawn)"
echo "timeline: $lanes lanes (drawn $drawn_lanes), $intervals intervals, $marks marks; flame graph: $nodes nodes (drawn $drawn_nodes)"
[[ -n "$lanes" && "$lanes" -gt 0 && "$drawn_lanes" == "$lanes" ]] || fail "timeline lanes not drawn"
[[ -n "$intervals" && "$intervals" -gt 0 ]] || fail "timeline has no intervals"
[[ -n "$marks" ]] || fail "timeline has no data-marks"
[[ -n "$nodes" && "$nodes" -gt 1 && "$drawn_nodes" == "$nodes" ]] || fail "flame graph not drawn"
[[ $(grep -o '<canvas' "$work/dom.html" | wc -l) -ge $((want_kernels + 3)) ]] || fail "canvases missing"
if [[ -n "$trace_b" ]]; then
  [[ "$(attr compare data-compare)" == 1 ]] || fail "no compare section (data-compare=\"1\")"
  grep -q '<code>aten::addmm</code>' "$work/dom.html" || fail "compare section lists no aten::addmm"
  echo "compare section: alignment $(attr compare data-alignment), verdict changed $(attr compare data-verdict-changed)"
else
  [[ -z "$(attr compare data-compare)" ]] || fail "one trace, yet a compare section"
fi

timeout 120 "$browser" "${flags[@]}" --screenshot="$work/report.png" --window-size=1200,900 "$url" \
  >/dev/null 2>"$work/chromium-shot.log"
rc=$?
[[ $rc == 0 && -s "$work/report.png" ]] || { tail -20 "$work/chromium-shot.log"; fail "no screenshot (exit $rc)"; }
read -r w h nonwhite colors < <(python3 "$(dirname "$0")/png_stats.py" "$work/report.png") || fail "cannot read the screenshot"
echo "screenshot $work/report.png: ${w}x${h}, non-white fraction $nonwhite, $colors colours"
python3 -c "import sys; sys.exit(0 if float('$nonwhite') > 0.03 and int('$colors') > 50 else 1)" \
  || fail "the screenshot looks blank"
echo "OK: headless Chromium ($("$browser" --version 2>/dev/null | head -1)) drew the report"
