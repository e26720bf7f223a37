#!/usr/bin/env bash
# Quick start, command 1: install, build (release) and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target optiflow
build/release/bin/optiflow topo show a100x4
echo
build/release/bin/optiflow bound --topo a100x4
