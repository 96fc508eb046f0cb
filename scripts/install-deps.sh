#!/usr/bin/env bash
# Installs the Debian 12 packages Tandem builds and tests with. Idempotent: asks apt-get only for
# what is missing, says what it does, and uses sudo when not run as root.
set -euo pipefail

packages=(
  # toolchain
  g++ make cmake pkg-config git python3 python3-venv clang-format
  # libraries (docs/building.md says what each is for)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev nlohmann-json3-dev libyaml-cpp-dev catch2 libpcre2-dev libicu-dev prometheus-cpp-dev
  libbenchmark-dev
  # deploy checks (tests/deploy: scripts/check_deploy.py)
  python3-yaml
  # the fuzzers (scripts/run-fuzzers.sh, run by .ci/run): clang with libFuzzer and ASan/UBSan
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: not root and sudo is not available; install them as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
