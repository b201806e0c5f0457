#!/usr/bin/env bash
# Unpacks the project's Debian build dependencies into build-devdeps/root, for
# a CUDA build on a machine that has nvcc, CMake and ninja but none of them
# (a lent GPU machine: cuda_build.sh configures against it).
# Needs apt-get (a Debian bookworm host, like the one CI runs on); installs
# nothing here. Idempotent: reruns replace the folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=build-devdeps
PACKAGES="nlohmann-json3-dev libfmt-dev libfmt9 libcli11-dev zlib1g-dev libgtest-dev
  libopenmpi-dev libopenmpi3 libhwloc15 libhwloc-dev libevent-core-2.1-7 libevent-pthreads-2.1-7
  libpmix2 libudev1"
rm -rf "$OUT" && mkdir -p "$OUT/debs"
(cd "$OUT/debs" && apt-get download $PACKAGES)
for deb in "$OUT"/debs/*.deb; do dpkg -x "$deb" "$OUT/root"; done
rm -rf "$OUT/debs"
L=$OUT/root/usr/lib/x86_64-linux-gnu
# What the build does not use (keeps the carried tree small), and the links
# that point outside it: zlib is linked statically (libz.a).
rm -rf "$OUT/root/usr/share/doc" "$OUT/root/usr/share/man" "$L/fortran" "$L"/libmpi_java* \
  "$L/openmpi/lib/openmpi3" "$L/libhwloc.a" "$L/libz.so" "$OUT/root/lib"
find "$OUT/root" -name pkgconfig -type d -prune -exec rm -rf {} +
du -sh "$OUT/root"
