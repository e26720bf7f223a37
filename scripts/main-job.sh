#!/usr/bin/env bash
# Quick start, command 1: install, build (release) and run the main job: an exploration of
# All-Gather schedules for the a100x4 cluster with the offline proposer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target optiflow
build/release/bin/optiflow explore --topo a100x4 --proposer offline --budget 500 --db optiflow.db --out optiflow-out
