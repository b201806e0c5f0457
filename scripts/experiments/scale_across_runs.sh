#!/usr/bin/env bash
# Measurements across independent runs (docs/measurement.md, "One scale
# across runs"), each a separate `embshard bench compute` a minute after the
# last, measuring on core 0 with any neighbour on core 1:
#   1. the same 40 shards (2022 profile, 40 tables, batch 2048, seed 1): a
#      run with no neighbour, then one beside each neighbour in turn (a
#      memory-write loop, a memory-read streamer, a CPU spinner, another
#      embshard measurement); then the roles swapped (each neighbour's run
#      first, a quiet run last); the agreement of each pair, normalized and raw;
#   2. four never-seen pools (both profiles, batches 2048 and 4096), each
#      measured by one fresh `bench compute` and validated against the
#      shipped model; then `embshard fit` here and the same pools measured
#      and validated against the fitted model (the user's path).
# SEED (1) seeds the 40 shards' pool, POOL_SEED (6001) the first never-seen
# pool (the others follow). About 35 minutes on 2 cores; files go to OUT
# (default build/scale_across_runs). Needs a build (scripts/build.sh) and,
# for the read streamer, python3 with numpy. EMBSHARD: another binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${EMBSHARD:-$PWD/build/embshard}
out=${1:-build/scale_across_runs}
seed=${SEED:-1}
pool_seed=${POOL_SEED:-6001}
[ -x "$bin" ] || { echo "no $bin: run scripts/build.sh first" >&2; exit 1; }
python3 -c 'import numpy' 2>/dev/null || { echo "the read streamer needs numpy in python3" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
[ -f w2022/tables.json ] ||
  "$bin" synth --profile 2022 --tables 40 --batch 2048 --seed "$seed" -o w2022 >/dev/null 2>&1
[ -f neighbour_pool/tables.json ] ||
  "$bin" synth --profile 2022 --tables 60 --batch 2048 --seed 778 -o neighbour_pool >/dev/null 2>&1

declare -A neighbour=(
  [write]="while :; do dd if=/dev/zero of=/dev/null bs=64M count=100000 2>/dev/null; done"
  [read]="python3 -c 'import numpy as np
a = np.ones(2**28)
while True: a.sum()'"
  [spin]="while :; do :; done"
  [embshard]="$bin bench compute --workload neighbour_pool --samples 100000 --seed 99 --scale window -o neighbour.jsonl --show 0"
)
pid=""
stop() { if [ -n "$pid" ]; then pkill -P "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; rm -f neighbour.jsonl; }
trap stop EXIT

run() {  # name, neighbour (or none)
  if [ "$2" != none ]; then taskset -c 1 bash -c "${neighbour[$2]}" >/dev/null 2>&1 & pid=$!; sleep 5; fi
  [ -f "$1.jsonl" ] || taskset -c 0 "$bin" bench compute --workload w2022 --samples 40 --seed "$seed" \
    -o "$1.jsonl" --show 0 >/dev/null 2>"$1.log"
  stop
  sleep 60
}

run quiet_first none
for n in write read spin embshard; do run "beside_${n}_after" "$n"; done
for n in write read spin embshard; do run "beside_${n}_before" "$n"; done
run quiet_last none

agreement() {  # a.jsonl b.jsonl
  python3 - "$@" <<'PY'
import json, statistics as st, sys
def read(path):
    lines = open(path).read().splitlines()
    return {r["sample"]: r for r in map(json.loads, lines[1:])}
a, b = read(sys.argv[1]), read(sys.argv[2])
ids = sorted(set(a) & set(b))
def agree(key):
    d = [200 * abs(a[i][key] - b[i][key]) / (a[i][key] + b[i][key]) for i in ids]
    return "%.1f%% mean, %.1f%% p90" % (st.mean(d), st.quantiles(d, n=10, method="inclusive")[-1])
print("%-26s %-26s normalized %-24s raw %s" % (sys.argv[1], sys.argv[2], agree("ms"), agree("raw_ms")))
PY
}
for n in write read spin embshard; do
  agreement quiet_first.jsonl "beside_${n}_after.jsonl"
  agreement "beside_${n}_before.jsonl" quiet_last.jsonl
done

pools=("2021:2048:$pool_seed" "2021:4096:$((pool_seed + 1))" "2022:2048:$((pool_seed + 2))"
       "2022:4096:$((pool_seed + 3))")
for spec in "${pools[@]}"; do
  IFS=: read -r profile batch seed <<<"$spec"
  [ -f "pool_$seed/tables.json" ] || "$bin" synth --profile "$profile" --tables 40 \
    --batch "$batch" --seed "$seed" -o "pool_$seed" >/dev/null 2>&1
  [ -f "shipped_$seed.jsonl" ] || taskset -c 0 "$bin" bench compute --workload "pool_$seed" --samples 40 \
    --seed "$seed" -o "shipped_$seed.jsonl" --show 0 >/dev/null 2>"shipped_$seed.log"
done
[ -f fitted/neural/manifest.json ] || [ -f fitted/manifest.json ] || "$bin" fit -o fitted >fit.log 2>&1
for spec in "${pools[@]}"; do
  IFS=: read -r profile batch seed <<<"$spec"
  [ -f "fitted_$seed.jsonl" ] || taskset -c 0 "$bin" bench compute --workload "pool_$seed" --samples 40 \
    --seed "$seed" --model fitted -o "fitted_$seed.jsonl" --show 0 >/dev/null 2>"fitted_$seed.log"
  echo "pool $profile b$batch (seed $seed):"
  "$bin" validate --data "shipped_$seed.jsonl" 2>/dev/null | grep -E '^compute|scale:'
  "$bin" validate --model fitted --data "fitted_$seed.jsonl" 2>/dev/null | grep -E '^compute|scale:'
done
