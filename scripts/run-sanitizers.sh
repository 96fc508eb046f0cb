#!/usr/bin/env bash
# The sanitizer suites, one command: ASan + UBSan over every unit test (ctest without the
# integration label), and TSan over the engine's threaded parts (the scheduler loop, the request
# queue and allocator, the MoE layer executor with several workers, the thread pool). Each suite has
# its own build directory (build-asan, build-tsan), CUDA off. Exit status 1 when a suite fails.
# Run before a release; docs/building.md says how long it takes.
#
# Usage: scripts/run-sanitizers.sh [asan|tsan|all]   (default all)
# Environment: JOBS (build and ctest -j, default nproc).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
which="${1:-all}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
case "$which" in asan|tsan|all) ;; *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;; esac

# TSan's targets: the tests of the engine's own threads; "target|filter" passes a Catch2 filter.
# base_test leaves out the TANDEM_CHECK death tests: under TSan an abort() in their forked child
# exits with TSan's status 66 instead of dying by SIGABRT. The gRPC service tests are not here:
# Debian's gRPC is not built with TSan, so its inline callback code and its own threads report
# races that are gRPC's synchronization made invisible (they run under ASan + UBSan instead).
tsan_tests=(scheduler_loop_test scheduler_test experts_test "base_test|~TANDEM_CHECK*")

failed=()
run_suite() {  # name sanitizer build-dir [targets...]
  local name="$1" sanitizer="$2" dir="$3"
  shift 3
  local started=$SECONDS
  echo "== $name: -DTANDEM_SANITIZE=$sanitizer in $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE="$sanitizer" \
    -DTANDEM_CUDA=OFF -DTANDEM_CUDA_EMULATION=OFF >/dev/null
  local ok=1
  if [ "$#" -gt 0 ]; then
    local entry target filter exe targets=()
    for entry in "$@"; do targets+=("${entry%%|*}"); done
    cmake --build "$dir" -j "$jobs" --target "${targets[@]}" || ok=0
    for entry in "$@"; do
      [ "$ok" = 1 ] || break
      target="${entry%%|*}"
      filter=""
      [ "$entry" != "$target" ] && filter="${entry#*|}"
      exe="$(find "$dir/tests" -type f -name "$target" -perm -u+x | head -n 1)"
      echo "-- $target $filter"
      if [ -n "$filter" ]; then "$exe" "$filter" || ok=0; else "$exe" || ok=0; fi
    done
  else
    cmake --build "$dir" -j "$jobs" || ok=0
    [ "$ok" = 1 ] && { ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE integration || ok=0; }
  fi
  echo "== $name: $([ "$ok" = 1 ] && echo passed || echo FAILED) in $((SECONDS - started)) s"
  [ "$ok" = 1 ] || failed+=("$name")
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
if [ "$which" = asan ] || [ "$which" = all ]; then
  run_suite "ASan+UBSan" "address,undefined" build-asan
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  run_suite "TSan" thread build-tsan "${tsan_tests[@]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "sanitizer suites failed: ${failed[*]}" >&2
  exit 1
fi
echo "sanitizer suites passed"
