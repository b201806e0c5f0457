#!/usr/bin/env bash
# Regenerates a neural cost model set end to end on this machine:
#   synth pools (both published profiles, several batches) -> bench compute on
#   each (normalized against one reference probe) -> never-seen pools (other
#   seeds) -> bench comm at several device counts and batches -> train one
#   model over all of it -> validate on every never-seen pool.
# Usage: scripts/pretrain.sh OUT_DIR      (sizes below; override any by env var)
# On a GPU (a build with -DEMBSHARD_CUDA=ON; one GPU times no all-to-all):
#   EXECUTOR=cuda RAW=1 COMM_DEVICES= BATCHES="4096 16384 65536" UNSEEN_BATCHES=16384 \
#     PIECE_BATCHES="4096 16384" UNSEEN_PIECES=2022:16384 HOT_POOLS="2021:16384 2022:4096" \
#     HOT_MEM_CAP=4GiB HOLDOUT_TABLES=0 MEM_CAP=2GiB REFERENCE_WINDOW_S=3 scripts/pretrain.sh OUT
#   (the kinds of data models/h100 was trained on, data/h100, and its training
#   setting: docs/measurement.md)
#   then a model set: mkdir SET; cp -r OUT/model SET/neural; cp models/h100/comm.json SET/
#   (edit its constants for your interconnect) and plan with --model SET.
# Every step resumes: rerun the same command after an interruption.
set -euo pipefail

OUT=${1:?usage: scripts/pretrain.sh OUT_DIR}
EMBSHARD=${EMBSHARD:-build/embshard}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
EXECUTOR=${EXECUTOR:-cpu}             # cpu | cuda
THREADS=${THREADS:-1}                 # executor threads (a "device")

# Training pools: one per (profile, batch); the model takes the batch as an input.
PROFILES=${PROFILES:-"2021 2022"}
BATCHES=${BATCHES:-"1024 2048 4096 8192"}
TABLES=${TABLES:-120}                 # tables per pool
SAMPLES=${SAMPLES:-500}               # shards measured per pool
SEED=${SEED:-1}
MAX_TABLES=${MAX_TABLES:-15}          # tables per shard: 1..MAX_TABLES
DIMS=${DIMS:-4,8,16,32,64,128,256}
MEM_CAP=${MEM_CAP:-128MiB}            # weights per shard at most
WARMUP=${WARMUP:-2}
MIN_ROUNDS=${MIN_ROUNDS:-8}           # interleaved rounds (shard + reference probe) per shard
MAX_ROUNDS=${MAX_ROUNDS:-40}
TARGET_CI=${TARGET_CI:-0.03}
REFERENCE_WINDOW_S=${REFERENCE_WINDOW_S:-20}
# Row pieces and replica slices: a share of the drawn tables made a 2/4/8-way
# row block or batch slice (bench compute --pieces), on the training pools of
# these batches, and on never-seen pools (profile:batch) made of them only.
PIECE_SHARE=${PIECE_SHARE:-0.5}
PIECE_BATCHES=${PIECE_BATCHES:-"2048 4096"}
PIECE_SAMPLES=${PIECE_SAMPLES:-150}
UNSEEN_PIECES=${UNSEEN_PIECES:-"2021:2048 2022:4096"}
UNSEEN_PIECE_SAMPLES=${UNSEEN_PIECE_SAMPLES:-80}
# Hot and huge tables (the kind row-wise and data-parallel sharding are for):
# pools with HOT_ARGS per profile:batch, measured with pieces and a bigger
# shard cap, for training and (other seeds, the stress tasks' dims) as tests.
HOT_POOLS=${HOT_POOLS:-"2021:2048 2022:4096"}
HOT_ARGS=${HOT_ARGS:-"--huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300"}
HOT_TABLES=${HOT_TABLES:-60}
HOT_SAMPLES=${HOT_SAMPLES:-250}
HOT_MEM_CAP=${HOT_MEM_CAP:-3GiB}
UNSEEN_HOT_SAMPLES=${UNSEEN_HOT_SAMPLES:-80}
UNSEEN_HOT_DIMS=${UNSEEN_HOT_DIMS:-8,16,32}
# Never-seen tables: pools from other seeds, the model's tests.
UNSEEN_BATCHES=${UNSEEN_BATCHES:-"2048 4096"}
UNSEEN_TABLES=${UNSEEN_TABLES:-40}
UNSEEN_SAMPLES=${UNSEEN_SAMPLES:-100}
# Communication: one file per (device count, batch), all served by one model.
COMM_DEVICES=${COMM_DEVICES:-"2 4 8"}
COMM_BATCHES=${COMM_BATCHES:-"2048 4096"}
COMM_SAMPLES=${COMM_SAMPLES:-150}
COMM_REPEATS=${COMM_REPEATS:-6}
COMM_PASSES=${COMM_PASSES:-3}         # each placement measured in 3 passes, its fastest kept
# 2 ranks: the exchanges are small and their figures scatter most, so more
# placements, each the mean of its fastest 4 of 8 passes (docs/cost_models.md).
COMM_SAMPLES_2=${COMM_SAMPLES_2:-600}
COMM_PASSES_2=${COMM_PASSES_2:-8}
COMM_MAX_DELAY_MS=${COMM_MAX_DELAY_MS:-5}
# Training. RAW=1 trains on the raw medians (a dedicated device such as a GPU,
# where they repeat better than the ratio to the probe: docs/cost_models.md).
RAW=${RAW:-0}
TRAIN_SEED=${TRAIN_SEED:-0}
HOLDOUT_TABLES=${HOLDOUT_TABLES:-0.05}
EPOCHS=${EPOCHS:-400}

