# Sourced by the Chromium page tests (chromium_test.sh, chromium_job_test.sh):
# the browser, and the flags that keep it offline and quiet.

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
