#!/usr/bin/env bash
# gpu-check.sh OUTDIR: on a machine with an NVIDIA GPU, build with CUDA, run the [cuda] tests and a
# short hybrid decode benchmark (0/25/50/100 % of experts on the GPU, dense parts on the CPU and
# on the GPU), writing log + figures to OUTDIR. Meant to finish in under 8 minutes on a 16-core
# H200 machine.
#
# On a bare GPU machine that reaches no package registry and does not see ../shared, first run
# scripts/gpu-carry.sh on the development machine and carry its .gpu-carry folder: this script then
# unpacks its Debian packages into a prefix of its own (spdlog, fmt, nlohmann-json, yaml-cpp,
# Catch2), points the tests at its copy of the reference data, and installs its gguf wheel for the
# bench model's generator. tandemd is never built here (TANDEM_SERVER=OFF: no gRPC needed).
#
# Environment (all optional):
#   BUILD_DIR     build folder (default: <repo>/build-gpu-check; reused when it exists)
#   CUDA_ARCH     CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#   BUILD_TYPE    CMAKE_BUILD_TYPE (default Release)
#   MODEL         a GGUF to benchmark instead of generating one
#   MODEL_DIR     where the generated model goes (default <repo>/bench-models; never OUTDIR)
#   PYTHON        interpreter with the packages of scripts/bench/requirements.txt (default python3)
#   GEN_LAYERS GEN_EXPERTS GEN_HIDDEN GEN_FFN   size of the generated random-weight Q8_0 model
#                 (default 12 x 32 experts, hidden 2048, expert FFN 768: ~1.9 GB of experts)
#   PROMPT_TOKENS GEN_TOKENS   bench sizes (default 32 and 64)
#   THREADS       CPU threads for the bench (default: all cores)
#   TESTS_ONLY    1: run the [cuda] tests of an earlier build in BUILD_DIR again and stop (a second
#                 call on a still-warm machine, with other reference data carried)
#
# Outputs (four files: the device tool brings back at most eight): OUTDIR/gpu-check.log (everything,
# each bench run's output too), OUTDIR/cuda-tests.txt, OUTDIR/figures.tsv (dense device, pct,
# gpu_experts, prefill tok/s, decode tok/s), OUTDIR/nvidia-smi.txt.
# Exit status: 0 when the build, the tests and every bench run succeeded.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build-gpu-check}
CUDA_ARCH=${CUDA_ARCH:-90}
MODEL_DIR=${MODEL_DIR:-$REPO/bench-models}
PYTHON=${PYTHON:-python3}
GEN_LAYERS=${GEN_LAYERS:-12}
GEN_EXPERTS=${GEN_EXPERTS:-32}
GEN_HIDDEN=${GEN_HIDDEN:-2048}
GEN_FFN=${GEN_FFN:-768}
PROMPT_TOKENS=${PROMPT_TOKENS:-32}
GEN_TOKENS=${GEN_TOKENS:-64}
THREADS=${THREADS:-0}
STATUS=0

exec > >(tee -a "$OUT/gpu-check.log") 2>&1
SECONDS=0
step() { echo "=== [${SECONDS}s] $*"; }

step "gpu-check in $REPO, results in $OUT"
git -C "$REPO" log -1 --oneline 2>/dev/null || true
if ! nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; then
  echo "nvidia-smi failed: no NVIDIA driver/GPU here (see nvidia-smi.txt)"
  STATUS=1
fi
cat "$OUT/nvidia-smi.txt"
nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version || true

