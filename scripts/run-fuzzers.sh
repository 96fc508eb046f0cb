#!/usr/bin/env bash
# Builds every libFuzzer target registered in fuzz/CMakeLists.txt (tandem_add_fuzzer) with clang-14
# under ASan + UBSan, runs each for SECONDS (default 60) on its seed corpus fuzz/corpus/<name
# without _fuzz>/, and prints executions and findings. Exit status 1 when anything was found.
#
# Usage: scripts/run-fuzzers.sh [SECONDS] [FUZZER...]
# Environment: TANDEM_FUZZ_BUILD_DIR (default build-fuzz), TANDEM_FUZZ_JOBS (build -j, default 2).
# Inputs are capped at -rss_limit_mb=2048 -malloc_limit_mb=512: a single allocation over 512 MB
# is a finding. Crashes, leaks, OOMs and timeouts land in <build>/fuzz-artifacts/<name>/; the
# growing corpus in <build>/fuzz-corpus/<name>/ (the committed seeds are never modified).
set -euo pipefail

seconds="${1:-60}"
shift || true
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TANDEM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${TANDEM_FUZZ_JOBS:-2}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: $0 [SECONDS] [FUZZER...]  (SECONDS a positive integer)" >&2
  exit 2
fi

# Every target registered with tandem_add_fuzzer(<name> <source>).
mapfile -t all_fuzzers < <(sed -n 's/^[[:space:]]*tandem_add_fuzzer(\([A-Za-z0-9_]*\).*/\1/p' \
  "$root/fuzz/CMakeLists.txt")
if [ "$#" -gt 0 ]; then fuzzers=("$@"); else fuzzers=("${all_fuzzers[@]}"); fi
if [ "${#fuzzers[@]}" -eq 0 ]; then
  echo "no fuzzers registered in fuzz/CMakeLists.txt" >&2
  exit 2
fi

# ASan through the project option (TANDEM_SANITIZE takes one sanitizer); UBSan and libFuzzer's
# coverage instrumentation for all project code through the flags (the fuzzer executables add
# -fsanitize=fuzzer themselves).
extra="-fsanitize=fuzzer-no-link,undefined -fno-sanitize-recover=undefined"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTANDEM_FUZZ=ON -DTANDEM_SANITIZE=address -DTANDEM_BUILD_TESTS=OFF -DTANDEM_CUDA=OFF \
  -DCMAKE_C_FLAGS="$extra" -DCMAKE_CXX_FLAGS="$extra" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=undefined" >/dev/null
cmake --build "$build" -j "$jobs" --target "${fuzzers[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

total_findings=0
summary=()
for name in "${fuzzers[@]}"; do
  exe="$build/fuzz/$name"
  seeds="$root/fuzz/corpus/${name%_fuzz}"
  work="$build/fuzz-corpus/$name"
  artifacts="$build/fuzz-artifacts/$name"
  log="$build/fuzz-logs/$name.log"
  rm -rf "$artifacts"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  seed_args=()
  if [ -d "$seeds" ]; then seed_args=("$seeds"); else echo "warning: no seed corpus $seeds" >&2; fi
  echo "== $name: ${seconds}s, seeds ${seeds#"$root"/}"
  set +e
  "$exe" "$work" "${seed_args[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  findings=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \
    -o -name 'timeout-*' \) | wc -l)
  if [ "$rc" -ne 0 ] && [ "$findings" -eq 0 ]; then findings=1; fi  # died without an artifact
  total_findings=$((total_findings + findings))
  line="$name: ${execs:-?} executions (${rate:-?}/s), coverage ${cov:-?}, exit $rc, findings $findings"
  summary+=("$line")
  echo "$line"
  if [ "$findings" -ne 0 ]; then
    grep -E 'ERROR|runtime error|SUMMARY|==[0-9]+==' "$log" | head -20 || true
    echo "   log: $log   artifacts: $artifacts"
  fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
[ "$total_findings" -eq 0 ]
