#!/usr/bin/env bash
# Ground truth beside noisy neighbours (docs/measurement.md):
# `embshard bench repeat` measures 40 shards of the 2022 profile twice
#   1. beside a memory streamer (`embshard bench stream`), on the wall clock;
#   2. beside the streamer and a CPU spinner (2 cores: oversubscribed), on
#      the wall clock;
#   3. the same neighbours, on the thread's CPU time (--thread-cpu-time);
# and prints each run's agreement table. About 10 minutes; reports go to
# OUT (default build/repeat_neighbours). Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/embshard
out=${1:-build/repeat_neighbours}
[ -x "$bin" ] || { echo "no $bin: run scripts/build.sh first" >&2; exit 1; }
mkdir -p "$out"
workload="$out/w2022_40"
[ -f "$workload/tables.json" ] ||
  "$bin" synth --profile 2022 --tables 40 --batch 2048 --seed 1 -o "$workload" >/dev/null 2>&1

neighbours=()
stop_neighbours() {
  if ((${#neighbours[@]})); then kill "${neighbours[@]}" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  neighbours=()
}
trap stop_neighbours EXIT
stream() { "$bin" bench stream --seconds 3600 & neighbours+=($!); }
spin() { (while :; do :; done) & neighbours+=($!); }

run() {  # name, extra flags: the report to $out/name.txt, its summary here
  local name=$1
  shift
  "$bin" bench repeat --workload "$workload" --samples 40 --seed 1 --per-shard "$@" \
    >"$out/$name.txt.tmp" 2>/dev/null
  mv "$out/$name.txt.tmp" "$out/$name.txt"
  echo "== $name"
  tail -n 5 "$out/$name.txt"
}

stream
run stream_wall
spin
run stream_spin_wall
run stream_spin_thread_cpu --thread-cpu-time
stop_neighbours