# What scripts/gpu-carry.sh carried (nothing on a machine that has the libraries and ../shared).
CARRY=$REPO/.gpu-carry
CMAKE_EXTRA=()
if compgen -G "$CARRY/debs/*.deb" >/dev/null; then
  DEPS=/tmp/tandem-deps
  step "unpack the carried packages into $DEPS"
  for f in "$CARRY"/debs/*.deb; do dpkg -x "$f" "$DEPS" || STATUS=1; done
  CMAKE_EXTRA+=("-DCMAKE_PREFIX_PATH=$DEPS/usr")
fi
if [ -d /tmp/tandem-deps/usr/lib/x86_64-linux-gnu ]; then
  # Unpacked here or by an earlier call on this machine: their libraries' own dependencies.
  export LD_LIBRARY_PATH="/tmp/tandem-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -d "$CARRY/shared/data" ]; then
  CMAKE_EXTRA+=("-DTANDEM_SHARED_DIR=$CARRY/shared")
  echo "reference data: the carried $(cd "$CARRY/shared/data" && find . -name '*.gguf' | wc -l) models"
fi
if compgen -G "$CARRY/wheels/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/tandem-py \
    "$CARRY"/wheels/*.whl && export PYTHONPATH="/tmp/tandem-py${PYTHONPATH:+:$PYTHONPATH}"
fi
# Every [cuda] case is in the engine's tests, and the bench is the tandem tool's: tandemd (gRPC,
# protobuf, prometheus-cpp, none of them on a bare GPU machine) is not built (TANDEM_SERVER=OFF).
CUDA_TESTS="tests/experts/cuda_experts_test tests/kernels/cuda_dense_ops_test
  tests/runtime/cuda_dense_executor_test tests/facade/engine_facade_test"
TARGETS="tandem"
for t in $CUDA_TESTS; do TARGETS="$TARGETS $(basename "$t")"; done

if [ "${TESTS_ONLY:-0}" != 1 ]; then
  # Warnings stay warnings: this machine's compilers are not the ones CI polices them with.
  # CMAKE_POLICY_VERSION_MINIMUM lets CMake 4 read the carried packages' older config files.
  GENERATOR=()
  command -v ninja >/dev/null && GENERATOR=(-G Ninja)
  step "configure (TANDEM_CUDA=ON, TANDEM_SERVER=OFF, CMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH)"
  if ! cmake -S "$REPO" -B "$BUILD_DIR" "${GENERATOR[@]}" -DTANDEM_CUDA=ON -DTANDEM_WERROR=OFF \
      -DTANDEM_SERVER=OFF -DTANDEM_CUDA_EMULATION=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
      -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
      "${CMAKE_EXTRA[@]}"; then
    echo "FAILED: configure"
    exit 1
  fi
  step "build $TARGETS (-j$(nproc))"
  # shellcheck disable=SC2086
  if ! cmake --build "$BUILD_DIR" -j"$(nproc)" --target $TARGETS; then
    echo "FAILED: build"
    exit 1
  fi
fi

step "[cuda] tests"
: >"$OUT/cuda-tests.txt"
for t in $CUDA_TESTS; do
  echo "--- $t" | tee -a "$OUT/cuda-tests.txt"
  "$BUILD_DIR/$t" "[cuda]" --durations yes 2>&1 | tee -a "$OUT/cuda-tests.txt"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    echo "FAILED: [cuda] tests of $t"
    STATUS=1
  fi
done
if grep -q "no CUDA device" "$OUT/cuda-tests.txt"; then
  echo "WARNING: [cuda] cases found no device and did not run"
  STATUS=1
fi
if grep -q "not carried to this machine" "$OUT/cuda-tests.txt"; then
  echo "NOTE: comparisons whose reference model was not carried were skipped:"
  grep -o "[^ ]*\.gguf is not here" "$OUT/cuda-tests.txt" | sort -u
fi
if [ "${TESTS_ONLY:-0}" = 1 ]; then
  step "done (tests only), status $STATUS"
  exit "$STATUS"
fi

# The model: $MODEL, else a generated random-weight one, else the tiny demo model.
TOTAL=""
if [ -z "${MODEL:-}" ]; then
  MODEL="$MODEL_DIR/gpu-check-${GEN_LAYERS}x${GEN_EXPERTS}-h${GEN_HIDDEN}-f${GEN_FFN}-q8_0.gguf"
  if [ ! -f "$MODEL" ]; then
    if "$PYTHON" -c "import gguf, numpy" 2>/dev/null; then
      step "generate $MODEL"
      "$PYTHON" "$REPO/scripts/bench/make_large_moe_gguf.py" "$MODEL" --layers "$GEN_LAYERS" \
        --experts "$GEN_EXPERTS" --hidden "$GEN_HIDDEN" --expert-ffn "$GEN_FFN" --force ||
        MODEL=""
    else
      echo "no gguf/numpy for $PYTHON (pip install -r scripts/bench/requirements.txt):" \
        "falling back to the tiny demo model, whose figures say little about speed"
      MODEL=""
    fi
  fi
  if [ -n "$MODEL" ]; then
    TOTAL=$((GEN_LAYERS * GEN_EXPERTS))
  else
    MODEL="$REPO/models/demo/demo-moe-q8_0.gguf"
    TOTAL=64  # 4 MoE layers x 16 experts
  fi
fi
if [ -z "$TOTAL" ]; then
  # A given model: experts per layer x MoE layers, from `tandem inspect` ("experts: N, top-k"
  # and "per expert: ... per layer [b, b, ...]", one entry per MoE layer).
  INSPECT=$("$BUILD_DIR/cli/tandem" inspect "$MODEL" 2>/dev/null)
  n_exp=$(echo "$INSPECT" | sed -n 's/^experts: *\([0-9][0-9]*\),.*/\1/p' | head -1)
  n_moe=$(echo "$INSPECT" | sed -n 's/^per expert:.*per layer \[\(.*\)\]/\1/p' | head -1 |
    tr ',' '\n' | grep -c .)
  TOTAL=$(( ${n_exp:-0} * ${n_moe:-0} ))
