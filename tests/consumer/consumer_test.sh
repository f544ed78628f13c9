#!/bin/bash
# Installs the tprof build BUILD into a temporary prefix and builds a small
# consumer three ways (issue 14): find_package(tprof) (C++17 capture and
# C++20 everything), pkg-config (tprof-capture as C++17, tprof as C++20),
# and FetchContent of the source tree (capture only, without libdeflate or
# zlib, checking the subproject adds no global targets or cache settings).
# Each consumer program runs and its trace is read back by the installed CLI.
# Then cpack makes the .deb, and its tprof runs from the unpacked package.
#
#   consumer_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/tprof_consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake_gen=()
command -v ninja >/dev/null && cmake_gen=(-G Ninja)

step() { echo "== $*"; }

step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in bin/tprof include/tprof/profiler.h include/tprof/tprof.h share/man/man1/tprof.1 \
  share/bash-completion/completions/tprof; do
  test -e "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
config=$(find "$prefix" -name tprofConfig.cmake)
version=$(find "$prefix" -name tprofConfigVersion.cmake)
pcdir=$(dirname "$(find "$prefix" -name tprof-capture.pc)")
test -n "$config" -a -n "$version" -a -d "$pcdir" || { echo "no CMake config or pkg-config file installed"; exit 1; }
"$prefix/bin/tprof" --version

check_trace() {  # the installed CLI reads what a consumer wrote
  "$prefix/bin/tprof" -q table "$1" > "$work/table.txt"
  grep -q "$2" "$work/table.txt" || { echo "table of $1 lacks $2:"; cat "$work/table.txt"; exit 1; }
}

step "find_package(tprof)"
cmake -S "$src/tests/consumer/project" -B "$work/fp" "${cmake_gen[@]}" -DMODE=find_package \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/fp.log" || { cat "$work/fp.log"; exit 1; }
cmake --build "$work/fp" >>"$work/fp.log" 2>&1 || { cat "$work/fp.log"; exit 1; }
"$work/fp/consumer_capture" "$work/fp_capture.json"
check_trace "$work/fp_capture.json" "ProfilerStep\*"
check_trace "$work/fp_capture.json" "work"
"$work/fp/consumer_full" "$work/fp_full.json" > "$work/fp_full.txt"
grep -q "matmul_add" "$work/fp_full.txt" && grep -q "matmul_add scopes read back: 3" "$work/fp_full.txt" ||
  { cat "$work/fp_full.txt"; exit 1; }

step "pkg-config"
export PKG_CONFIG_PATH=$pcdir
cxx=${CXX:-c++}
# shellcheck disable=SC2046
$cxx -std=c++17 -Wall -Wextra -Wpedantic -Werror -o "$work/pc_capture" "$src/tests/consumer/capture_main.cc" \
  $(pkg-config --cflags --libs tprof-capture)
"$work/pc_capture" "$work/pc_capture.json"
check_trace "$work/pc_capture.json" "work"
# shellcheck disable=SC2046
# The README's table call ({.sort_by = ..., .row_limit = ...}) under -Wextra -Werror.
$cxx -std=c++20 -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Werror -o "$work/pc_full" \
  "$src/tests/consumer/full_main.cc" $(pkg-config --cflags --libs tprof)
"$work/pc_full" "$work/pc_full.json" | grep -q "matmul_add scopes read back: 3"

step "strict flags: GCC and clang, C++17, TPROF_ENABLE=1 and 0 (examples/thread_pool/main.cc)"
strict=(-std=c++17 -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Werror)
for c in g++ clang++; do
  if ! command -v "$c" >/dev/null; then echo "SKIPPED $c: not installed (scripts/setup.sh --test installs clang)"; continue; fi
  # shellcheck disable=SC2046
  "$c" "${strict[@]}" -DTPROF_ENABLE=0 -fsyntax-only $(pkg-config --cflags tprof-capture) "$src/examples/thread_pool/main.cc"
  # shellcheck disable=SC2046
  "$c" "${strict[@]}" -pthread -o "$work/strict_$c" "$src/examples/thread_pool/main.cc" \
    $(pkg-config --cflags --libs tprof-capture)
  "$work/strict_$c" "$work/strict_$c.d" >/dev/null
  # wait 1, warmup 1, active 2, repeat 2 over 8 steps: two windows, two files.
  n=$(find "$work/strict_$c.d" -name 'strict.*.pt.trace.json' | wc -l)
  [[ $n == 2 ]] || { echo "$c: $n trace files, want 2"; ls -l "$work/strict_$c.d"; exit 1; }
  for f in "$work/strict_$c.d"/*.json; do check_trace "$f" "op::mm"; check_trace "$f" "tile 0"; done
done

step "the in-process table from C++17 (pkg-config tprof-tables), and a clear error without it"
for c in g++ clang++; do
  if ! command -v "$c" >/dev/null; then continue; fi
  # shellcheck disable=SC2046
  "$c" "${strict[@]}" -pthread -o "$work/tables17_$c" "$src/tests/consumer/tables17_main.cc" \
    $(pkg-config --cflags --libs tprof-tables)
  "$work/tables17_$c" | grep -q "tables17 work" || { echo "$c: the C++17 table lacks its scope"; exit 1; }
  # shellcheck disable=SC2046
  if "$c" -std=c++17 -fsyntax-only $(pkg-config --cflags tprof-capture) "$src/tests/consumer/tables17_main.cc" \
    2>"$work/tables17_err.txt"; then
    echo "$c: profiler_tables.h compiled with tprof-capture's flags alone"; exit 1
  fi
  grep -q "lives in tprof::profiler_tables" "$work/tables17_err.txt" || { cat "$work/tables17_err.txt"; exit 1; }
done

step "FetchContent (capture only, no libdeflate, no zlib)"
cmake -S "$src/tests/consumer/project" -B "$work/fc" "${cmake_gen[@]}" -DMODE=fetchcontent -DTPROF_SOURCE_DIR="$src" \
  -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
  >"$work/fc.log" 2>&1 || { cat "$work/fc.log"; exit 1; }
grep -q "libdeflate/zlib not found" "$work/fc.log" || { echo "the capture-only build looked for gzip and found it"; cat "$work/fc.log"; exit 1; }
cmake --build "$work/fc" --target consumer_capture >>"$work/fc.log" 2>&1 || { cat "$work/fc.log"; exit 1; }
"$work/fc/consumer_capture" "$work/fc_capture.json"
check_trace "$work/fc_capture.json" "work"

step "cpack -G DEB"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/deb" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; exit 1; }
deb=$(find "$work/deb" -maxdepth 1 -name '*.deb' | head -1)
test -n "$deb" || { echo "cpack made no .deb"; cat "$work/cpack.log"; exit 1; }
mkdir "$work/debroot"
if command -v dpkg-deb >/dev/null; then
  dpkg-deb -x "$deb" "$work/debroot"
else
  (cd "$work/debroot" && ar x "$deb" && tar xf data.tar.*)
fi
"$work/debroot/usr/bin/tprof" --version
test -e "$work/debroot/usr/include/tprof/profiler.h"
test -e "$work/debroot/usr/share/man/man1/tprof.1"
echo "consumer_test: find_package, pkg-config, FetchContent and the .deb all work"
