#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with Clang, AddressSanitizer and UBSan in
# build/fuzz (every library instrumented), then runs each for SECONDS (default 30) on a copy of
# its seed corpus kept in build/fuzz/corpus, so that what one run finds seeds the next; the
# source tree is never written. Real files from ../shared/external (MSCCL XML, NCCL topology
# XML, TACCL topologies and sketches, TE-CCL inputs with their schedules) join the seeds when
# that folder is there. Runs JOBS fuzzers at once (default 1). Exits non-zero if a fuzzer
# crashes, leaving the crashing input in build/fuzz/artifacts/<fuzzer>/.
# SEED fixes libFuzzer's random seed: a run with a fresh corpus then follows the same sequence of
# inputs on any machine, stopping earlier on a slower one, so CI's short run is a prefix of a
# longer run here (FRESH=1 starts from the seeds alone, as a clean clone does).
# Usage: scripts/fuzz.sh [SECONDS [FUZZER...]]   (env JOBS=2 to run two at a time, SEED=N, FRESH=1)
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS [FUZZER...]]" >&2
  exit 2
fi
shift || true
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
fuzz_dir="$root/tests/fuzz"
external="$root/../shared/external"
instrument="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# fuzzer : its seed corpus (tests/fuzz/corpus/) : its dictionary (tests/fuzz/*.dict)
all=(dsl:dsl:dsl msccl_xml:msccl:msccl model_reply:model_reply:model_reply
     topology_json:topology_json:json nccl_topo_xml:nccl_topo_xml:nccl_topo
     taccl_topology:taccl_topology:json taccl_sketch:taccl_sketch:json teccl:teccl:json
     schedule_json:schedule_json:json mscclpp_plan:mscclpp_plan:json)
chosen=()
for entry in "${all[@]}"; do
  name="${entry%%:*}"
  if [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; then chosen+=("$entry"); fi
done

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOPTIFLOW_FUZZ=ON -DOPTIFLOW_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="$instrument" >/dev/null
targets=()
for entry in "${chosen[@]}"; do targets+=("optiflow_${entry%%:*}_fuzzer"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

# Seeds from the public files beside the project, where they are.
external_seeds() {
  local fuzzer="$1" corpus="$2"
  [ -d "$external" ] || return 0
  case "$fuzzer" in
    msccl_xml)
      for f in "$external"/msccl-executor-nccl/ndv*-a*.xml "$external"/te-ccl/MSCCL_examples/*.xml; do
        [ -f "$f" ] && cp "$f" "$corpus/ext-$(basename "$f")"
      done ;;
    nccl_topo_xml)
      for f in "$external"/azhpc-images/*.xml "$external"/msccl-executor-nccl/*-topo.xml; do
        [ -f "$f" ] && cp "$f" "$corpus/ext-$(basename "$(dirname "$f")")-$(basename "$f")"
      done ;;
    taccl_topology)  # first byte: the node count (0: one node, 1: two)
      for f in "$external"/taccl/topo/*.json; do
        [ -f "$f" ] && { printf '\001'; cat "$f"; } > "$corpus/ext-$(basename "$f")"
      done ;;
    taccl_sketch)
      for f in "$external"/taccl/sketch/*.json; do
        [ -f "$f" ] && cp "$f" "$corpus/ext-$(basename "$f")"
      done ;;
    teccl)  # the solver input, a NUL, its schedule
      local pair
      for pair in mesh.json:mesh_4.json ndv2_input.json:ndv2_schedule.json; do
        local input="$external/te-ccl/sample_inputs/${pair%%:*}"
        local schedule="$external/te-ccl/schedules/${pair#*:}"
        [ -f "$input" ] && [ -f "$schedule" ] &&
          { cat "$input"; printf '\000'; cat "$schedule"; } > "$corpus/ext-${pair%%:*}"
      done ;;
  esac
}

run_one() {
  local fuzzer="$1" seeds="$2" dict="$3"
  local corpus="$build/corpus/$fuzzer" artifacts="$build/artifacts/$fuzzer"
  [ "${FRESH:-0}" = 1 ] && rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts"
  cp -R "$fuzz_dir/corpus/$seeds/." "$corpus/"
  external_seeds "$fuzzer" "$corpus"
  echo "fuzz.sh: running $fuzzer for ${seconds}s on $corpus"
  if ! ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      "$build/bin/optiflow_${fuzzer}_fuzzer" -max_total_time="$seconds" -timeout=30 ${SEED:+-seed="$SEED"} \
      -rss_limit_mb=4096 -print_final_stats=1 -dict="$fuzz_dir/$dict.dict" \
      -artifact_prefix="$artifacts/" "$corpus" > "$build/$fuzzer.log" 2>&1; then
    tail -40 "$build/$fuzzer.log" >&2
    echo "fuzz.sh: $fuzzer crashed; its input is in $artifacts/" >&2
    return 1
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)|cov: " \
    "$build/$fuzzer.log" | tail -5 | sed "s/^/fuzz.sh: $fuzzer: /"
}

status=0
jobs="${JOBS:-1}"
pids=()
for entry in "${chosen[@]}"; do
  IFS=: read -r fuzzer seeds dict <<< "$entry"
  run_one "$fuzzer" "$seeds" "$dict" &
  pids+=("$!")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit "$status"
