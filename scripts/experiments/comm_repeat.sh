#!/usr/bin/env bash
# All-to-all ground truth measured twice (docs/cost_models.md):
# `embshard bench comm` measures the same placements twice, back to back, on
# one scale (--reference-from the first run), and the two files are compared
# per placement on the slowest rank's normalized forward and backward:
# |a - b| / mean(a, b), median / mean / p90 over placements.
# Usage: scripts/experiments/comm_repeat.sh RANKS BATCH PASSES [SAMPLES=150] [OUT=build/comm_repeat]
# (about 15 s per 150 placements and pass at 2 ranks). Needs a build and mpirun.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/embshard
ranks=${1:?usage: scripts/experiments/comm_repeat.sh RANKS BATCH PASSES [SAMPLES] [OUT]}
batch=${2:?batch} passes=${3:?passes} samples=${4:-150}
out=${5:-build/comm_repeat}
[ -x "$bin" ] || { echo "no $bin: run scripts/build.sh first" >&2; exit 1; }
mkdir -p "$out"
name="$out/n${ranks}_b${batch}_p${passes}"
rm -f "$name".{1,2}.jsonl
for k in 1 2; do
  reference=()
  if [ "$k" = 2 ]; then reference=(--reference-from "$name.1.jsonl"); fi
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$bin" bench comm \
    --samples "$samples" --batch "$batch" --seed 1 --passes "$passes" --show 0 \
    "${reference[@]}" -o "$name.$k.jsonl" >"$name.$k.log" 2>&1
done
python3 - "$name.1.jsonl" "$name.2.jsonl" <<'EOF'
import json, statistics, sys
runs = [{r["sample"]: r for r in map(json.loads, open(f)) if "sample" in r} for f in sys.argv[1:]]
print(f"{len(runs[0])} placements measured twice: {sys.argv[1]} and {sys.argv[2]}")
for field in ("fwd_ms", "bwd_ms"):
    d = sorted(100 * abs(max(runs[0][s][field]) - max(runs[1][s][field]))
               / (0.5 * (max(runs[0][s][field]) + max(runs[1][s][field]))) for s in runs[0])
    print(f"{field}: apart median {statistics.median(d):.1f}%, mean {statistics.mean(d):.1f}%, "
          f"p90 {d[int(0.9 * (len(d) - 1))]:.1f}%")
EOF
