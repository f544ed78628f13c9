#!/usr/bin/env bash
# tprof report's command line: -o is required, bad input exits 2 with the
# loader's message, a good trace gives one HTML file written atomically.
#   report_cli_test.sh TPROF_BIN TRACE WORKDIR
set -uo pipefail
tprof="$1" trace="$2" work="$3"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$tprof" -q report "$trace" >"$work/out" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "without -o: exit $rc, expected 2"
grep -q -- "--output is required" "$work/err" || fail "without -o: $(cat "$work/err")"

"$tprof" -q report "$work/missing.json" -o "$work/x.html" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "missing trace: exit $rc, expected 2"
grep -q "tprof: .*missing.json" "$work/err" || fail "missing trace: message was: $(cat "$work/err")"
[[ ! -e "$work/x.html" ]] || fail "missing trace: wrote a report anyway"

printf '{"traceEvents": [ nope ]}' >"$work/bad.json"
"$tprof" -q report "$work/bad.json" -o "$work/x.html" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "bad JSON: exit $rc, expected 2"
grep -q "byte" "$work/err" || fail "bad JSON: no byte offset in: $(cat "$work/err")"

"$tprof" -q report "$trace" -o "$trace" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "-o the input: exit $rc, expected 2"

"$tprof" -q report "$trace" -o "$work/report.html" >"$work/out" 2>"$work/err"; rc=$?
[[ $rc == 0 ]] || fail "report: exit $rc: $(cat "$work/err")"
[[ ! -s "$work/out" ]] || fail "report wrote to stdout"
head -c 15 "$work/report.html" | grep -q "<!DOCTYPE html>" || fail "not an HTML document"
grep -q 'data-steps="' "$work/report.html" || fail "no steps chart"
grep -q 'data-compare=' "$work/report.html" && fail "one trace, yet a compare section"

# Two traces: B's page with the compare section; a third is refused, and so
# is -o naming either input.
cp "$trace" "$work/b.json"
"$tprof" -q report "$trace" "$work/b.json" -o "$work/two.html" 2>"$work/err"; rc=$?
[[ $rc == 0 ]] || fail "report A B: exit $rc: $(cat "$work/err")"
grep -q '<section id="compare" data-compare="1"' "$work/two.html" || fail "report A B: no compare section"
"$tprof" -q report "$trace" "$work/b.json" "$work/b.json" -o "$work/three.html" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "three traces: exit $rc, expected 2"
"$tprof" -q report "$trace" "$work/b.json" -o "$work/b.json" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "-o naming B: exit $rc, expected 2"
"$tprof" -q report "$trace" "$work/missing.json" -o "$work/x.html" 2>"$work/err"; rc=$?
[[ $rc == 2 ]] || fail "missing B: exit $rc, expected 2"
grep -q "tprof: .*missing.json" "$work/err" || fail "missing B: message was: $(cat "$work/err")"
echo "OK: tprof report CLI ($(wc -c <"$work/report.html") bytes)"
