#!/usr/bin/env bash
# On an H100: the GPU model set's missing ground truth, row
# blocks, replica slices and hot and huge tables, measured on an H100 with the
# CUDA executor. Runs from the repository root with the project's Debian
# dependencies carried in build-devdeps/root (devdeps.sh):
#   1. a CUDA build (embshard, test_tbe_cuda, test_executor_cuda);
#   2. the CUDA tests;
#   3. pools as scripts/pretrain.sh makes them (pieces on the training pools'
#      seeds, hot-and-huge pools, never-seen pools of each), each measured by
#      `bench compute --executor cuda` until its time is up.
# Everything lands in $OUT/g.tar.gz, rewritten after each step. (As first run
# the tests ran joined by ';', and unseen_hot_2022_b4096 was made and measured
# by a third, resuming session; the lines here do the same in one.)
set -u
ROOT=$PWD
T0=$(date +%s)
R=$ROOT/build-dev/g; D=$R/data; W=/tmp/w; mkdir -p $D $W
pack() { (cd $R && tar czf $OUT/g.tar.gz .); echo "t=$(( $(date +%s) - T0 ))s $*"; }
nvidia-smi -L | tee $R/gpu.txt
. scripts/experiments/gpu/cuda_build.sh
E=$ROOT/build-cuda/embshard
pack "built"
( build-cuda/test_tbe_cuda --gtest_brief=1 && build-cuda/test_executor_cuda --gtest_brief=1 ) > $R/tests.txt 2>&1
echo "tests rc=$?" >> $R/tests.txt; tail -3 $R/tests.txt
HOT="--huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300"
# Pools first, all at once on the host's cores (the GPU measures one at a time).
$E synth --profile 2021 --tables 120 --batch 16384 --seed 201 -o $W/pool_2021_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 120 --batch 4096 --seed 204 -o $W/pool_2022_b4096 > /dev/null 2>&1 &
$E synth --profile 2021 --tables 60 --batch 16384 --seed 3101 $HOT -o $W/hot_2021_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 60 --batch 4096 --seed 3102 $HOT -o $W/hot_2022_b4096 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 16384 --seed 2101 -o $W/unseen_pieces_2022_b16384 > /dev/null 2>&1 &
$E synth --profile 2021 --tables 40 --batch 16384 --seed 3103 $HOT -o $W/unseen_hot_2021_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 4096 --seed 3104 $HOT -o $W/unseen_hot_2022_b4096 > /dev/null 2>&1 &
wait
pack "pools made"
measure() {  # pool out samples seed pieces mem_cap dims seconds
  timeout $8 $E bench compute --workload $W/$1 --samples $3 -o $D/$2.jsonl --seed $4 --executor cuda \
    --pieces $5 --max-tables 15 --dims $7 --mem-cap $6 --warmup 2 --min-rounds 8 --max-rounds 16 \
    --target-ci 0.02 --reference-window-s 2 --show 0 > /dev/null 2> $D/$2.err
  pack "$2: $(($(wc -l < $D/$2.jsonl) - 1)) records"
}
ALL=4,8,16,32,64,128,256
measure unseen_pieces_2022_b16384 unseen_pieces_2022_b16384 80 2101 1 2GiB $ALL 40
measure unseen_hot_2021_b16384 unseen_hot_2021_b16384 80 3103 0.5 4GiB 8,16,32 45
measure pool_2021_b16384 pieces_2021_b16384 150 201 0.5 2GiB $ALL 55
measure pool_2022_b4096 pieces_2022_b4096 150 204 0.5 512MiB $ALL 40
measure hot_2021_b16384 hot_2021_b16384 200 3101 0.5 4GiB $ALL 65
measure hot_2022_b4096 hot_2022_b4096 200 3102 0.5 4GiB $ALL 50
measure unseen_hot_2022_b4096 unseen_hot_2022_b4096 80 3104 0.5 4GiB 8,16,32 60
pack "done"
