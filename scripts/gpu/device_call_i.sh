#!/usr/bin/env bash
# Device call I (2026-11-27): the search's speed on another CPU (the lent
# machine's host), for the sparse head forward of stop 45 (src/cost/neural/
# mlp.cpp): one CPU build of the tree (like cuda_build.sh, build-devdeps
# carried), `bench plan --sizes 1000x64 --threads 1` with this tree's
# mlp.cpp and with the one before it (build-dev/i/mlp_old.cpp, carried) in
# alternating rounds, then scripts/reference_speed.sh against NeuroShard's
# Python (a checkout carried in build-dev/i/neuroshard; the image's python3
# holds torch). Results in $OUT.
set -u
ROOT=$PWD
R=$OUT
L=$ROOT/build-devdeps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/pmix2/lib
T0=$(date +%s)
lscpu > $R/cpu.txt 2>&1; grep -m1 "Model name" $R/cpu.txt
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBSHARD_WITH_TORCH=OFF \
  -DCMAKE_PREFIX_PATH="$ROOT/build-devdeps/root/usr;$L/cmake" \
  -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_CXX_SKIP_MPICXX=ON -DMPI_CXX_HEADER_DIR=$L/openmpi/include \
  -DMPI_CXX_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$L/libmpi.so.40 \
  -DZLIB_INCLUDE_DIR=$ROOT/build-devdeps/root/usr/include -DZLIB_LIBRARY=$L/libz.a \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 > $R/cmake.log 2>&1 || { tail -30 $R/cmake.log; exit 1; }
ninja -C build-cpu embshard_cli > $R/build.log 2>&1 || { grep -m3 -A12 error $R/build.log; exit 1; }
cp build-cpu/embshard /tmp/embshard_new
cp src/cost/neural/mlp.cpp /tmp/mlp_new.cpp && cp build-dev/i/mlp_old.cpp src/cost/neural/mlp.cpp
ninja -C build-cpu embshard_cli >> $R/build.log 2>&1 || { grep -m3 -A12 error $R/build.log; exit 1; }
cp build-cpu/embshard /tmp/embshard_old && cp /tmp/mlp_new.cpp src/cost/neural/mlp.cpp
echo "built in $(( $(date +%s) - T0 )) s"
for round in 1 2 3 4 5; do
  for b in old new; do
    /tmp/embshard_$b bench plan --sizes 1000x64 --cost-models neural --repeats 3 --threads 1 2>/dev/null |
      awk -v b=$b -v r=$round '$1 ~ /^[0-9]+$/ {print "round", r, b, $0}' | tee -a $R/bench_plan.txt
  done
done
echo "benched at $(( $(date +%s) - T0 )) s"
PYTHON=python3 timeout 300 scripts/reference_speed.sh build-dev/i/neuroshard /tmp/embshard_new 3 2>&1 |
  tee $R/reference_speed.txt
echo "done at $(( $(date +%s) - T0 )) s"
