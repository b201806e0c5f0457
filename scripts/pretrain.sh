#!/usr/bin/env bash
# Regenerates a neural cost model set end to end on this machine:
#   synth pool -> bench compute -> (a second, never-seen pool) -> bench comm at
#   several device counts -> train -> validate on the never-seen pool.
# Usage: scripts/pretrain.sh OUT_DIR      (sizes below; override any by env var)
# Every step resumes: rerun the same command after an interruption.
set -euo pipefail

OUT=${1:?usage: scripts/pretrain.sh OUT_DIR}
EMBSHARD=${EMBSHARD:-build/embshard}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}

# The workload pool and the compute measurements.
PROFILE=${PROFILE:-2021}
TABLES=${TABLES:-60}              # pool tables
BATCH=${BATCH:-2048}              # batch size of compute and comm (one model, one batch)
SEED=${SEED:-1}
COMPUTE_SAMPLES=${COMPUTE_SAMPLES:-800}
MAX_TABLES=${MAX_TABLES:-15}      # tables per shard: 1..MAX_TABLES
DIMS=${DIMS:-4,8,16,32,64,128}
MEM_CAP=${MEM_CAP:-134217728}     # weight bytes per shard (filled per shard: larger is slower to collect)
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-7}
THREADS=${THREADS:-1}             # executor threads (a "device")
# Tables never seen in training: another pool from another seed.
UNSEEN_TABLES=${UNSEEN_TABLES:-20}
UNSEEN_SAMPLES=${UNSEEN_SAMPLES:-150}
# Communication: one file per device count, all served by one model.
COMM_DEVICES=${COMM_DEVICES:-"2 4 8"}
COMM_SAMPLES=${COMM_SAMPLES:-200}
COMM_REPEATS=${COMM_REPEATS:-5}
COMM_MAX_DELAY_MS=${COMM_MAX_DELAY_MS:-5}
# Training.
TRAIN_SEED=${TRAIN_SEED:-0}
HOLDOUT_TABLES=${HOLDOUT_TABLES:-0.05}  # few: records mixing held-out tables are unused; the unseen pool is the main unseen test
EPOCHS=${EPOCHS:-400}

mkdir -p "$OUT/data"
DATA=$OUT/data
run() { echo "+ $*" >&2; "$@"; }

[ -f "$DATA/pool/tables.json" ] ||
  run "$EMBSHARD" synth --profile "$PROFILE" --tables "$TABLES" --batch "$BATCH" --seed "$SEED" \
    -o "$DATA/pool"
[ -f "$DATA/unseen_pool/tables.json" ] ||
  run "$EMBSHARD" synth --profile "$PROFILE" --tables "$UNSEEN_TABLES" --batch "$BATCH" \
    --seed $((SEED + 1000)) -o "$DATA/unseen_pool"

bench_compute() {  # workload samples out seed
  run "$EMBSHARD" bench compute --workload "$1" --samples "$2" --out "$3" --seed "$4" \
    --max-tables "$MAX_TABLES" --dims "$DIMS" --mem-cap "$MEM_CAP" --warmup "$WARMUP" \
    --repeats "$REPEATS" --threads "$THREADS" --show 0
}
bench_compute "$DATA/pool" "$COMPUTE_SAMPLES" "$DATA/compute.jsonl" "$SEED"
bench_compute "$DATA/unseen_pool" "$UNSEEN_SAMPLES" "$DATA/compute_unseen.jsonl" $((SEED + 1000))

COMM_ARGS=()
for n in $COMM_DEVICES; do
  run $MPIRUN -np "$n" "$EMBSHARD" bench comm --samples "$COMM_SAMPLES" --batch "$BATCH" \
    --seed "$SEED" --repeats "$COMM_REPEATS" --max-delay-ms "$COMM_MAX_DELAY_MS" --show 0 \
    --out "$DATA/comm_n$n.jsonl"
  COMM_ARGS+=(--comm "$DATA/comm_n$n.jsonl")
done

run "$EMBSHARD" train --compute "$DATA/compute.jsonl" "${COMM_ARGS[@]}" \
  --unseen-compute "$DATA/compute_unseen.jsonl" --out "$OUT/model" --seed "$TRAIN_SEED" \
  --holdout-tables "$HOLDOUT_TABLES" --epochs "$EPOCHS"
run "$EMBSHARD" validate --model "$OUT/model" --data "$DATA/compute_unseen.jsonl"
run "$EMBSHARD" bench cost-model --model "$OUT/model"
echo "model set in $OUT/model (report: $OUT/model/report.md)"
