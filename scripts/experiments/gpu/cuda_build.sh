# Sourced by h100_pieces_and_hot_pools.sh: a CUDA build of the
# tree (embshard, test_tbe_cuda, test_executor_cuda) in build-cuda against
# the Debian dependencies carried in build-devdeps (devdeps.sh), whose
# libraries it puts on LD_LIBRARY_PATH. Needs ROOT (the repository root), R
# (the results folder) and pack (the call's packing function); exits the
# script on failure.
L=$ROOT/build-devdeps/root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/pmix2/lib
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBSHARD_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DEMBSHARD_WITH_TORCH=OFF \
  -DCMAKE_PREFIX_PATH="$ROOT/build-devdeps/root/usr;$L/cmake" \
  -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_CXX_SKIP_MPICXX=ON -DMPI_CXX_HEADER_DIR=$L/openmpi/include \
  -DMPI_CXX_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$L/libmpi.so.40 \
  -DZLIB_INCLUDE_DIR=$ROOT/build-devdeps/root/usr/include -DZLIB_LIBRARY=$L/libz.a \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 > $R/cmake.log 2>&1 ||
  { tail -30 $R/cmake.log; pack "cmake failed"; exit 1; }
ninja -C build-cuda embshard_cli test_tbe_cuda test_executor_cuda > $R/build.log 2>&1 ||
  { grep -B2 -A12 -m3 "error" $R/build.log | head -60; pack "build failed"; exit 1; }
