#!/usr/bin/env bash
# README's first command: install what planning needs, build the CLI alone,
# and run the main job on built-in defaults (`embshard demo`: synthesize a small
# workload, measure shards of it, plan it). scripts/test.sh builds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh plan
configure=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
# A first build skips what the demo does not use (libtorch, the Python module);
# a build tree that scripts/build.sh already made keeps its settings.
if [ ! -f build/CMakeCache.txt ]; then
  configure+=(-DEMBSHARD_WITH_TORCH=OFF -DEMBSHARD_PYTHON=OFF)
fi
cmake -S . -B build "${configure[@]}" >/dev/null
cmake --build build -j2 --target embshard_cli
exec ./build/embshard demo "$@"
