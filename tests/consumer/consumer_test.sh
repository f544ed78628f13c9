#!/bin/bash
# Installs the tprof build BUILD into a temporary prefix and builds a small
# consumer three ways (issue 14): find_package(tprof) (C++17 capture and
# C++20 everything), pkg-config (tprof-capture as C++17, tprof as C++20),
# and FetchContent of the source tree (capture only, without libdeflate or
# zlib, checking the subproject adds no global targets or cache settings).
# Each consumer program runs and its trace is read back by the installed CLI.
# None of them carries CUDA capture; where tprof was built with CUPTI, a
# consumer of the cuda component (find_package COMPONENTS cuda, pkg-config
# tprof-cuda) records kernels on the CUDA stand-in (tests/standin).
# The installed Python module (when built) is imported by an isolated
# python3 (no PYTHONPATH, no build tree) and reads traces.
# Then cpack makes the .debs, and tprof and the Python module run from the
# unpacked packages.
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
# A shared build (TPROF_SHARED_CAPTURE) installs libtprof_capture.so in
# place of the archive; programs linked through pkg-config find it as they
# would under /usr (a .pc file sets no rpath).
capture_lib=libtprof_capture.a
if [[ -e $(dirname "$pcdir")/libtprof_capture.so ]]; then
  capture_lib=libtprof_capture.so
  export LD_LIBRARY_PATH="$(dirname "$pcdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$prefix/bin/tprof" --version

