#!/usr/bin/env bash
# Packs a built `optiflow` with the shared libraries that a GPU machine without our build
# dependencies lacks (Boost, SQLite, COIN-OR, librsvg, ...), for running there: everything but
# glibc, CUDA, NCCL and MPI, which the GPU machine brings (its mpirun must match its libmpi).
# Usage: scripts/gpu-bundle.sh [BUILD_DIR] [OUT.tar.xz]   (default build/release, build/gpu-bundle.tar.xz)
# On the GPU machine: tar xf OUT.tar.xz; LD_LIBRARY_PATH=$PWD/gpu-bundle/lib gpu-bundle/bin/optiflow ...
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
out=${2:-build/gpu-bundle.tar.xz}
ldd "$build/bin/optiflow" | grep -q libnccl ||
  { echo "gpu-bundle: $build/bin/optiflow has no NCCL backend (CUDA or NCCL not found)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu-bundle/bin" "$stage/gpu-bundle/lib"
cp "$build/bin/optiflow" "$stage/gpu-bundle/bin/"
provided='/(libc|libm|libpthread|libdl|librt|libutil|ld-linux[^/]*)\.so|libcuda|libcudart|libnccl|libmpi|libopen-(rte|pal)|libpmix|libhwloc|libevent|libucx|libucp|libucs|libfabric|libibverbs|librdmacm'
ldd "$build/bin/optiflow" | awk '$3 ~ /^\// {print $3}' | grep -vE "$provided" |
  while read -r lib; do cp -L "$lib" "$stage/gpu-bundle/lib/"; done
tar -C "$stage" -cJf "$out" gpu-bundle
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1), $(ls "$stage/gpu-bundle/lib" | wc -l) libraries)"
