#!/bin/sh
# Rewrites tests/golden/expected/ from the current tprof (golden_cases_test
# with TPROF_UPDATE_GOLDEN=1), then lists what changed. Review the diff like
# code before keeping it.
#
#   tests/golden/update.sh [build-dir] [gtest flags]
#   tests/golden/update.sh build --gtest_filter='*public_hta_triton*'
#
# build-dir defaults to the checkout's build/. Cases whose exit status
# differs from the one written in cases.txt still fail (it is not updated).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
[ $# -gt 0 ] && shift
bin="$build/tests/golden/golden_cases_test"
if [ ! -x "$bin" ]; then
  echo "update.sh: $bin not found; configure and build first (see tests/README.md)" >&2
  exit 2
fi
cmake --build "$build" --target tprof_cli golden_cases_test >/dev/null
status=0
TPROF_UPDATE_GOLDEN=1 "$bin" --gtest_brief=1 "$@" || status=$?
if git -C "$here" rev-parse >/dev/null 2>&1; then
  git -C "$here" status --short -- expected
fi
exit $status
