#!/usr/bin/env bash
# other_cpu_fit_and_pretraining.sh continued on the same kind of host (a fresh
# machine), on its scale (its reference file carried in build-dev/other_cpu):
# the unfinished batch-8192 / 4096 pools resumed, row blocks and replica
# slices, hot and huge tables (training and never-seen, as scripts/pretrain.sh
# measures them), two validation pools, and a second `embshard fit` (seed 7).
set -u
ROOT=$PWD
P=$ROOT/build-dev/pkg
export LD_LIBRARY_PATH=$P/lib
E=$P/embshard
LIMIT=${LIMIT:-500}
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
D=$ROOT/build-dev/other_cpu; mkdir -p $D/pools
REF=$D/fit64/fit_data/fit_2021_b1024.jsonl
HOT="--huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300"
T0=$(date +%s)
( s=$(date +%s); timeout $LIMIT $E fit --model models/neural -o $D/fit64s7 --samples 64 --seed 7 \
    > $D/fit64s7.out 2> $D/fit64s7.err; echo "fit rc=$? in $(( $(date +%s) - s )) s" >> $D/fit64s7.out ) &
job() {  # name pool profile batch tables samples seed pieces memcap dims [synth args]
  local pool=$D/pools/$2
  [ -f $pool/tables.json ] || $E synth --profile $3 --tables $5 --batch $4 --seed $7 -o $pool ${11:-} > /dev/null 2>&1
  timeout $(( LIMIT - ($(date +%s) - T0) )) $E bench compute --workload $pool --samples $6 -o $D/$1.jsonl \
    --seed $7 --pieces $8 --executor cpu --max-tables 15 --dims ${10} --mem-cap $9 \
    --warmup 2 --min-rounds 8 --max-rounds 40 --target-ci 0.03 --reference-from $REF --show 0 \
    > /dev/null 2>> $D/$1.err
}
ALL=4,8,16,32,64,128,256
job compute_2021_b4096 compute_2021_b4096 2021 4096 120 800 303 0 128MiB $ALL &
job compute_2021_b8192 compute_2021_b8192 2021 8192 120 800 304 0 128MiB $ALL &
job compute_2022_b8192 compute_2022_b8192 2022 8192 120 800 308 0 128MiB $ALL &
job pieces_2021_b2048 compute_2021_b2048 2021 2048 120 300 302 0.5 128MiB $ALL &
job pieces_2022_b4096 compute_2022_b4096 2022 4096 120 300 307 0.5 128MiB $ALL &
job hot_2021_b2048 hot_2021_b2048 2021 2048 60 250 3401 0.5 3GiB $ALL "$HOT" &
job hot_2022_b4096 hot_2022_b4096 2022 4096 60 250 3402 0.5 3GiB $ALL "$HOT" &
job unseen_hot_2021_b2048 unseen_hot_2021_b2048 2021 2048 40 80 3403 0.5 3GiB 8,16,32 "$HOT" &
job unseen_hot_2022_b4096 unseen_hot_2022_b4096 2022 4096 40 80 3404 0.5 3GiB 8,16,32 "$HOT" &
job unseen_pieces_2021_b2048 unseen_pieces_2021_b2048 2021 2048 40 80 2301 1 128MiB $ALL &
job unseen_pieces_2022_b4096 unseen_pieces_2022_b4096 2022 4096 40 80 2302 1 128MiB $ALL &
job valid_2021_b2048 valid_2021_b2048 2021 2048 40 100 381 0 128MiB $ALL &
job valid_2022_b4096 valid_2022_b4096 2022 4096 40 100 382 0 128MiB $ALL &
wait
for f in $D/*.jsonl; do echo "$(basename $f) $(($(wc -l < $f) - 1))"; done
cat $D/fit64s7.out
(cd $D && tar czf $OUT/other_cpu_pieces.tar.gz --exclude=pools --exclude='pool_*' .)
echo "done t=$(( $(date +%s) - T0 ))s"
