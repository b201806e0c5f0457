#!/usr/bin/env bash
# On an H100, after h100_kernel_and_first_pools.sh (the same folder): the rest
# of models/h100's training pools and its never-seen pools (data/h100).
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
E=$PWD/embshard
R=$OUT/results; D=$R/data; mkdir -p $D; W=/tmp/w; mkdir -p $W
T0=$(date +%s)
nvidia-smi -L | tee $R/gpu_b.txt
pool() {  # profile batch tables samples seed name limit
  $E synth --profile $1 --tables $3 --batch $2 --seed $5 -o $W/$6 > /dev/null 2>&1
  timeout $7 $E bench compute --workload $W/$6 --samples $4 -o $D/$6.jsonl --seed $5 --executor cuda \
    --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap 512MiB --warmup 2 --min-rounds 8 --max-rounds 16 \
    --target-ci 0.02 --reference-window-s 2 --show 0 > /dev/null 2> $D/$6.err
  echo "$6: $(($(wc -l < $D/$6.jsonl) - 1)) records, t=$(( $(date +%s) - T0 ))s"
  (cd $R && tar czf $OUT/gpu_results_b.tar.gz .)
}
pool 2021 16384 40 100 1201 unseen_2021_b16384 60
pool 2022 16384 40 100 1202 unseen_2022_b16384 60
pool 2021 4096 120 300 203 compute_2021_b4096 80
pool 2022 4096 120 300 204 compute_2022_b4096 80
pool 2021 65536 120 200 205 compute_2021_b65536 110
pool 2022 65536 120 200 206 compute_2022_b65536 110
echo "done t=$(( $(date +%s) - T0 ))s"
