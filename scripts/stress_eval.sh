#!/usr/bin/env bash
# The held-out stress sets (docs/status.md, docs/sharding_types.md), many at
# once: for each SEED:PROFILE:BATCH, a fresh pool with huge and hot tables,
# eight tasks, and `eval` under mpirun of the full search, the verified
# search, the table/column-wise search and torchrec; then `eval-report` over
# every set, against torchrec and against the table/column-wise search.
# Every step resumes (a pool or task file already there is kept, eval resumes
# its records), so the script can be stopped and run again.
#
# usage: scripts/stress_eval.sh [-np RANKS] [-o DIR] [-b EMBSHARD] [SEED:PROFILE:BATCH ...]
#   defaults: 4 ranks, out/stress and build/embshard of this checkout, and the
#   sets behind docs/status.md's stress-set figures (their records:
#   data/eval/stress_sets; the 8-rank sets with -np 8, else the 4-rank ones).
#   On a 2-core machine 13-23 minutes a set at 4 ranks, 20-28 at 8.
set -euo pipefail

usage="usage: scripts/stress_eval.sh [-np RANKS] [-o DIR] [-b EMBSHARD] [SEED:PROFILE:BATCH ...]"
repo=$(cd "$(dirname "$0")/.." && pwd)
ranks=4 out=$repo/out/stress embshard=$repo/build/embshard
while [[ $# -gt 0 && $1 == -* ]]; do
  [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
  case $1 in
    -np) ranks=$2 ;;
    -o) out=$2 ;;
    -b) embshard=$2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift 2
done
sets=("$@")
if [[ ${#sets[@]} -eq 0 && $ranks == 8 ]]; then
  sets=(124:2022:4096 125:2021:2048 126:2021:4096 127:2022:2048)
elif [[ ${#sets[@]} -eq 0 ]]; then
  sets=(116:2021:2048 117:2022:4096 118:2021:4096 119:2022:2048 120:2021:2048 121:2022:4096
    122:2021:4096 123:2022:2048)
fi
[[ $ranks =~ ^[1-9][0-9]*$ && $ranks -ge 2 ]] || { echo "stress_eval.sh: -np $ranks: need 2 or more ranks" >&2; exit 2; }
[[ -f $embshard && -x $embshard ]] || { echo "stress_eval.sh: no embshard binary at '$embshard'" >&2; exit 1; }
embshard=$(realpath "$embshard")  # a bare name would be looked up on PATH
command -v mpirun > /dev/null || { echo "stress_eval.sh: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
for item in "${sets[@]}"; do
  [[ $item =~ ^[0-9]+:(2021|2022):[0-9]+$ ]] ||
    { echo "stress_eval.sh: '$item': expected SEED:PROFILE:BATCH, e.g. 116:2021:2048" >&2; exit 2; }
done
mkdir -p "$out"

files=()
for item in "${sets[@]}"; do
  IFS=: read -r seed profile batch <<< "$item"
  pool=$out/pool$seed tasks=$out/tasks$seed.json records=$out/e${seed}_n$ranks.jsonl
  # tables.json is the last file synth writes: a pool without it was cut short.
  [[ -f $pool/tables.json ]] || "$embshard" synth --profile "$profile" --tables 40 --batch "$batch" \
    --seed "$seed" --huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300 -o "$pool"
  [[ -f $tasks ]] || "$embshard" tasks --pool "$pool" --oversized --tables 15-25 --dims 8,16,32 \
    --mem-cap 2GB --count 8 --seed 1 -o "$tasks"
  echo "== set $seed ($profile, batch $batch) at $ranks ranks: $records" >&2
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$embshard" eval --tasks "$tasks" \
    --out "$records" --algos neuroshard,neuroshard+verify,neuroshard@table_wise+column_wise,torchrec \
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
report "stress_n$ranks" --against torchrec --svg "$out/stress_n$ranks.svg"
report "stress_n${ranks}_tc" --against neuroshard@table_wise+column_wise \
  --algos neuroshard,neuroshard+verify,neuroshard@table_wise+column_wise
