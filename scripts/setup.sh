#!/usr/bin/env bash
# Installs the Debian 12 packages tprof needs, when they are missing.
#   scripts/setup.sh            build dependencies
#   scripts/setup.sh --test     + what the test suite uses (python3-torch for the
#                                 real-PyTorch integration test, chromium for the
#                                 headless test of tprof report's page, clang for
#                                 the strict-flags consumer test and make test's
#                                 ASan+UBSan and libFuzzer build, with its
#                                 sanitizer and libFuzzer runtimes, the sqlite3
#                                 shell for tprof export --sqlite's, zsh and fish
#                                 for the completion scripts' tests; optional)
# Nothing is downloaded at build time; apt is the only source.
set -euo pipefail

BUILD_PKGS=(cmake ninja-build g++ make pkg-config git
            libsimdjson-dev libcli11-dev libdeflate-dev zlib1g-dev
            libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libsqlite3-dev
            pybind11-dev python3-dev python3-numpy)
TEST_PKGS=(python3 python3-torch chromium clang sqlite3 python3-pandas python3-distributed zsh fish)

want=("${BUILD_PKGS[@]}")
optional=()
if [[ "${1:-}" == "--test" ]]; then
  optional=("${TEST_PKGS[@]}")
fi

missing() {
  local out=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
  done
  echo "${out[@]:-}"
}

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; fi
fi

apt_install() {
  # A fresh machine may have empty package lists: update once, then install.
  if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; then
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
  fi
}

need=$(missing "${want[@]}")
if [[ -n "$need" ]]; then
  echo "setup: installing $need"
  # shellcheck disable=SC2086
  apt_install $need
fi

if [[ ${#optional[@]} -gt 0 ]]; then
  need=$(missing "${optional[@]}")
  if [[ -n "$need" ]]; then
    echo "setup: installing $need (for the real-PyTorch and headless-browser tests)"
    # shellcheck disable=SC2086
    apt_install $need || echo "setup: could not install $need; the tests that need it will say they are skipped"
  fi
  # clang's sanitizer and libFuzzer runtimes (libclang_rt.*) are only
  # recommended by clang-N, and apt here installs no recommendations: the
  # package of the installed clang's version (Debian 12: libclang-rt-14-dev).
  if command -v clang >/dev/null; then
    rt="libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
    if [[ -n "$(missing "$rt")" ]]; then
      echo "setup: installing $rt (clang's ASan, UBSan and libFuzzer runtimes, for make test's fuzz build)"
      apt_install "$rt" || echo "setup: could not install $rt; make test builds its ASan+UBSan tests with g++ and skips the fuzz run"
    fi
  fi
fi
