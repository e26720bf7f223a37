#!/usr/bin/env bash
# The NCCL backend's smoke test, as one prepared step on any machine with a GPU: build with
# CUDA and NCCL, run the runner's tests, then a real `optiflow run --backend nccl` on one GPU
# (and on every GPU of the machine when it has several, with `optiflow calibrate --backend
# nccl` over them). Exits 0 on success, 77 when no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/gpu}
jobs=${JOBS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DOPTIFLOW_WITH_NCCL=ON \
  -DOPTIFLOW_BUILD_BENCH=OFF >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep -q "NCCL backend enabled" "$build.configure.log" || {
  echo "gpu-smoke: CUDA or NCCL not found; see $build.configure.log" >&2; exit 1; }
cmake --build "$build" -j"$jobs" --target optiflow optiflow_hw_runner_tests optiflow_hw_runner_mpi_tests
(cd "$build" && ctest -R 'hw_runner|Nccl' --output-on-failure)

gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
if [ "${gpus:-0}" -lt 1 ]; then echo "gpu-smoke: no GPU here; built and tested only" >&2; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin="$build/bin/optiflow"

# One GPU: a one-rank All-Gather and All-Reduce (local copies, the native collective beside).
cat >"$work/one.json" <<'JSON'
{ "name": "one", "nodes": [ {"id": "g0", "kind": "gpu", "rank": 0, "host": 0, "local": 0} ],
  "links": [] }
JSON
cat >"$work/one-allgather.json" <<'JSON'
{"format": "optiflow-schedule", "version": 1, "name": "one-allgather",
 "collective": "allgather", "ranks": 1, "chunks": 2, "protocol": "Simple", "inplace": false,
 "topology": "",
 "programs": [ {"rank": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 0, "tbs": [
   {"send": -1, "recv": -1, "channel": 0, "steps": [
     {"type": "cpy", "src": "i", "src_off": 0, "dst": "o", "dst_off": 0, "count": 2}
   ]} ]} ]}
JSON
"$bin" run "$work/one-allgather.json" --topo "$work/one.json" --backend nccl --np 1 \
  --sizes 64K,16M --iters 20 --db "$work/smoke.db"

# Every GPU of this machine: a compiled ring All-Gather beside ncclAllGather.
if [ "$gpus" -ge 2 ]; then
  "$bin" run datasets/programs/ring.ofl --topo "ring$gpus" --backend nccl --np "$gpus" \
    --sizes 1M:256M --iters 20 --db "$work/smoke.db"
  "$bin" run datasets/programs/ring.ofl --topo "ring$gpus" --collective allreduce \
    --backend nccl --np "$gpus" --sizes 1M:64M --iters 20 --db "$work/smoke.db"
  # The NCCL links between every pair of GPUs, and the simulator's error on NCCL runs.
  "$bin" calibrate --backend nccl --np "$gpus" -o "$work/cal.json" --db "$work/smoke.db"
  cat "$work/cal.json"
fi
echo "gpu-smoke: passed on $gpus GPU(s)"
