#!/usr/bin/env bash
# `embshard fit` of the H100's model set on another GPU (an H200), as a user
# there would run it. From the repository root with build-devdeps carried
# (devdeps.sh), like h100_pieces_and_hot_pools.sh:
#   1. a CUDA build (embshard, test_tbe_cuda, test_executor_cuda) and the CUDA
#      tests (the kernel's figures on this GPU);
#   2. `embshard fit --model models/h100 --executor cuda --raw`, timed: it
#      measures its own pools to fit on and to judge by; this build has no
#      libtorch, so the plane alone here (the fine-tune runs on the CPU
#      machine from the same files: training needs no GPU);
#   3. the never-seen pools of models/h100's figures (the same seeds and
#      flags as h100_pools.sh and h100_pieces_and_hot_pools.sh), measured on
#      this GPU.
# Everything but the pools' traces lands in $OUT/h.tar.gz, rewritten after
# each step. (As first run the pack took the fit's pools too, which made it
# slow and too large to come back; a second session packed the files here,
# and a third resumed the last two pools with the `measure` lines.)
set -u
ROOT=$PWD
T0=$(date +%s)
R=$ROOT/build-dev/h; D=$R/data; W=/tmp/w; mkdir -p $D $W
pack() { (cd $R && tar czf $OUT/h.tar.gz --exclude='pool_*' .); echo "t=$(( $(date +%s) - T0 ))s $*"; }
nvidia-smi -L | tee $R/gpu.txt
. scripts/experiments/gpu/cuda_build.sh
E=$ROOT/build-cuda/embshard
pack "built"
# The never-seen pools are made on the host's cores while the GPU works.
$E synth --profile 2021 --tables 40 --batch 16384 --seed 1201 -o $W/unseen_2021_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 16384 --seed 1202 -o $W/unseen_2022_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 16384 --seed 2101 -o $W/unseen_pieces_2022_b16384 > /dev/null 2>&1 &
( build-cuda/test_tbe_cuda --gtest_brief=1 && build-cuda/test_executor_cuda --gtest_brief=1 ) > $R/tests.txt 2>&1
echo "tests rc=$?" >> $R/tests.txt; grep "figures\|rc=" $R/tests.txt
pack "tested"
S=$(date +%s)
timeout 220 $E fit --model models/h100 -o $R/fit --executor cuda --raw --batches 4096,16384,65536 \
  --mem-cap 512MiB --dims 4,8,16,32,64,128,256 --reference-window-s 3 --fine-tune off \
  > $R/fit.txt 2> $R/fit.err
echo "fit rc=$? in $(( $(date +%s) - S )) s" >> $R/fit.txt; cat $R/fit.txt
pack "fit"
wait
measure() {  # pool samples seed pieces mem_cap seconds
  timeout $6 $E bench compute --workload $W/$1 --samples $2 -o $D/$1.jsonl --seed $3 --executor cuda \
    --pieces $4 --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap $5 --warmup 2 --min-rounds 8 \
    --max-rounds 16 --target-ci 0.02 --reference-window-s 2 --show 0 > /dev/null 2> $D/$1.err
  pack "$1: $(($(wc -l < $D/$1.jsonl) - 1)) records"
}
measure unseen_2021_b16384 100 1201 0 512MiB 50
measure unseen_2022_b16384 100 1202 0 512MiB 50
measure unseen_pieces_2022_b16384 80 2101 1 2GiB 40
pack "done"
