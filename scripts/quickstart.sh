#!/usr/bin/env bash
# README's first command: install, build, and run the main job on built-in
# defaults (`embshard demo`: synthesize a small workload, measure shards of it, plan it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec ./build/embshard demo "$@"
