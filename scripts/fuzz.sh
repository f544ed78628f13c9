#!/usr/bin/env bash
# Runs the libFuzzer targets of a build configured with TPROF_BUILD_LIBFUZZER
# (make fuzz; make test's short run). tests/README.md, "Fuzzing".
#
#   scripts/fuzz.sh [-b BUILD] [-s SECONDS] [-j JOBS] [-n NICE] [--if-built] [TARGET...]
#
# Each libFuzzer target runs for SECONDS (JOBS at a time, at `nice -n
# NICE`), with the settings tprof_add_fuzzer (tests/fuzz/CMakeLists.txt)
# wrote for it in BUILD/tests/fuzz/NAME_libfuzzer.fuzz: the program, its
# replay, -max_len, dictionary, seed directories, regression directory.
# New inputs go to BUILD/fuzz/corpus/NAME (kept between
# runs; the seeds in tests/fuzz are only read), libFuzzer's log and crashes
# to BUILD/fuzz/findings/NAME. A crash (an abort of a broken property, a
# sanitizer report, a leak) is minimized and copied into the regression
# corpus, tests/fuzz/regressions/NAME/, which ctest replays from then on:
# fix the bug, then commit the input with the fix. A timeout or out-of-memory
# input is copied there as it is. The script ends with a table (runs,
# coverage, features, corpus size, findings per target) and fails when any
# target found something.
# --if-built: a build without libFuzzer targets (clang was not there when it
# was configured) is a message, not a failure (make test).
# Environment: FUZZ_TIMEOUT (s per input, 60), FUZZ_RSS_MB (2560),
# FUZZ_MINIMIZE_SECONDS (60).
set -uo pipefail

build=build-asan
seconds=300
jobs=2
niceness=10
if_built=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -b) build=$2; shift 2 ;;
    -s) seconds=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -n) niceness=$2; shift 2 ;;
    --if-built) if_built=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1 (see $0 --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ && "$jobs" =~ ^[1-9][0-9]*$ && "$niceness" =~ ^-?[0-9]+$ ]]; then
  echo "fuzz: -s SECONDS, -j JOBS and -n NICE take whole numbers" >&2
  exit 2
fi
timeout_s=${FUZZ_TIMEOUT:-60}
rss_mb=${FUZZ_RSS_MB:-2560}
minimize_s=${FUZZ_MINIMIZE_SECONDS:-60}

fuzz_dir="$build/tests/fuzz"
shopt -s nullglob
settings=("$fuzz_dir"/*_libfuzzer.fuzz)
if [[ ${#settings[@]} -eq 0 ]]; then
  msg="fuzz: $build has no libFuzzer targets: it needs clang (CC=clang CXX=clang++; Debian: clang and libclang-rt-14-dev, scripts/setup.sh --test) and -DTPROF_BUILD_LIBFUZZER=ON -DTPROF_SANITIZE=address,undefined"
  if [[ $if_built -eq 1 ]]; then
    echo "$msg; skipping the fuzz run"
    exit 0
  fi
  echo "$msg" >&2
  exit 1
fi
build_abs=$(cd "$build" && pwd)
corpus_root="$build_abs/fuzz/corpus"
findings_root="$build_abs/fuzz/findings"

# name -> settings file, for the targets asked for (all by default).
declare -A setting_of=()
for f in "${settings[@]}"; do
  n=$(basename "$f" _libfuzzer.fuzz)
  setting_of[$n]=$f
done
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(printf '%s\n' "${!setting_of[@]}" | sort)
fi
for t in "${targets[@]}"; do
  if [[ -z "${setting_of[$t]:-}" ]]; then
    echo "fuzz: no target $t in $build (have: $(printf '%s ' "${!setting_of[@]}"))" >&2
    exit 2
  fi
  bin=''
  # shellcheck disable=SC1090
  source "${setting_of[$t]}"
  if [[ ! -x "$bin" ]]; then
    echo "fuzz: $bin is not built (cmake --build $build)" >&2
    exit 2
  fi
done

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_target() {
  local name=$1
  local bin='' max_len='' dict='' seeds='' regressions=''
  # shellcheck disable=SC1090
  source "${setting_of[$name]}"
  local corpus="$corpus_root/$name" findings="$findings_root/$name"
  mkdir -p "$corpus" "$findings"
  rm -f "$findings"/crash-* "$findings"/leak-* "$findings"/timeout-* "$findings"/oom-*
  local args=(-max_total_time="$seconds" -max_len="$max_len" -timeout="$timeout_s" -rss_limit_mb="$rss_mb"
              -artifact_prefix="$findings/" -print_final_stats=1)
  [[ -n "$dict" ]] && args+=(-dict="$dict")
  local dirs=("$corpus")
  for d in $seeds; do dirs+=("$d"); done
  [[ -d "$regressions" ]] && dirs+=("$regressions")
  nice -n "$niceness" "$bin" "${args[@]}" "${dirs[@]}" > "$findings_root/$name.log" 2>&1
  echo $? > "$findings_root/$name.rc"
}

mkdir -p "$corpus_root" "$findings_root"
echo "fuzz: ${targets[*]}: ${seconds} s each, $jobs at a time (logs: $findings_root/NAME.log)"
running=0
for t in "${targets[@]}"; do
  if [[ $running -ge $jobs ]]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

failed=0
printf '%-10s %8s %10s %7s %8s %7s  %s\n' target seconds runs cov ft corpus findings
for t in "${targets[@]}"; do
  log="$findings_root/$t.log"
  rc=$(cat "$findings_root/$t.rc" 2>/dev/null || echo '?')
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<< "$last")
  found=()
  for a in "$findings_root/$t"/crash-* "$findings_root/$t"/leak-* "$findings_root/$t"/timeout-* "$findings_root/$t"/oom-*; do
    found+=("$a")
  done
  what=none
  if [[ ${#found[@]} -gt 0 ]]; then
    what="${#found[@]}: $(basename "${found[0]}")"
  elif [[ "$rc" != 0 ]]; then
    what="libFuzzer exit $rc (see the log)"
  fi
  printf '%-10s %8s %10s %7s %8s %7s  %s\n' "$t" "$seconds" "${runs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$what"
  if [[ "$what" != none ]]; then
    failed=1
    # shellcheck disable=SC1090
    bin=''; replay=''; regressions=''; source "${setting_of[$t]}"
    mkdir -p "$regressions"
    for a in "${found[@]}"; do
      kind=$(basename "$a" | cut -d- -f1)
      small="$a"
      if [[ $kind == crash || $kind == leak ]]; then
        nice -n "$niceness" "$bin" -minimize_crash=1 -max_total_time="$minimize_s" \
          -exact_artifact_path="$a.min" "$a" > "$a.minimize.log" 2>&1
        [[ -s "$a.min" ]] && small="$a.min"
      fi
      dest="$regressions/$kind-$(sha1sum "$small" | cut -c1-16)"
      cp "$small" "$dest"
      echo "fuzz: $t: $kind in $a ($(wc -c < "$small") bytes after minimizing) -> $dest"
      echo "      replay it: $replay --print-input $dest; fix the bug, then commit it with the fix"
    done
    grep -a -E 'property failed|ERROR: |runtime error|SUMMARY: |Test unit written|^[^ ]*: set-up failed' "$log" |
      head -n 12 | sed "s/^/      $t: /"
  fi
done
exit $failed
