#!/usr/bin/env bash
# On an H100: the CUDA tests (correctness), the kernel's figures against a device
# copy and torch.nn.EmbeddingBag (cuda_peer.py), GPU repeatability, and the first
# training pools of models/h100 (data/h100). Runs from a folder holding embshard,
# test_tbe_cuda, test_executor_cuda, their shared libraries in lib/ and
# cuda_peer.py; what comes back goes to $OUT.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
E=$PWD/embshard
R=$OUT/results; mkdir -p $R
nvidia-smi -L | tee $R/gpu.txt
T0=$(date +%s)
( ./test_tbe_cuda --gtest_brief=1; ./test_executor_cuda --gtest_brief=1 ) > $R/tests.txt 2>&1; echo "tests rc=$?" >> $R/tests.txt
tail -4 $R/tests.txt
./test_tbe_cuda --gtest_filter='CudaTbeTiming.Reports*' > $R/kernel.txt 2>&1
python3 cuda_peer.py --tables 1 --rows 2000000 --dims 128 --batch 4096 --pooling 32 > $R/peer1.json 2>&1
python3 cuda_peer.py --tables 16 --rows 250000 --dims 128,32,64,32 --batch 4096 --pooling 16 > $R/peer16.json 2>&1
grep figures $R/kernel.txt; cat $R/peer1.json $R/peer16.json | head -30
echo "t=$(( $(date +%s) - T0 ))s"
W=/tmp/w; mkdir -p $W
$E synth --profile 2022 --tables 40 --batch 16384 --seed 1 -o $W/rep > /dev/null 2>&1
timeout 150 $E bench repeat --workload $W/rep --samples 40 --seed 1 --executor cuda --reference-window-s 3 --mem-cap 2GiB --json > $R/repeat_cuda.json 2> $R/repeat_cuda.err
python3 -c "import json;d=json.load(open('$R/repeat_cuda.json'));print('repeat', d['executor'], d['raw'], d['normalized'])"
echo "t=$(( $(date +%s) - T0 ))s"
D=$R/data; mkdir -p $D
pool() {  # profile batch tables samples seed name [reference]
  $E synth --profile $1 --tables $3 --batch $2 --seed $5 -o $W/$6 > /dev/null 2>&1
  local ref=(); [ -n "${7:-}" ] && ref=(--reference-from $7)
  timeout ${LIMIT:-200} $E bench compute --workload $W/$6 --samples $4 -o $D/$6.jsonl --seed $5 --executor cuda \
    --max-tables 15 --dims 4,8,16,32,64,128,256 --mem-cap 2GiB --warmup 2 --min-rounds 8 --max-rounds 24 \
    --target-ci 0.02 --reference-window-s 3 "${ref[@]}" --show 0 > /dev/null 2> $D/$6.err
  echo "$6: $(($(wc -l < $D/$6.jsonl) - 1)) records, t=$(( $(date +%s) - T0 ))s"
  (cd $R && tar czf $OUT/gpu_results.tar.gz .)
}
LIMIT=150 pool 2021 16384 120 400 201 compute_2021_b16384
pool 2022 16384 120 400 202 compute_2022_b16384 $D/compute_2021_b16384.jsonl
(cd $R && tar czf $OUT/gpu_results.tar.gz .)
echo "done t=$(( $(date +%s) - T0 ))s"
