#!/usr/bin/env bash
# Quick start, command 2: install, build and run every test, in release and under ASan+UBSan,
# then run every parser's fuzzer briefly, two at a time (set OPTIFLOW_FUZZ_SECONDS=0 to skip).
# Usage: scripts/test.sh [preset...]   (default: release asan)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(release asan)
for preset in "${presets[@]}"; do
  echo "== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "== $preset: test"
  ctest --preset "$preset"
done
seconds="${OPTIFLOW_FUZZ_SECONDS:-20}"
if [ "$seconds" -gt 0 ]; then
  echo "== fuzz: ${seconds}s per fuzzer"
  JOBS="${JOBS:-2}" scripts/fuzz.sh "$seconds"
fi
