#!/usr/bin/env bash
# README's first command: install, build, and run the main job on built-in
# defaults (for now: synthesize a small workload and measure shard costs).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec ./build/embshard demo "$@"
