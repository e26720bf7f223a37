#!/usr/bin/env bash
# Quick start, command 2: install, build and run every test, in release and under ASan+UBSan.
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
