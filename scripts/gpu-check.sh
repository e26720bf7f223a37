#!/usr/bin/env bash
# The NCCL backend on a GPU machine that lacks our build dependencies, from the bundle that
# scripts/gpu-bundle.sh made here: `optiflow run --backend nccl` beside the native collective
# on one GPU for All-Gather, Reduce-Scatter and All-Reduce (data checked), then two ranks on
# that one GPU, which NCCL refuses: the message must say which ranks share it.
# Usage (on the GPU machine, in the repository): scripts/gpu-check.sh [BUNDLE.tar.xz]
set -u
cd "$(dirname "$0")/.."
bundle=${1:-build/gpu-bundle.tar.xz}
work=$(mktemp -d)
tar -C "$work" -xJf "$bundle" || exit 1
export LD_LIBRARY_PATH="$work/gpu-bundle/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bin="$work/gpu-bundle/bin/optiflow"
status=0

echo "== machine"
nvidia-smi -L
command -v mpirun && mpirun --version | head -1
if ldd "$bin" | grep 'not found'; then echo "gpu-check: libraries missing"; exit 1; fi

cat >"$work/one.json" <<'JSON'
{ "name": "one", "nodes": [ {"id": "g0", "kind": "gpu", "rank": 0, "host": 0, "local": 0} ],
  "links": [] }
JSON
for collective in allgather reducescatter allreduce; do
  echo "== one GPU, $collective"
  timeout 180 "$bin" run datasets/programs/ring.ofl --topo "$work/one.json" --backend nccl \
    --np 1 --collective "$collective" --sizes 64K,16M,1G --iters 20 --db "$work/gpu.db" ||
    { echo "gpu-check: $collective failed ($?)"; status=1; }
done

echo "== two ranks on one GPU (NCCL refuses; the message must name the ranks)"
out=$(timeout 120 "$bin" run datasets/programs/ring.ofl --topo ring2 --backend nccl --np 2 \
  --sizes 64K --iters 5 --db "$work/gpu.db" 2>&1)
echo "exit $?"
echo "$out" | tail -8
echo "$out" | grep -qi "share" || { echo "gpu-check: no word of the shared GPU"; status=1; }
echo "gpu-check: status $status"
exit $status
