#!/usr/bin/env bash
# On an H200: the backward that splits hot rows across warps, checked and
# timed, then plans measured on the GPU. Runs from the repository root with a
# CUDA build made on the CPU machine carried: scripts/build_cuda.sh, the
# binaries stripped (build-cuda/embshard, test_tbe_cuda, test_executor_cuda;
# the previous kernel's embshard in build-cuda-old) and the shared libraries
# `ldd` names that the GPU machine lacks, copied into build-dev/lib:
#   1. the CUDA tests (the new backward against the scalar reference, and the
#      kernel's figures with and without a hot row); should they fail, the
#      previous kernel measures the rest;
#   2. `eval --executor cuda` of the search and `torchrec` on the six-table
#      example (examples/six_tables.json, traces by `synth --spec`) at 16
#      devices of 40 GB, and on a never-seen task set at 8 devices;
#   3. the never-seen pools of models/h200's earlier figures (the same seeds,
#      so the same shards), measured again with this kernel;
#   4. training pools for this kernel: row blocks and replica slices at
#      batches 16384 and 65536, hot and huge tables (`embshard fit --data` on
#      the CPU machine fits models/h100 to them);
#   5. the new backward's tests under compute-sanitizer, if time is left.
# Everything lands in $OUT/k.tar.gz, rewritten after each step. (As first
# run, `bench compute` took its default scale, anchors priced by the CPU
# model, and refused every shard; a second call ran the pools alone, with
# --scale window, as `rm -rf build-dev/k/data; ONLY=pools` does, and a third
# call, `ONLY=pools` on the same machine, resumed the training pools. A call
# before them all found no data root: EMBSHARD_DATA_DIR is set since.)
set -u
ROOT=$PWD
T0=$(date +%s)
R=$ROOT/build-dev/k; D=$R/data; W=/tmp/w; mkdir -p $D $W
pack() { (cd $R && tar czf $OUT/k.tar.gz .); echo "t=$(( $(date +%s) - T0 ))s $*"; }
cap() { local left=$((560 - $(date +%s) + T0)); echo $(( $1 < left ? $1 : (left > 1 ? left : 1) )); }
export LD_LIBRARY_PATH=$ROOT/build-dev/lib EMBSHARD_DATA_DIR=$ROOT
nvidia-smi -L | tee $R/gpu.txt
E=$ROOT/build-cuda/embshard
$E --version > $R/version.txt 2>&1 || { cat $R/version.txt; ldd $E; pack "no binary"; exit 1; }
# Traces on the host's cores while the GPU tests run.
$E synth --spec examples/six_tables.json -o $W/six > $W/six.log 2>&1 &
$E synth --profile 2022 --tables 60 --batch 16384 --seed 4401 -o $W/task_pool > /dev/null 2>&1 &
$E synth --profile 2021 --tables 40 --batch 16384 --seed 1201 -o $W/unseen_2021_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 16384 --seed 1202 -o $W/unseen_2022_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 40 --batch 16384 --seed 2101 -o $W/unseen_pieces_2022_b16384 > /dev/null 2>&1 &
$E synth --profile 2021 --tables 60 --batch 65536 --seed 5101 -o $W/pieces_2021_b65536 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 60 --batch 16384 --seed 5102 -o $W/pieces_2022_b16384 > /dev/null 2>&1 &
$E synth --profile 2022 --tables 60 --batch 16384 --seed 5103 --huge-tables 3 --huge-rows 20000000 \
  --hot-tables 4 --hot-pooling 300 -o $W/hot_2022_b16384 > /dev/null 2>&1 &
if [[ ${ONLY:-} != pools ]]; then
( timeout 90 build-cuda/test_tbe_cuda --gtest_brief=1 && timeout 30 build-cuda/test_executor_cuda --gtest_brief=1 ) > $R/tests.txt 2>&1
rc=$?; echo "tests rc=$rc" >> $R/tests.txt; grep "figures\|rc=\|Failure" $R/tests.txt | head -20
if [[ $rc != 0 && -x build-cuda-old/embshard ]]; then E=$ROOT/build-cuda-old/embshard; echo "old kernel" >> $R/tests.txt; fi
pack "tested"
wait
tail -2 $W/six.log
EVAL="--executor cuda --model models/h200 --algos neuroshard,torchrec --compute-passes 1 --reference-window-s 2"
cat > $W/six_tasks.json << EOF
{"format": "embshard-tasks", "version": 1, "pool": "$W/six",
 "tasks": [{"tables": [0, 1, 2, 3, 4, 5], "dims": [128, 128, 64, 64, 32, 16], "mem_cap_bytes": 40000000000}]}
EOF
timeout $(cap 180) $E eval --tasks $W/six_tasks.json --devices 16 $EVAL -o $D/eval_six_n16.jsonl > $R/eval_six.txt 2>&1
echo "rc=$?" >> $R/eval_six.txt; tail -12 $R/eval_six.txt
pack "six tables"
$E tasks --pool $W/task_pool --tables 20-40 --mem-cap 4GiB --count 2 --seed 4402 -o $W/tasks.json > /dev/null
timeout $(cap 90) $E eval --tasks $W/tasks.json --devices 8 $EVAL -o $D/eval_tasks_n8.jsonl > $R/eval_tasks.txt 2>&1
echo "rc=$?" >> $R/eval_tasks.txt; tail -12 $R/eval_tasks.txt
pack "task set"
fi
wait
measure() {  # pool samples seed pieces mem_cap seconds
  timeout $(cap $6) $E bench compute --workload $W/$1 --samples $2 -o $D/$1.jsonl --seed $3 --executor cuda \
    --pieces $4 --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap $5 --warmup 2 --min-rounds 8 \
    --max-rounds 16 --target-ci 0.02 --scale window --reference-window-s 2 --show 0 > /dev/null 2> $D/$1.err
  pack "$1: $(($(wc -l < $D/$1.jsonl) - 1)) records"
}
measure unseen_2021_b16384 100 1201 0 512MiB 40
measure unseen_2022_b16384 100 1202 0 512MiB 40
measure unseen_pieces_2022_b16384 80 2101 1 2GiB 40
measure pieces_2021_b65536 150 5101 0.5 4GiB 40
measure pieces_2022_b16384 150 5102 0.5 2GiB 40
measure hot_2022_b16384 150 5103 0.5 4GiB 40
pack "pools"
[[ ${ONLY:-} == pools ]] && exit 0
timeout $(cap 40) compute-sanitizer --tool memcheck build-cuda/test_tbe_cuda --gtest_brief=1 \
  --gtest_filter='CudaTbeBackward.*' > $R/sanitizer.txt 2>&1
echo "rc=$?" >> $R/sanitizer.txt; tail -4 $R/sanitizer.txt
pack "done"
