#!/usr/bin/env bash
# Device call C: the device's CPU as "another machine": fit data, a reduced
# full pretraining and never-seen pools, all with the cpu executor.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
E=$PWD/embshard
R=$OUT/results; D=$R/data; mkdir -p $D; W=/tmp/w; mkdir -p $W
T0=$(date +%s)
lscpu | grep -E "Model name|^CPU\(s\)" | tee $R/cpu.txt
job() {  # profile batch tables samples seed name
  $E synth --profile $1 --tables $3 --batch $2 --seed $5 -o $W/$6 > /dev/null 2>&1
  timeout 300 $E bench compute --workload $W/$6 --samples $4 -o $D/$6.jsonl --seed $5 --executor cpu \
    --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap 128MiB --warmup 2 --min-rounds 8 --max-rounds 24 \
    --target-ci 0.03 --reference-window-s 5 --show 0 > /dev/null 2> $D/$6.err
}
i=0
for p in 2021 2022; do for b in 1024 2048 4096 8192; do i=$((i+1)); job $p $b 120 400 $((300+i)) compute_${p}_b$b & done; done
job 2021 2048 120 60 321 fit_2021_b2048 &
job 2021 2048 40 100 331 unseen_2021_b2048 &
job 2022 4096 40 100 332 unseen_2022_b4096 &
wait
for f in $D/*.jsonl; do echo "$(basename $f) $(($(wc -l < $f) - 1))"; done
(cd $R && tar czf $OUT/cpu_results.tar.gz .)
echo "done t=$(( $(date +%s) - T0 ))s"
