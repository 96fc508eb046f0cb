#!/usr/bin/env bash
# gpu-carry.sh: run HERE (the Debian 12 development machine) before a GPU check. Fills the ignored
# folder .gpu-carry/ with what scripts/gpu-check.sh needs on a bare GPU machine that can reach no
# package registry and does not see ../shared:
#   .gpu-carry/debs/    the Debian packages of the build's header and small libraries (spdlog,
#                       fmt, nlohmann-json, yaml-cpp, Catch2; gpu-check.sh unpacks them into a
#                       prefix of its own; without gRPC there it builds with TANDEM_SERVER=OFF)
#   .gpu-carry/wheels/  the gguf wheel of scripts/bench/requirements.txt (the bench model's
#                       generator; numpy is on the GPU machine)
#   .gpu-carry/shared/  as much of ../shared/data as fits, the files the [cuda] tests read, most
#                       important first (a comparison whose model was left out says so and skips)
# The device tool sends the working tree and the carried paths up to 64 MiB in all, and this
# checkout's tracked files take most of that: the script fills what is left minus a margin and
# prints what it left out. Then: run(command="scripts/gpu-check.sh $OUT", carry=[".gpu-carry"]).
# A second call on the still-warm machine can carry the rest of the data:
#   SKIP_PACKAGES=1 SKIP_GROUPS=N scripts/gpu-carry.sh   (N: the groups carried before)
# then TESTS_ONLY=1 scripts/gpu-check.sh $OUT there.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$REPO/../shared}
LIMIT=$((64 * 1024 * 1024))
MARGIN=${MARGIN:-$((512 * 1024))}
CARRY=$REPO/.gpu-carry
cd "$REPO"

grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >>.git/info/exclude
rm -rf "$CARRY"
mkdir -p "$CARRY/debs" "$CARRY/wheels" "$CARRY/shared/data"

if [ "${SKIP_PACKAGES:-0}" != 1 ]; then
  (cd "$CARRY/debs" && apt-get download libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
    nlohmann-json3-dev libyaml-cpp-dev libyaml-cpp0.7 catch2 2>&1 | grep -v "^W: Download is")
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$CARRY/wheels" \
    "$(grep '^gguf==' scripts/bench/requirements.txt)"
fi

# What travels besides .gpu-carry: the tracked files and the untracked ones git does not ignore.
tree_bytes=$( (git ls-files -z; git ls-files -z --others --exclude-standard) |
  xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
used=$(du -sb "$CARRY" | cut -f1)
room=$((LIMIT - MARGIN - tree_bytes - used))
echo "working tree $((tree_bytes / 1024)) KiB, packages $((used / 1024)) KiB, room for data $((room / 1024)) KiB"

# The [cuda] tests' reference files, most important first: one group per model file (the model and
# the llama.cpp reference whose prompts the comparison feeds).
groups=(
  "tiny-moe/tiny-moe-f32.gguf tiny-moe/ref-f32.json"
  "tiny-moe/tiny-moe-q8_0.gguf tiny-moe/ref-q8_0.json"
  "tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf tiny-gpt-oss/ref-q8_0.json"
  "tiny-gpt-oss/tiny-gpt-oss-f32.gguf tiny-gpt-oss/ref-f32.json"
  "tiny-deepseek2/tiny-deepseek2-q4_k_m.gguf tiny-deepseek2/ref-q4_k_m.json"
  "tiny-deepseek2/tiny-deepseek2-q8_0.gguf tiny-deepseek2/ref-q8_0.json"
  "tiny-gpt-oss/tiny-gpt-oss-all-f32.gguf tiny-gpt-oss/ref-all-f32.json"
  "tiny-deepseek2/tiny-deepseek2-f32.gguf tiny-deepseek2/ref-f32.json"
  "tiny-deepseek2/tiny-deepseek2-legacy-f32.gguf tiny-deepseek2/ref-legacy-f32.json"
)
left_out=()
n_carried=0
for group in "${groups[@]:${SKIP_GROUPS:-0}}"; do
  bytes=0
  for f in $group; do
    [ -f "$CARRY/shared/data/$f" ] || bytes=$((bytes + $(stat -c %s "$SHARED/data/$f")))
  done
  if [ "$bytes" -gt "$room" ] || [ "${#left_out[@]}" -gt 0 ]; then
    left_out+=("${group%% *}")  # and every later group: each part carries a run of groups
    continue
  fi
  for f in $group; do
    mkdir -p "$CARRY/shared/data/$(dirname "$f")"
    cp -n "$SHARED/data/$f" "$CARRY/shared/data/$f"
  done
  room=$((room - bytes))
  n_carried=$((n_carried + 1))
done
echo "carried ($n_carried groups after the ${SKIP_GROUPS:-0} skipped):" \
  "$(cd "$CARRY/shared/data" && find . -name '*.gguf' | sort | tr '\n' ' ')"
if [ "${#left_out[@]}" -gt 0 ]; then
  echo "left out (their comparisons skip on the GPU machine): ${left_out[*]}"
  echo "next part: SKIP_PACKAGES=1 SKIP_GROUPS=$((${SKIP_GROUPS:-0} + n_carried)) $0"
fi
echo "total to carry: $(du -sh "$CARRY" | cut -f1) in $CARRY"