DATA=$OUT/data
mkdir -p "$DATA"
run() { echo "+ $*" >&2; "$@"; }

# The first compute file measures the reference probe's quiet time (--scale
# window: the data set the model's scale, no model prices anchors yet); every
# other file takes its reference, so that all of them share one scale.
REFERENCE_FILE=""
bench_compute() {  # workload samples out seed [piece share]
  local ref=()
  if [ -n "$REFERENCE_FILE" ]; then ref=(--reference-from "$REFERENCE_FILE"); else ref=(--scale window); fi
  run "$EMBSHARD" bench compute --workload "$1" --samples "$2" -o "$3" --seed "$4" \
    --pieces "${5:-0}" \
    --executor "$EXECUTOR" --threads "$THREADS" --max-tables "$MAX_TABLES" --dims "$DIMS" \
    --mem-cap "$MEM_CAP" --warmup "$WARMUP" --min-rounds "$MIN_ROUNDS" \
    --max-rounds "$MAX_ROUNDS" --target-ci "$TARGET_CI" \
    --reference-window-s "$REFERENCE_WINDOW_S" "${ref[@]}" --show 0
  [ -n "$REFERENCE_FILE" ] || REFERENCE_FILE=$3
}

synth() {  # profile tables batch seed dir [synth options]
  [ -f "$5/tables.json" ] ||
    run "$EMBSHARD" synth --profile "$1" --tables "$2" --batch "$3" --seed "$4" -o "$5" ${6:-}
}

COMPUTE_ARGS=()
i=0
for profile in $PROFILES; do
  for batch in $BATCHES; do
    i=$((i + 1))
    pool=$DATA/pool_${profile}_b$batch
    synth "$profile" "$TABLES" "$batch" $((SEED * 100 + i)) "$pool"
    bench_compute "$pool" "$SAMPLES" "$DATA/compute_${profile}_b$batch.jsonl" $((SEED * 100 + i))
    COMPUTE_ARGS+=(--compute "$DATA/compute_${profile}_b$batch.jsonl")
  done
done

k=0
for profile in $PROFILES; do
  for batch in $BATCHES; do
    k=$((k + 1))
    case " $PIECE_BATCHES " in *" $batch "*) ;; *) continue ;; esac
    [ "$PIECE_SHARE" != 0 ] || continue
    bench_compute "$DATA/pool_${profile}_b$batch" "$PIECE_SAMPLES" \
      "$DATA/pieces_${profile}_b$batch.jsonl" $((SEED * 100 + k)) "$PIECE_SHARE"
    COMPUTE_ARGS+=(--compute "$DATA/pieces_${profile}_b$batch.jsonl")
  done
done

