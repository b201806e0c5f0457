#!/usr/bin/env bash
# Measured costs of shards whose tables are drawn fp32, fp16 or bf16: the
# data the shipped model's data-type feature is trained on (typed_*) and
# judged by (never-seen pools: unseen_typed_* of the three types, and
# unseen_fp16_* and unseen_bf16_* of one type each), in data/cpu. Each file is on the shipped
# model's scale (bench compute's default anchors). Resumable: rerun after an
# interruption.
# Usage: scripts/experiments/typed_costs.sh OUT [EMBSHARD]
set -euo pipefail
OUT=${1:?usage: typed_costs.sh OUT [EMBSHARD]}
EMBSHARD=${2:-build/embshard}
SAMPLES=${SAMPLES:-160}
UNSEEN_SAMPLES=${UNSEEN_SAMPLES:-60}
SHARDS=(--max-tables 15 --dims 4,8,16,32,64,128,256
  --mem-cap 128MiB --warmup 2 --min-rounds 8 --max-rounds 40 --target-ci 0.03 --show 0)
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
pool() {  # name profile tables batch seed samples pieces types
  local dir=$OUT/pool_$1
  [ -f "$dir/tables.json" ] ||
    run "$EMBSHARD" synth --profile "$2" --tables "$3" --batch "$4" --seed "$5" -o "$dir"
  run "$EMBSHARD" bench compute --workload "$dir" --samples "$6" --seed "$5" --pieces "$7" \
    --data-types "${8:-fp32,fp16,bf16}" -o "$OUT/$1.jsonl" "${SHARDS[@]}"
}
seed=7000
for batch in 2048 4096; do
  for profile in 2021 2022; do
    seed=$((seed + 1))
    pool "typed_${profile}_b$batch" "$profile" 120 "$batch" "$seed" "$SAMPLES" 0.25
    pool "unseen_typed_${profile}_b$batch" "$profile" 40 "$batch" $((seed + 100)) \
      "$UNSEEN_SAMPLES" 0
  done
done
pool unseen_fp16_2021_b2048 2021 40 2048 7201 "$UNSEEN_SAMPLES" 0 fp16
pool unseen_fp16_2022_b4096 2022 40 4096 7202 "$UNSEEN_SAMPLES" 0 fp16
pool unseen_bf16_2021_b4096 2021 40 4096 7203 "$UNSEEN_SAMPLES" 0 bf16
pool unseen_bf16_2022_b2048 2022 40 2048 7204 "$UNSEEN_SAMPLES" 0 bf16
