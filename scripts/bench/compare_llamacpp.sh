#!/usr/bin/env bash
# Runs llama.cpp's benchmarks (the anchor, ../shared/tools/llamacpp-anchor) and tandem bench on
# the same GGUF with the same thread count, one after the other, and prints both, with the machine
# (CPU features and the read bandwidth tandem bench measures). Every speed figure of
# docs/benchmarks.md is a ratio between the two columns of one such run.
#
#   scripts/bench/compare_llamacpp.sh MODEL.gguf [THREADS] [ROUNDS]
#
# Each round runs: llama-bench pp128/pp512/tg32 (a warm-up, then the mean of 2 runs), tandem
# bench pp128 and pp512 (+ 32 decode steps; --repeat 2: the same warm-up and mean of 2 runs),
# llama-batched-bench with 1 and 16 sequences, tandem bench --concurrency 1,16.
# ROUNDS (default 1) repeats the whole round, so that a run on a shared machine shows its spread.
# Memory: tandem bench prints its resident memory after the runs and its peak; where /usr/bin/time
# exists (Debian's `time` package) llama-bench's peak resident memory is printed after its table.
# LLAMACPP_BIN=DIR runs llama-bench and llama-batched-bench from DIR instead of the anchor's build
# (e.g. an AVX2-only build of the same llama.cpp source, beside TANDEM_CPU_KERNELS=avx2).
# KV_CACHE_TYPE=f32|f16 runs tandem bench with --kv-cache-type; unset, Tandem's default f16, the
# cache type llama-bench and llama-batched-bench use by default (their F16 KV cache).
# LONG=N adds, once per round, a long context: llama-bench pp N and tg32 at depth N beside tandem
# bench's prefill of N tokens and its 32 decode steps after them (N + 32 must fit the model's
# context).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=$1
threads=${2:-2}
rounds=${3:-1}
anchor=../shared/tools/llamacpp-anchor
llama() {
  if [ -n "${LLAMACPP_BIN:-}" ]; then
    "$LLAMACPP_BIN/$1" "${@:2}"
  else
    "$anchor" "$@"
  fi
}
# The folder of llama.cpp's binaries.
llama_dir() {
  if [ -n "${LLAMACPP_BIN:-}" ]; then echo "$LLAMACPP_BIN"; else "$anchor" path; fi
}
peak_file=$(mktemp)
trap 'rm -f "$peak_file"' EXIT
tandem=${TANDEM:-build/cli/tandem}
kv_flags=()
if [ -n "${KV_CACHE_TYPE:-}" ]; then kv_flags=(--kv-cache-type "$KV_CACHE_TYPE"); fi

echo "== machine"
"$tandem" version | grep -i cpu || true
nproc
for r in $(seq 1 "$rounds"); do
  echo "== round $r: llama.cpp llama-bench"
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "llama-bench peak resident memory: %M KiB" -o "$peak_file" \
      "$(llama_dir)/llama-bench" -m "$model" -p 128,512 -n 32 -t "$threads" -r 2 2>/dev/null
    cat "$peak_file"
  else
    llama llama-bench -m "$model" -p 128,512 -n 32 -t "$threads" -r 2 2>/dev/null
  fi
  echo "== round $r: tandem bench pp128 + tg32"
  "$tandem" bench --model "$model" --prompt-tokens 128 --gen-tokens 32 --threads "$threads" \
    --repeat 2 "${kv_flags[@]}"
  echo "== round $r: tandem bench pp512"
  "$tandem" bench --model "$model" --prompt-tokens 512 --gen-tokens 0 --threads "$threads" \
    --repeat 2 "${kv_flags[@]}" |
    grep -E "prefill"
  if [ -n "${LONG:-}" ]; then
    echo "== round $r: long context, llama.cpp pp$LONG and tg32 @ d$LONG"
    llama llama-bench -m "$model" -p "$LONG" -n 32 -d 0,"$LONG" -t "$threads" -r 1 2>/dev/null |
      grep -E "pp$LONG |tg32 @"
    echo "== round $r: long context, tandem bench pp$LONG + tg32"
    "$tandem" bench --model "$model" --prompt-tokens "$LONG" --gen-tokens 32 --threads "$threads" \
      "${kv_flags[@]}" |
      grep -E "prefill|decode:"
  fi
  echo "== round $r: llama.cpp llama-batched-bench (1 and 16 sequences)"
  llama llama-batched-bench -m "$model" -c 4096 -npp 32 -ntg 32 -npl 1,16 -t "$threads" \
    2>/dev/null | grep -E "^\|"
  echo "== round $r: tandem bench --concurrency 1,16"
  "$tandem" bench --model "$model" --concurrency 1,16 --prompt-tokens 32 --gen-tokens 32 \
    --threads "$threads" "${kv_flags[@]}"
done
