#!/usr/bin/env bash
# Installs every dependency, then configures and builds all of embshard
# (Release, with libtorch and the Python module) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DEMBSHARD_WITH_TORCH=ON -DEMBSHARD_PYTHON=ON >/dev/null
cmake --build build -j2
