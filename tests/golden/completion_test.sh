#!/usr/bin/env bash
# The bash completion the build generates (tools/tprof/CMakeLists.txt), run
# as bash runs it: COMP_WORDS/COMP_CWORD set, _tprof called, COMPREPLY read.
#   completion_test.sh TPROF_BIN COMPLETION_SCRIPT
set -u
tprof=$1
script=$2
failures=0

[[ -f "$script" ]] || { echo "FAIL: $script was not generated"; exit 1; }
cmp -s "$script" <("$tprof" completion bash) || { echo "FAIL: $script differs from tprof completion bash"; failures=1; }
# shellcheck source=/dev/null
source "$script"
[[ "$(complete -p tprof 2>/dev/null)" == "complete -F _tprof tprof" ]] || { echo "FAIL: not registered"; failures=1; }

# expect "WORDS..." "EXPECTED REPLY (sorted, blank-separated)"; the cursor is
# on the last word.
expect() {
  local line=$1 want=$2 got
  read -r -a COMP_WORDS <<< "$line"
  [[ "$line" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _tprof
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
  if [[ "$got" == "$want" ]]; then
    echo "ok:   '$line' -> $got"
  else
    echo "FAIL: '$line' -> '$got', want '$want'"
    failures=1
  fi
}

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
touch t.json t2.json.gz other.txt

expect "tprof dia" "diagnose"
expect "tprof co" "compare completion"
expect "tprof table t.json --for" "--format"
expect "tprof table t.json --format " "csv json text"
expect "tprof diagnose --format " "json md text"
expect "tprof merge --format s" "summary"
# COMP_WORDBREAKS splits --format=j into "--format" "=" "j".
expect "tprof table t.json --format = j" "json"
expect "tprof table t.json --format = " "csv json text"
# Global flags, before the command or after it.
expect "tprof --color " "always auto never"
expect "tprof --color never dia" "diagnose"
expect "tprof -q table t.json --col" "--color"
expect "tprof table --threads 2 t.json --color = n" "never"
expect "tprof --qu" "--quiet"
# File names for a TRACE and for options without a fixed set.
expect "tprof table t" "t.json t2.json.gz"
expect "tprof diagnose t.json -o o" "other.txt"
expect "tprof compare t.json --to" "--top"
expect "tprof diagnose --only cold_" "cold_start"

exit $failures
