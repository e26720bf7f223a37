#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with Clang, AddressSanitizer and UBSan in
# build/fuzz (every library instrumented), then runs each for SECONDS (default 30) on a copy of
# its seed corpus kept in build/fuzz/corpus, so that what one run finds seeds the next; the
# source tree is never written. Exits non-zero if a fuzzer crashes, leaving the crashing input
# in build/fuzz/artifacts/<fuzzer>/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
fuzz_dir="$root/tests/fuzz"
instrument="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi

CC=clang CXX=clang++ cmake -S "$root" -B "$build" \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOPTIFLOW_FUZZ=ON -DOPTIFLOW_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="$instrument" >/dev/null
cmake --build "$build" -j "$(nproc)" --target optiflow_dsl_fuzzer optiflow_msccl_xml_fuzzer \
  optiflow_model_reply_fuzzer

status=0
# fuzzer name : corpus and dictionary name
for entry in dsl:dsl msccl_xml:msccl model_reply:model_reply; do
  fuzzer="${entry%%:*}"
  seeds="${entry#*:}"
  corpus="$build/corpus/$seeds"
  artifacts="$build/artifacts/$fuzzer"
  mkdir -p "$corpus" "$artifacts"
  cp -R "$fuzz_dir/corpus/$seeds/." "$corpus/"
  echo "fuzz.sh: running $fuzzer for ${seconds}s on $corpus"
  if ! ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      "$build/bin/optiflow_${fuzzer}_fuzzer" -max_total_time="$seconds" -timeout=30 \
      -rss_limit_mb=4096 -print_final_stats=1 -dict="$fuzz_dir/$seeds.dict" \
      -artifact_prefix="$artifacts/" "$corpus"; then
    echo "fuzz.sh: $fuzzer crashed; its input is in $artifacts/" >&2
    status=1
  fi
done
exit "$status"