# CUDA capture is the cuda component's alone (issue 42, item 3): a program
# that links tprof::capture (tprof-capture, tprof) carries no CUPTI code and
# needs neither libcupti nor libtprof_cuda, whatever tprof's build found.
# nm's output goes through a file: under pipefail, `nm | grep -q` fails
# when grep's early exit kills nm, and the check would never fire.
cuda_capture_in() {  # cuda_capture_in BINARY: prints its CUPTI symbols and CUDA capture NEEDED entries
  nm -C "$1" >"$work/nm.txt"
  [[ -s $work/nm.txt ]] || { echo "nm found no symbols in $1" >&2; exit 1; }
  grep -i cupti "$work/nm.txt" | head -5 || true
  readelf -d "$1" | grep -E 'NEEDED.*(libcupti|libtprof_cuda)' || true
}
no_cuda_capture() {  # no_cuda_capture BINARY...
  local b found
  for b in "$@"; do
    found=$(cuda_capture_in "$b")
    [[ -z $found ]] || { echo "$b links no CUDA capture, yet carries it:"; echo "$found"; exit 1; }
  done
}
if [[ $capture_lib == *.so ]]; then no_cuda_capture "$(dirname "$pcdir")/$capture_lib"; fi
# A build with CUPTI has the CUDA stand-in (tests/standin, built with the
# tests): the cuda component must be installed and record its kernels.
standin=$build/tests/standin
have_cuda=
cuda_inc=
if [[ -e $standin/runtime/libcudart.so.13 && -e $standin/cupti/libcupti.so.13 ]]; then
  have_cuda=1
  cuda_inc=$(sed -n 's/^TPROF_CUDA_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")
  test -e "$pcdir/tprof-cuda.pc" || { echo "tprof was built with CUPTI, but tprof-cuda.pc is not installed"; exit 1; }
fi
run_cuda() {  # run_cuda PROGRAM TRACE: PROGRAM records the stand-in's kernels, the CLI reads them back
  TPROF_CUPTI_LIBRARY=$standin/cupti/libcupti.so.13 "$1" "$2"
  check_trace "$2" "consumer_scale_kernel"
  # It holds the CUPTI source (or needs libtprof_cuda.so): what no_cuda_capture looks for.
  [[ -n $(cuda_capture_in "$1") ]] || { echo "$1 records kernels, yet no_cuda_capture would pass it"; exit 1; }
}

check_trace() {  # the installed CLI reads what a consumer wrote
  "$prefix/bin/tprof" -q table "$1" > "$work/table.txt"
  grep -q "$2" "$work/table.txt" || { echo "table of $1 lacks $2:"; cat "$work/table.txt"; exit 1; }
}

# The Python module, when this build has it: the interpreter CMake found,
# isolated (-I: no PYTHON* variables, no user site, not the current
# directory), with only the given directory added to its path.
python=$(sed -n 's/^TPROF_PYTHON_EXECUTABLE:INTERNAL=//p' "$build/CMakeCache.txt")
have_python=
if [[ -n $python ]] && compgen -G "$build/python/tprof/_tprof*.so" >/dev/null; then have_python=1; fi
check_python() {  # check_python DIR TRACE: DIR/tprof is imported and reads TRACE
  "$python" -I - "$1" "$2" "$src/tests/data/public/hta/trace_filter" <<'PY'
import os, sys
site, trace, job = sys.argv[1:]
sys.path.insert(0, site)
import tprof
assert os.path.dirname(tprof.__file__) == os.path.join(site, "tprof"), tprof.__file__
assert os.path.dirname(tprof._tprof.__file__) == os.path.join(site, "tprof"), tprof._tprof.__file__
t = tprof.read(trace)
names = set(t.events().name)
assert len(t) > 0 and any("work" in n for n in names), sorted(names)[:20]
overlap = tprof.TraceAnalysis(trace_dir=job).get_comm_comp_overlap()
assert list(overlap.comp_comm_overlap_pctg) == [11.81, 20.05], overlap
print(f"python: tprof {tprof.__version__} from {site}: {len(t)} events, overlap {list(overlap.comp_comm_overlap_pctg)}")
PY
}

step "find_package(tprof)"
fp_cuda=()
if [[ -n $have_cuda ]]; then fp_cuda=(-DSTANDIN_CUDART="$standin/runtime/libcudart.so.13" -DCUDA_INCLUDE_DIRS="$cuda_inc"); fi
cmake -S "$src/tests/consumer/project" -B "$work/fp" "${cmake_gen[@]}" -DMODE=find_package \
  -DCMAKE_PREFIX_PATH="$prefix" "${fp_cuda[@]}" >"$work/fp.log" || { cat "$work/fp.log"; exit 1; }
cmake --build "$work/fp" >>"$work/fp.log" 2>&1 || { cat "$work/fp.log"; exit 1; }
no_cuda_capture "$work/fp/consumer_capture" "$work/fp/consumer_full"
if [[ -n $have_cuda ]]; then
  run_cuda "$work/fp/consumer_cuda" "$work/fp_cuda.json"
else
  echo "SKIPPED tprof::cuda: this build has no CUPTI (no CUDA stand-in)"
fi
"$work/fp/consumer_capture" "$work/fp_capture.json"
check_trace "$work/fp_capture.json" "ProfilerStep\*"
check_trace "$work/fp_capture.json" "work"
"$work/fp/consumer_full" "$work/fp_full.json" > "$work/fp_full.txt"
grep -q "matmul_add" "$work/fp_full.txt" && grep -q "matmul_add scopes read back: 3" "$work/fp_full.txt" ||
  { cat "$work/fp_full.txt"; exit 1; }

step "the installed Python module"
if [[ -n $have_python ]]; then
  py_init=$(find "$prefix" -path '*/tprof/__init__.py')
  [[ -n $py_init && $(echo "$py_init" | wc -l) == 1 ]] || { echo "the Python package is not installed once: $py_init"; exit 1; }
  check_python "$(dirname "$(dirname "$py_init")")" "$work/fp_capture.json"
else
  echo "SKIPPED: this build has no Python module"
fi

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
no_cuda_capture "$work/pc_capture" "$work/pc_full"
if [[ -n $have_cuda ]]; then
  # --as-needed, as Ubuntu's compilers link by default: the shared component
  # is needed although the program calls none of it.
  # shellcheck disable=SC2046
  $cxx -std=c++17 -Wall -Wextra -Wpedantic -Werror -o "$work/pc_cuda" "$src/tests/consumer/cuda_main.cc" \
    -isystem "$cuda_inc" -Wl,--as-needed $(pkg-config --cflags --libs tprof-cuda) \
    "$standin/runtime/libcudart.so.13" -Wl,-rpath,"$standin/runtime"
  run_cuda "$work/pc_cuda" "$work/pc_cuda.json"
fi

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

step "FetchContent (capture only, no libdeflate, no zlib, CUPTI as found): builds only what it links"
cmake -S "$src/tests/consumer/project" -B "$work/fc" "${cmake_gen[@]}" -DMODE=fetchcontent -DTPROF_SOURCE_DIR="$src" \
  -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
  >"$work/fc.log" 2>&1 || { cat "$work/fc.log"; exit 1; }
grep -q "libdeflate/zlib not found" "$work/fc.log" || { echo "the capture-only build looked for gzip and found it"; cat "$work/fc.log"; exit 1; }
# The default target, as a consumer builds: tprof's libraries are
# EXCLUDE_FROM_ALL as a subproject, so only what consumer_capture links
# (base, trace, capture) compiles.
cmake --build "$work/fc" >>"$work/fc.log" 2>&1 || { cat "$work/fc.log"; exit 1; }
objs=$(find "$work/fc/_deps" -name '*.o' | wc -l)
above=$(find "$work/fc/_deps" -name '*.o' | grep -E '/(analyze|report|serve|profiler_tables|cupti)/' | head -3 || true)
echo "FetchContent compiled $objs of tprof's objects for consumer_capture"
[[ -z $above ]] || { echo "FetchContent built objects consumer_capture does not link: $above"; exit 1; }
(( objs <= 34 )) || { echo "FetchContent built $objs objects; base + trace + capture are 34"; exit 1; }
"$work/fc/consumer_capture" "$work/fc_capture.json"
check_trace "$work/fc_capture.json" "work"
# Light to link: no compression library, no CUPTI code (whether or not
# CUPTI's headers were found).
if readelf -d "$work/fc/consumer_capture" | grep -E 'NEEDED.*(libz\.|libdeflate)'; then
  echo "consumer_capture needs a compression library"; exit 1
fi
nm -C "$work/fc/consumer_capture" >"$work/fc_nm.txt"
if grep -iE 'libdeflate_|deflateInit' "$work/fc_nm.txt" | head; then echo "consumer_capture carries compression code"; exit 1; fi
no_cuda_capture "$work/fc/consumer_capture"
# .json.gz from capture alone: zlib loaded at run time (src/base/gzip_codec.h).
"$work/fc/consumer_capture" "$work/fc_capture.json.gz"
check_trace "$work/fc_capture.json.gz" "work"

step "cpack -G DEB: libtprof-dev, tprof (and python3-tprof)"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/deb" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; exit 1; }
dev_deb=$(find "$work/deb" -maxdepth 1 -name 'libtprof-dev_*.deb' | head -1)
cli_deb=$(find "$work/deb" -maxdepth 1 -name 'tprof_*.deb' | head -1)
test -n "$dev_deb" -a -n "$cli_deb" || { echo "cpack did not make libtprof-dev and tprof .debs:"; ls "$work/deb"; cat "$work/cpack.log"; exit 1; }
debs=("$dev_deb" "$cli_deb")
py_deb=$(find "$work/deb" -maxdepth 1 -name 'python3-tprof_*.deb' | head -1)
if [[ -n $have_python ]]; then
  test -n "$py_deb" || { echo "cpack did not make python3-tprof:"; ls "$work/deb"; exit 1; }
  debs+=("$py_deb")
elif [[ -n $py_deb ]]; then
  echo "python3-tprof made by a build without the Python module"; exit 1
fi
mkdir "$work/debroot"
if command -v dpkg-deb >/dev/null; then
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  field() { dpkg-deb -f "$1" "$2"; }
  contents() { dpkg-deb -c "$1" | awk '{print $6}'; }
  # Real dependencies: the CLI's shared libraries, the -dev package's link inputs.
  cli_dep=$(field "$cli_deb" Depends)
  for d in libc6 libstdc++6 zlib1g libdeflate0; do
    [[ $cli_dep == *"$d"* ]] || { echo "tprof's Depends lacks $d: $cli_dep"; exit 1; }
  done
  dev_dep=$(field "$dev_deb" Depends)
  if grep -q -- '-ltprof_gzip' "$pcdir/tprof.pc"; then
    for d in libdeflate-dev zlib1g-dev; do
      [[ $dev_dep == *"$d"* ]] || { echo "libtprof-dev's Depends lacks $d: $dev_dep"; exit 1; }
    done
  fi
  contents "$dev_deb" >"$work/dev.txt"
  contents "$cli_deb" >"$work/cli.txt"
  for f in ./usr/include/tprof/profiler.h "./usr/lib/$multiarch/$capture_lib" \
    "./usr/lib/$multiarch/cmake/tprof/tprofConfig.cmake" "./usr/lib/$multiarch/pkgconfig/tprof-capture.pc" \
    ./usr/share/doc/libtprof-dev/copyright; do
    grep -qxF "$f" "$work/dev.txt" || { echo "libtprof-dev lacks $f:"; cat "$work/dev.txt"; exit 1; }
  done
  for f in ./usr/bin/tprof ./usr/share/man/man1/tprof.1 ./usr/share/doc/tprof/copyright; do
    grep -qxF "$f" "$work/cli.txt" || { echo "tprof lacks $f:"; cat "$work/cli.txt"; exit 1; }
  done
  if grep -q include/ "$work/cli.txt" || grep -q bin/tprof "$work/dev.txt"; then
    echo "the CLI and -dev packages overlap"; exit 1
  fi
  if [[ -n $have_python ]]; then
    py_dep=$(field "$py_deb" Depends)
    for d in "python3 (>=" "python3 (<<" python3-numpy python3-pandas libc6 libstdc++6; do
      [[ $py_dep == *"$d"* ]] || { echo "python3-tprof's Depends lacks $d: $py_dep"; exit 1; }
    done
    [[ $(field "$py_deb" Suggests) == *python3-distributed* ]] ||
      { echo "python3-tprof does not suggest python3-distributed (python3 -m tprof job)"; exit 1; }
    contents "$py_deb" >"$work/py.txt"
    for f in __init__.py __main__.py distributed.py hta.py _frames.py; do
      grep -qxF "./usr/lib/python3/dist-packages/tprof/$f" "$work/py.txt" ||
        { echo "python3-tprof lacks tprof/$f:"; cat "$work/py.txt"; exit 1; }
    done
    grep -qE '^\./usr/lib/python3/dist-packages/tprof/_tprof\.cpython-[0-9]+-.*\.so$' "$work/py.txt" &&
      grep -qxF ./usr/share/doc/python3-tprof/copyright "$work/py.txt" ||
      { echo "python3-tprof lacks the extension or its copyright:"; cat "$work/py.txt"; exit 1; }
    # Its own files only (directories aside): none of the CLI's or the -dev package's.
    if grep -v '/$' "$work/py.txt" | grep -vE '^\./usr/(lib/python3/dist-packages/tprof|share/doc/python3-tprof)/'; then
      echo "python3-tprof holds files outside its package"; exit 1
    fi
    if grep -q dist-packages "$work/cli.txt" "$work/dev.txt"; then echo "the Python module is in tprof or libtprof-dev"; exit 1; fi
  fi
  for d in "${debs[@]}"; do dpkg-deb -x "$d" "$work/debroot"; done
  # The unpacked -dev package builds a capture program (multiarch pkgconfig dir).
  # shellcheck disable=SC2046
  $cxx -std=c++17 -o "$work/deb_capture" "$src/tests/consumer/capture_main.cc" \
    $(PKG_CONFIG_PATH="$work/debroot/usr/lib/$multiarch/pkgconfig" pkg-config --cflags --libs tprof-capture)
  LD_LIBRARY_PATH="$work/debroot/usr/lib/$multiarch" "$work/deb_capture" "$work/deb_capture.json"
  check_trace "$work/deb_capture.json" "work"
  no_cuda_capture "$work/deb_capture"
  if [[ -n $have_cuda ]]; then
    grep -qxF "./usr/lib/$multiarch/pkgconfig/tprof-cuda.pc" "$work/dev.txt" || { echo "libtprof-dev lacks tprof-cuda.pc"; exit 1; }
  fi
else
  for d in "${debs[@]}"; do (cd "$work/debroot" && ar x "$d" && tar xf data.tar.* && rm -f data.tar.* control.tar.* debian-binary); done
fi
"$work/debroot/usr/bin/tprof" --version
test -e "$work/debroot/usr/include/tprof/profiler.h"
test -e "$work/debroot/usr/share/man/man1/tprof.1"
# The unpacked python3-tprof, as /usr/lib/python3/dist-packages would hold it.
if [[ -n $have_python ]]; then check_python "$work/debroot/usr/lib/python3/dist-packages" "$work/fp_capture.json"; fi
echo "consumer_test: find_package, pkg-config, FetchContent, the Python module and the .debs all work${have_cuda:+; tprof::cuda records kernels on the stand-in}"