h=0
for pair in $HOT_POOLS; do
  h=$((h + 1))
  profile=${pair%%:*} batch=${pair##*:}
  pool=$DATA/hot_pool_${profile}_b$batch
  synth "$profile" "$HOT_TABLES" "$batch" $((SEED * 100 + 3000 + h)) "$pool" "$HOT_ARGS"
  MEM_CAP=$HOT_MEM_CAP bench_compute "$pool" "$HOT_SAMPLES" "$DATA/hot_${profile}_b$batch.jsonl" \
    $((SEED * 100 + 3000 + h)) "$PIECE_SHARE"
  COMPUTE_ARGS+=(--compute "$DATA/hot_${profile}_b$batch.jsonl")
done

UNSEEN_ARGS=()
for pair in $HOT_POOLS; do
  h=$((h + 1))
  profile=${pair%%:*} batch=${pair##*:}
  pool=$DATA/unseen_hot_pool_${profile}_b$batch
  synth "$profile" "$UNSEEN_TABLES" "$batch" $((SEED * 100 + 3000 + h)) "$pool" "$HOT_ARGS"
  MEM_CAP=$HOT_MEM_CAP DIMS=$UNSEEN_HOT_DIMS bench_compute "$pool" "$UNSEEN_HOT_SAMPLES" \
    "$DATA/unseen_hot_${profile}_b$batch.jsonl" $((SEED * 100 + 3000 + h)) "$PIECE_SHARE"
  UNSEEN_ARGS+=(--unseen-compute "$DATA/unseen_hot_${profile}_b$batch.jsonl")
done
for profile in $PROFILES; do
  for batch in $UNSEEN_BATCHES; do
    i=$((i + 1))
    pool=$DATA/unseen_${profile}_b$batch
    synth "$profile" "$UNSEEN_TABLES" "$batch" $((SEED * 100 + 1000 + i)) "$pool"
    bench_compute "$pool" "$UNSEEN_SAMPLES" "$DATA/unseen_${profile}_b$batch.jsonl" \
      $((SEED * 100 + 1000 + i))
    UNSEEN_ARGS+=(--unseen-compute "$DATA/unseen_${profile}_b$batch.jsonl")
  done
done

j=0
for pair in $UNSEEN_PIECES; do
  j=$((j + 1))
  profile=${pair%%:*} batch=${pair##*:}
  pool=$DATA/unseen_pieces_${profile}_b$batch
  synth "$profile" "$UNSEEN_TABLES" "$batch" $((SEED * 100 + 2000 + j)) "$pool"
  bench_compute "$pool" "$UNSEEN_PIECE_SAMPLES" "$pool.jsonl" $((SEED * 100 + 2000 + j)) 1
  UNSEEN_ARGS+=(--unseen-compute "$pool.jsonl")
done

COMM_ARGS=()
for n in $COMM_DEVICES; do
  samples=$COMM_SAMPLES passes=$COMM_PASSES
  if [ "$n" = 2 ]; then samples=$COMM_SAMPLES_2 passes=$COMM_PASSES_2; fi
  for batch in $COMM_BATCHES; do
    run $MPIRUN -np "$n" "$EMBSHARD" bench comm --samples "$samples" --batch "$batch" \
      --seed "$SEED" --repeats "$COMM_REPEATS" --passes "$passes" \
      --max-delay-ms "$COMM_MAX_DELAY_MS" --show 0 -o "$DATA/comm_n${n}_b$batch.jsonl"
    COMM_ARGS+=(--comm "$DATA/comm_n${n}_b$batch.jsonl")
  done
done

RAW_ARGS=()
if [ "$RAW" = 1 ]; then RAW_ARGS=(--raw); fi
run "$EMBSHARD" train "${COMPUTE_ARGS[@]}" "${COMM_ARGS[@]}" "${UNSEEN_ARGS[@]}" "${RAW_ARGS[@]}" \
  -o "$OUT/model" --seed "$TRAIN_SEED" --holdout-tables "$HOLDOUT_TABLES" --epochs "$EPOCHS"
for profile in $PROFILES; do
  for batch in $UNSEEN_BATCHES; do
    run "$EMBSHARD" validate --model "$OUT/model" --data "$DATA/unseen_${profile}_b$batch.jsonl" \
      "${RAW_ARGS[@]}"
  done
done
for pair in $UNSEEN_PIECES; do
  run "$EMBSHARD" validate --model "$OUT/model" \
    --data "$DATA/unseen_pieces_${pair%%:*}_b${pair##*:}.jsonl" "${RAW_ARGS[@]}"
done
for pair in $HOT_POOLS; do
  run "$EMBSHARD" validate --model "$OUT/model" \
    --data "$DATA/unseen_hot_${pair%%:*}_b${pair##*:}.jsonl" "${RAW_ARGS[@]}"
done
run "$EMBSHARD" bench cost-model --model "$OUT/model"
echo "model set in $OUT/model (report: $OUT/model/report.md)"
