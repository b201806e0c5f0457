#!/usr/bin/env bash
# The CUDA build into build-cuda/: the kernels, the cuda executor (`--executor
# cuda`), the CLI and the CUDA tests (which skip where no GPU is usable). It
# compiles wherever the CUDA toolkit is; CUDA_ARCHS picks the GPUs (default 90:
# H100 and H200).
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=$(command -v nvcc || true)
if [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [[ -z $nvcc ]]; then
  echo "build_cuda.sh: no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit" >&2
  exit 1
fi
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBSHARD_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
  -DEMBSHARD_WITH_TORCH=OFF -DEMBSHARD_PYTHON=OFF >/dev/null
cmake --build build-cuda -j2 --target embshard_cli test_tbe_cuda test_executor_cuda
