#!/usr/bin/env bash
# `embshard fit` with its defaults (256 shards, a pool to fit on and one to
# judge per profile and batch) run as a user would on a fresh 16-core host CPU
# of a lent GPU machine, timed, then four never-seen pools measured on its
# scale (data/fit_other_cpu/fit_default_*). The portable build (see
# other_cpu_fit_and_pretraining.sh) has no libtorch: the fine-tune step runs
# afterwards on a machine with libtorch, from the files (docs/cost_models.md).
set -u
ROOT=$PWD
P=$ROOT/build-dev/pkg
export LD_LIBRARY_PATH=$P/lib
E=$P/embshard
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
D=/tmp/f; mkdir -p $D/pools
T0=$(date +%s)
lscpu | grep -E "Model name|^CPU\(s\)" > $D/cpu.txt; cat $D/cpu.txt
$E fit --model models/neural -o $D/fit > $D/fit.out 2> $D/fit.err
echo "fit rc=$? in $(( $(date +%s) - T0 )) s" >> $D/fit.out; cat $D/fit.out
save() { (cd $D && tar czf $OUT/other_cpu_fit.tar.gz --exclude=pools --exclude='pool_*' .); }
save
REF=$D/fit/fit_data/fit_2021_b1024.jsonl
job() {  # profile batch seed name
  $E synth --profile $1 --tables 40 --batch $2 --seed $3 -o $D/pools/$4 > /dev/null 2>&1
  timeout ${LIMIT:-150} $E bench compute --workload $D/pools/$4 --samples 60 -o $D/$4.jsonl --seed $3 \
    --executor cpu --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap 128MiB --warmup 2 \
    --min-rounds 8 --max-rounds 40 --target-ci 0.03 --reference-from $REF --show 0 > /dev/null 2> $D/$4.err
}
job 2021 2048 441 unseen_2021_b2048 &
job 2021 4096 442 unseen_2021_b4096 &
job 2022 2048 443 unseen_2022_b2048 &
job 2022 4096 444 unseen_2022_b4096 &
wait
for f in $D/*.jsonl; do echo "$(basename $f) $(($(wc -l < $f) - 1))"; done
save
echo "done t=$(( $(date +%s) - T0 ))s"