fi
step "benchmark $MODEL ($TOTAL routed experts in all)"

BENCH_OUT=$(mktemp -d)  # each run's output, parsed below (the log holds it too)
printf "dense\tpct\tgpu_experts\tprefill_tok_s\tdecode_tok_s\n" >"$OUT/figures.tsv"
for dense in cpu gpu; do
  DENSE_FLAG=""
  [ "$dense" = gpu ] && DENSE_FLAG="--dense-gpu"
  for pct in 0 25 50 100; do
    k=$((TOTAL * pct / 100))
    [ "$pct" -eq 100 ] && [ "$k" -eq 0 ] && k=1000000000  # the planner clamps to all experts
    step "bench: dense on $dense, $pct % = --gpu-experts $k"
    # shellcheck disable=SC2086
    "$BUILD_DIR/cli/tandem" bench --model "$MODEL" --prompt-tokens "$PROMPT_TOKENS" \
      --gen-tokens "$GEN_TOKENS" --threads "$THREADS" --gpu-experts "$k" $DENSE_FLAG 2>&1 |
      tee "$BENCH_OUT/bench-$dense-$pct.txt"
    if [ "${PIPESTATUS[0]}" -ne 0 ]; then
      echo "FAILED: bench with dense on $dense at $pct %"
      STATUS=1
      continue
    fi
    prefill=$(sed -n 's/^prefill:.*= \([0-9.]*\) tokens\/s/\1/p' "$BENCH_OUT/bench-$dense-$pct.txt")
    decode=$(sed -n 's/^decode:.*= \([0-9.]*\) tokens\/s/\1/p' "$BENCH_OUT/bench-$dense-$pct.txt")
    printf "%s\t%s\t%s\t%s\t%s\n" "$dense" "$pct" "$k" "${prefill:-?}" "${decode:-?}" \
      >>"$OUT/figures.tsv"
  done
done

step "figures"
cat "$OUT/figures.tsv"
step "done, status $STATUS"
exit "$STATUS"
