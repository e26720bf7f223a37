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
  # A fixed seed: CI replays a prefix of what `SEED=1 FRESH=1 scripts/fuzz.sh 600` ran here,
  # so it fails on a change, never on the luck of the draw; longer runs find the new bugs.
  JOBS="${JOBS:-2}" SEED="${SEED:-1}" FRESH=1 scripts/fuzz.sh "$seconds"
fi
