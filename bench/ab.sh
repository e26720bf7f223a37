#!/usr/bin/env bash
# Compares builds of optiflow_bench_sim on a shared, noisy machine: runs each binary in turn,
# ROUNDS times, so that a slow spell hits all of them alike, and prints each benchmark's fastest
# repetition (CPU time) per binary and round: other work on the machine only ever adds time.
# Works with binaries of any commit (it reads the repetitions, not sim_bench's "min" row).
#
#   bench/ab.sh FILTER BINARY...        e.g. bench/ab.sh 'BM_Candidate1G/multi_ring/alpha' \
#                                              /tmp/bench_before build/release/bin/optiflow_bench_sim
# Environment: ROUNDS (3), REPETITIONS (8), MIN_TIME (0.2 seconds per repetition).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 FILTER BINARY..." >&2
  exit 2
fi
filter=$1
shift
for round in $(seq "${ROUNDS:-3}"); do
  for binary in "$@"; do
    "$binary" --benchmark_filter="$filter" --benchmark_repetitions="${REPETITIONS:-8}" \
      --benchmark_min_time="${MIN_TIME:-0.2}" 2>/dev/null |
      awk -v round="$round" -v binary="$binary" '
        $1 ~ /^BM_/ && $1 !~ /_(mean|median|stddev|cv|min)$/ && $4 ~ /^[0-9.]+$/ {
          if (!($1 in best) || $4 + 0 < best[$1]) { best[$1] = $4 + 0; unit[$1] = $5 }
          if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
        }
        END { for (i = 1; i <= n; ++i)
                printf "round %s  %-40s %-50s %10.3f %s\n", round, binary, order[i], best[order[i]], unit[order[i]] }'
  done
done
