# Sourced by the Chromium page tests (chromium_test.sh, chromium_job_test.sh,
# chromium_job_compare_test.sh): the browser, the flags that keep it offline
# and quiet, and the checks every job page passes. The caller defines fail().

# Sets $browser, or exits 77 (CTest's SKIP_RETURN_CODE) when none is installed.
find_browser() {
  browser=""
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser="$(command -v "$b")"; break; fi
  done
  if [[ -z "$browser" ]]; then
    echo "SKIPPED: chromium not installed (scripts/setup.sh --test installs it)"
    exit 77
  fi
}

# Sets the array $flags for a headless run in a 1200x900 window with the
# profile directory $1 and a virtual-time budget of $2 ms. As the root user
# Chromium needs --no-sandbox; everything that could reach the network is
# off, so a page that fetched anything would fail to draw.
offline_flags() {
  flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
         --disable-component-update --disable-sync --user-data-dir="$1" --virtual-time-budget="$2"
         --enable-logging=stderr --v=0 --window-size=1200,900)
}

# Loads the page at URL $1 with --dump-dom into $2 (Chromium's log in
# $2.log) and fails unless Chromium exits 0, the page marks its body drawn
# (data-rendered="1") and nothing errs on the console. Sets $body (the
# drawn body tag). Needs $browser and $flags.
dump_drawn_dom() {
  timeout 120 "$browser" "${flags[@]}" --dump-dom "$1" >"$2" 2>"$2.log"
  local rc=$?
  [[ $rc == 0 ]] || { tail -20 "$2.log"; fail "chromium --dump-dom exited $rc"; }
  body="$(grep -o '<body[^>]*>' "$2" | head -1)"
  echo "body: $body"
  [[ "$body" == *'data-rendered="1"'* ]] || fail "page did not finish (no data-rendered=\"1\")"
  if grep -E 'CONSOLE.*(Uncaught|Error)|Uncaught ' "$2.log"; then fail "errors on the console"; fi
}

# A screenshot of the page at URL $1 into $2 (PNG), failing when there is
# none or it looks blank (3% of its pixels not white, 50 colours).
screenshot_not_blank() {
  timeout 120 "$browser" "${flags[@]}" --screenshot="$2" "$1" >/dev/null 2>"$2.log"
  local rc=$?
  [[ $rc == 0 && -s "$2" ]] || { tail -20 "$2.log"; fail "no screenshot (exit $rc)"; }
  local w h nonwhite colors
  read -r w h nonwhite colors < <(python3 "$(dirname "${BASH_SOURCE[0]}")/png_stats.py" "$2") || fail "cannot read the screenshot"
  echo "screenshot $2: ${w}x${h}, non-white fraction $nonwhite, $colors colours"
  python3 -c "import sys; sys.exit(0 if float('$nonwhite') > 0.03 and int('$colors') > 50 else 1)" \
    || fail "the screenshot looks blank"
}
