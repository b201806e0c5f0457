#!/usr/bin/env bash
# Run twice (the second resumes the first): a lent GPU machine's 16-core
# host CPU as "another machine" for `embshard fit`, its data kept this time.
# Runs from the repository root with a portable CPU build carried in
# build-dev/pkg (embshard built with -DEMBSHARD_NATIVE=OFF
# -DEMBSHARD_WITH_TORCH=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3, and the
# shared libraries it needs in lib/). Steps, all with the cpu executor:
#   1. `embshard fit --samples 64` as a user would run it (timed);
#   2. once its first file holds the reference probe, at the same time and on
#      that scale: a reduced full pretraining (8 pools, profiles 2021 and 2022
#      x batches 1024-8192) and four never-seen pools (2021 and 2022 x 2048
#      and 4096), each measuring process until LIMIT seconds.
set -u
ROOT=$PWD
P=$ROOT/build-dev/pkg
export LD_LIBRARY_PATH=$P/lib
E=$P/embshard
LIMIT=${LIMIT:-500}
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }  # where the portable build finds models/
D=$ROOT/build-dev/other_cpu; mkdir -p $D/pools
T0=$(date +%s)
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > $D/cpu.txt; nproc >> $D/cpu.txt
head -2 $D/cpu.txt

FIT=$D/fit64
if [ ! -f $FIT/manifest.json ]; then
  ( s=$(date +%s); timeout $LIMIT $E fit --model models/neural -o $FIT --samples 64 > $D/fit64.out 2> $D/fit64.err
    echo "fit rc=$? in $(( $(date +%s) - s )) s" >> $D/fit64.out ) &
fi
REF=$FIT/fit_data/fit_2021_b1024.jsonl
for _ in $(seq 120); do [ -s $REF ] && head -1 $REF | grep -q probe && break; sleep 1; done
echo "reference file ready at t=$(( $(date +%s) - T0 ))s"

job() {  # profile batch tables samples seed name
  local pool=$D/pools/$6
  [ -f $pool/tables.json ] || $E synth --profile $1 --tables $3 --batch $2 --seed $5 -o $pool > /dev/null 2>&1
  timeout $(( LIMIT - ($(date +%s) - T0) )) $E bench compute --workload $pool --samples $4 -o $D/$6.jsonl \
    --seed $5 --executor cpu --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap 128MiB \
    --warmup 2 --min-rounds 8 --max-rounds 40 --target-ci 0.03 --reference-from $REF --show 0 \
    > /dev/null 2>> $D/$6.err
}
i=0
for p in 2021 2022; do for b in 1024 2048 4096 8192; do
  i=$((i+1)); job $p $b 120 800 $((300+i)) compute_${p}_b$b &
done; done
job 2021 2048 40 100 331 unseen_2021_b2048 &
job 2022 4096 40 100 332 unseen_2022_b4096 &
job 2021 4096 40 100 333 unseen_2021_b4096 &
job 2022 2048 40 100 334 unseen_2022_b2048 &
wait
for f in $D/*.jsonl; do echo "$(basename $f) $(($(wc -l < $f) - 1))"; done
cat $D/fit64.out
(cd $D && tar czf $OUT/other_cpu.tar.gz --exclude=pools --exclude='pool_*' .)
echo "done t=$(( $(date +%s) - T0 ))s"
