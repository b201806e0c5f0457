#!/usr/bin/env bash
# Wall time of short commands, two embshard binaries side by side in one run:
# each command `rounds` times a binary, the two in turns (which goes first
# alternates), medians and their ratio. For what a command costs before its
# work: loading libraries, static initialisers (docs/benchmarks.md, "Start-up").
#
# usage: scripts/startup_time.sh BINARY_A BINARY_B [ROUNDS]   (default 7)
set -euo pipefail

a=${1:?usage: scripts/startup_time.sh BINARY_A BINARY_B [ROUNDS]}
b=${2:?usage: scripts/startup_time.sh BINARY_A BINARY_B [ROUNDS]}
rounds=${3:-7}
for bin in "$a" "$b"; do
  [[ -x $bin ]] || { echo "startup_time.sh: no binary at '$bin'" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$b" synth --profile 2022 --tables 40 --batch 2048 --seed 100 -o "$work/pool" > /dev/null 2>&1

seconds() {  # seconds BINARY ARGS...: the wall time of one run, which must succeed
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1 || { echo "startup_time.sh: failed: $*" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print($end - $start)"
}

printf '%-62s %9s %9s %7s\n' command "A s" "B s" "B / A"
while read -r args; do
  ta=() tb=()
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then
      ta+=("$(seconds "$a" $args)") tb+=("$(seconds "$b" $args)")
    else
      tb+=("$(seconds "$b" $args)") ta+=("$(seconds "$a" $args)")
    fi
  done
  python3 - "$args" "${ta[*]}" "${tb[*]}" <<'PY'
import statistics, sys
a = statistics.median(map(float, sys.argv[2].split()))
b = statistics.median(map(float, sys.argv[3].split()))
print(f"{sys.argv[1]:<62} {a:9.3f} {b:9.3f} {b / a:7.3f}")
PY
done <<LINES
--version
synth --profile 2021 --tables 20 --batch 512 --seed 3 -o $work/small
inspect $work/pool
plan $work/pool --devices 4 -o /dev/null
LINES
