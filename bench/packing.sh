#!/usr/bin/env bash
# The whole cluster's tree packing as a schedule (`pipeline P; pack over all`) on the suite's
# topologies: x bound at 64 MiB and 1 GiB per pipeline depth, in both cost models
# (docs/compiler.md, "Tree packing"). Usage: bench/packing.sh [OPTIFLOW] [TOPOLOGY...]
set -euo pipefail
optiflow=${1:-build/release/bin/optiflow}
shift || true
topologies=("$@")
[ ${#topologies[@]} -gt 0 ] || topologies=(a100x4 a100x4-degraded a100x2 dgx1 ndv2x2 h100x4 fattree16 torus4x4)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%-16s %8s %-10s %10s %10s\n' topology pipeline model "64M" "1G"
for topo in "${topologies[@]}"; do
  for pipeline in 16 64 256; do
    printf 'pipeline %d\npack over all\n' "$pipeline" > "$dir/pack.ofl"
    # Refused where the packing's pieces times the pipeline exceed the chunk limit; any other
    # failure stops the bench.
    if ! "$optiflow" compile "$dir/pack.ofl" --topo "$topo" -o "$dir/pack.json" > /dev/null 2> "$dir/err"; then
      grep -q 'chunks per buffer' "$dir/err" || { cat "$dir/err" >&2; exit 1; }
      printf '%-16s %8s %-10s %10s %10s\n' "$topo" "$pipeline" - refused refused
      continue
    fi
    for model in alpha-beta flow; do
      "$optiflow" sim "$dir/pack.json" --topo "$topo" --sizes 64M,1G --model "$model" |
        awk -v t="$topo" -v p="$pipeline" -v m="$model" \
          '$1 == "64M" { a = $6 } $1 == "1G" { b = $6 } END { printf "%-16s %8s %-10s %9.3fx %9.3fx\n", t, p, m, a, b }'
    done
  done
done
