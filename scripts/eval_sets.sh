#!/usr/bin/env bash
# The held-out evaluation sets behind docs/status.md, many at once: for each
# SEED:PROFILE:BATCH, a fresh pool, its tasks, and `eval` under mpirun; then
# `eval-report` over every set. Two kinds:
#   stress    pools with three 20M-row and four pooling-300 tables, eight
#             tasks; the full search, the verified search, the
#             table/column-wise search and torchrec, reported against torchrec
#             and against the table/column-wise search
#             (records: data/eval/stress_sets)
#   torchrec  plain pools of 80 tables, ten tasks of 20-60 tables; the search,
#             torchrec and TorchRec's own planner (torchrec_planner, which
#             needs scripts/install_torchrec.sh), reported against
#             torchrec_planner (records: data/eval/torchrec_planner)
# Every step resumes (a pool or task file already there is kept, eval resumes
# its records), so the script can be stopped and run again.
#
# usage: scripts/eval_sets.sh [-k KIND] [-np RANKS] [-o DIR] [-b EMBSHARD] [SEED:PROFILE:BATCH ...]
#   defaults: stress, 4 ranks, out/KIND and build/embshard of this checkout, and
#   the sets behind docs/status.md's figures of that kind (the 8-rank sets
#   with -np 8, else the 4-rank ones). On a 2-core machine a stress set takes
#   13-23 minutes at 4 ranks, 20-28 at 8.
set -euo pipefail

usage="usage: scripts/eval_sets.sh [-k stress|torchrec] [-np RANKS] [-o DIR] [-b EMBSHARD] [SEED:PROFILE:BATCH ...]"
repo=$(cd "$(dirname "$0")/.." && pwd)
kind=stress ranks=4 out="" embshard=$repo/build/embshard
while [[ $# -gt 0 && $1 == -* ]]; do
  [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
  case $1 in
    -k) kind=$2 ;;
    -np) ranks=$2 ;;
    -o) out=$2 ;;
    -b) embshard=$2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift 2
done
[[ $kind == stress || $kind == torchrec ]] || { echo "eval_sets.sh: -k $kind: expected stress or torchrec" >&2; exit 2; }
out=${out:-$repo/out/$kind}
sets=("$@")
if [[ ${#sets[@]} -eq 0 ]]; then
  case $kind:$ranks in
    stress:8) sets=(124:2022:4096 125:2021:2048 126:2021:4096 127:2022:2048) ;;
    stress:*) sets=(116:2021:2048 117:2022:4096 118:2021:4096 119:2022:2048 120:2021:2048
      121:2022:4096 122:2021:4096 123:2022:2048) ;;
    torchrec:8) sets=(9403:2021:4096 9404:2022:2048) ;;
    torchrec:*) sets=(9401:2021:2048 9402:2022:4096) ;;
  esac
fi
[[ $ranks =~ ^[1-9][0-9]*$ && $ranks -ge 2 ]] || { echo "eval_sets.sh: -np $ranks: need 2 or more ranks" >&2; exit 2; }
[[ -f $embshard && -x $embshard ]] || { echo "eval_sets.sh: no embshard binary at '$embshard'" >&2; exit 1; }
embshard=$(realpath "$embshard")  # a bare name would be looked up on PATH
command -v mpirun > /dev/null || { echo "eval_sets.sh: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
for item in "${sets[@]}"; do
  [[ $item =~ ^[0-9]+:(2021|2022):[0-9]+$ ]] ||
    { echo "eval_sets.sh: '$item': expected SEED:PROFILE:BATCH, e.g. 116:2021:2048" >&2; exit 2; }
done
mkdir -p "$out"

files=()
for item in "${sets[@]}"; do
  IFS=: read -r seed profile batch <<< "$item"
  pool=$out/pool$seed tasks=$out/tasks$seed.json records=$out/e${seed}_n$ranks.jsonl
  # tables.json is the last file synth writes: a pool without it was cut short.
  if [[ $kind == stress ]]; then
    [[ -f $pool/tables.json ]] || "$embshard" synth --profile "$profile" --tables 40 --batch "$batch" \
      --seed "$seed" --huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300 -o "$pool"
    [[ -f $tasks ]] || "$embshard" tasks --pool "$pool" --oversized --tables 15-25 --dims 8,16,32 \
      --mem-cap 2GB --count 8 --seed 1 -o "$tasks"
    algos=neuroshard,neuroshard+verify,neuroshard@table_wise+column_wise,torchrec
  else
    [[ -f $pool/tables.json ]] || "$embshard" synth --profile "$profile" --tables 80 --batch "$batch" \
      --seed "$seed" -o "$pool"
    [[ -f $tasks ]] || "$embshard" tasks --pool "$pool" --tables 20-60 --mem-cap 384MiB --count 10 \
      --seed "$seed" -o "$tasks"
    algos=neuroshard,torchrec,torchrec_planner
  fi
  echo "== set $seed ($profile, batch $batch) at $ranks ranks: $records" >&2
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$embshard" eval --tasks "$tasks" \
    --out "$records" --algos "$algos" \
    --devices "$ranks" --comm-passes 3 --compute-passes 3 --plan-threads 1 > /dev/null
  files+=("$records")
done

# Each report to a temporary file first: a failed report leaves none behind.
report() {  # NAME, then eval-report's options
  local name=$1
  shift
  "$embshard" eval-report "${files[@]}" "$@" > "$out/$name.txt.tmp"
  mv "$out/$name.txt.tmp" "$out/$name.txt"
  cat "$out/$name.txt"
}
if [[ $kind == stress ]]; then
  report "stress_n$ranks" --against torchrec --svg "$out/stress_n$ranks.svg"
  report "stress_n${ranks}_tc" --against neuroshard@table_wise+column_wise \
    --algos neuroshard,neuroshard+verify,neuroshard@table_wise+column_wise
else
  report "torchrec_n$ranks" --against torchrec_planner --svg "$out/torchrec_n$ranks.svg"
fi
