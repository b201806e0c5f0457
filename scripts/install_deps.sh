#!/usr/bin/env bash
# Installs embshard's dependencies from Debian's archive. Non-interactive and
# idempotent: does nothing when everything is installed.
#   install_deps.sh plan   what the CLI needs to build and plan (the quick start)
#   install_deps.sh        everything: libtorch, the test libraries, the Python module
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
)
if [ "${1:-all}" != "plan" ]; then
  # libopenblas0-pthread: without it libtorch runs small MLPs on the reference BLAS (~10x slower).
  # clang-14, libclang-rt-14-dev (libFuzzer, the sanitizers), libomp-14-dev: scripts/fuzz.sh.
  packages+=(libtorch-dev libopenblas0-pthread libbenchmark-dev
    python3 python3-dev python3-torch pybind11-dev python3-pybind11
    python3-pip python3-setuptools python3-wheel python3-venv
    clang-14 libclang-rt-14-dev libomp-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
