#!/usr/bin/env bash
# The zsh and fish completions the build generates (tools/tprof/CMakeLists.txt),
# run by the shells themselves:
#   zsh: _tprof called with the completion system's `words`/`CURRENT`, its
#        compadd and _files replaced by stubs that print what is offered
#        (compadd filtered by the word under the cursor, as zsh matches);
#   fish: `complete -C LINE`, fish's own answer for the line.
#   completion_shells_test.sh TPROF_BIN BUILD_DIR_OF_TPROF
# A shell that is not installed is reported SKIPPED (exit 77 when both are
# missing); scripts/setup.sh --test installs them.
set -u
tprof=$1
dir_of=$2
failures=0
ran=0

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
touch t.json t2.json.gz other.txt

check() {  # check SHELL LINE GOT WANT
  if [[ "$3" == "$4" ]]; then
    echo "ok:   $1 '$2' -> $3"
  else
    echo "FAIL: $1 '$2' -> '$3', want '$4'"
    failures=1
  fi
}

if command -v zsh >/dev/null 2>&1; then
  ran=1
  cmp -s "$dir_of/_tprof" <("$tprof" completion zsh) || { echo "FAIL: _tprof differs from tprof completion zsh"; failures=1; }
  zexpect() {
    local got
    got=$(zsh -f -c '
      compadd() {
        local p=""
        while [[ $1 == -* && $1 != -- ]]; do [[ $1 == -P ]] && { p=$2; shift; }; shift; done
        [[ $1 == -- ]] && shift
        local w; for w in "$@"; do [[ "$p$w" == "${_cur}"* ]] && print -r -- "$p$w"; done
      }
      _files() { print -r -- "<files>"; }
      compdef() { :; }
      source "$1"
      words=(${=2}); [[ $2 == *" " ]] && words+=("")
      CURRENT=${#words}; _cur=${words[CURRENT]}
      _tprof' zsh "$dir_of/_tprof" "$1" | sort -u | tr '\n' ' ' | sed 's/ $//')
    check zsh "$1" "$got" "$2"
  }
  zexpect "tprof dia" "diagnose"
  zexpect "tprof co" "compare completion"
  zexpect "tprof table t.json --for" "--format"
  zexpect "tprof table t.json --format " "csv json text"
  zexpect "tprof table t.json --format=j" "--format=json"
  zexpect "tprof table t.json --sort-by self_cpu" "self_cpu_memory_usage self_cpu_time_total"
  zexpect "tprof compare t.json --metric st" "steady step"
  zexpect "tprof memory t.json --format " "csv json md text"
  zexpect "tprof --color " "always auto never"
  zexpect "tprof --color never dia" "diagnose"
  zexpect "tprof --qu" "--quiet"
  zexpect "tprof table t" "<files>"
  zexpect "tprof diagnose t.json -o o" "<files>"
  zexpect "tprof diagnose --only cold_" "cold_start"
else
  echo "SKIPPED: zsh not installed (scripts/setup.sh --test installs it)"
fi

if command -v fish >/dev/null 2>&1; then
  ran=1
  cmp -s "$dir_of/tprof.fish" <("$tprof" completion fish) || { echo "FAIL: tprof.fish differs from tprof completion fish"; failures=1; }
  fexpect() {
    local got
    got=$(fish --no-config -c 'source $argv[1]; complete -C $argv[2]' "$dir_of/tprof.fish" "$1" | cut -f1 | sort -u |
          tr '\n' ' ' | sed 's/ $//')
    check fish "$1" "$got" "$2"
  }
  fexpect "tprof dia" "diagnose"
  fexpect "tprof co" "compare completion"
  fexpect "tprof table t.json --for" "--format"
  fexpect "tprof table t.json --format " "csv json text"
  fexpect "tprof table t.json --format=j" "--format=json"
  fexpect "tprof table t.json --sort-by self_cpu" "self_cpu_memory_usage self_cpu_time_total"
  fexpect "tprof compare t.json --metric st" "steady step"
  fexpect "tprof --color " "always auto never"
  fexpect "tprof --qu" "--quiet"
  fexpect "tprof table t" "t.json t2.json.gz"
  fexpect "tprof diagnose t.json -o o" "other.txt"
  fexpect "tprof diagnose --only cold_" "cold_start"
  # A number takes no file names.
  fexpect "tprof table t.json --row-limit " ""
else
  echo "SKIPPED: fish not installed (scripts/setup.sh --test installs it)"
fi

((ran)) || exit 77
exit $failures
