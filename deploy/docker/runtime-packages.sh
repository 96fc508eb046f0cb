#!/usr/bin/env bash
# runtime-packages.sh: prints the Debian/Ubuntu packages that own the shared libraries the given binaries load.
#
# Usage: deploy/docker/runtime-packages.sh BINARY...   (one package name per line, sorted)
# Used by the build stage of deploy/docker/Dockerfile*: the runtime stage installs exactly these.
# Libraries that ldd cannot resolve (libcuda.so.1 without a driver: the NVIDIA container runtime
# mounts it) and the loader itself are skipped. CUDA libraries that belong to no package but lie
# under the CUDA toolkit (CUDA_HOME, default /usr/local/cuda: a runfile or pip install) are
# named on stderr and skipped: the CUDA base image provides them. Exits 1 when any other
# resolved library belongs to no package (it would be missing at run time).
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi

cuda_home=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}" 2>/dev/null || true)
status=0
packages=()
libraries=$(for binary in "$@"; do ldd "$binary"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
# dpkg knows a file by the path its package ships; with merged /usr, /lib/x is /usr/lib/x. One
# dpkg-query call for every spelling of every library (each call reads the whole file database).
candidates() {
  local path=$1
  printf '%s\n' "$path" "/usr${path#/usr}" "${path#/usr}" "$(readlink -f "$path")"
}
owners=$(for library in $libraries; do candidates "$library"; done | sort -u |
  xargs -r dpkg-query -S 2>/dev/null || true)
for library in $libraries; do
  package=""
  while read -r candidate; do
    package=$(awk -v path="$candidate" 'substr($0, length($0) - length(path) + 1) == path &&
      substr($0, length($0) - length(path) - 1, 2) == ": " {split($0, a, ":"); split(a[1], b, ", "); print b[1]; exit}' \
      <<<"$owners")
    [ -n "$package" ] && break
  done < <(candidates "$library")
  if [ -z "$package" ]; then
    if [ -n "$cuda_home" ] && [[ "$(readlink -f "$library")" == "$cuda_home"/* ]]; then
      echo "runtime-packages: $library: CUDA toolkit, not packaged; the CUDA image provides it" >&2
      continue
    fi
    echo "runtime-packages: $library belongs to no package" >&2
    status=1
    continue
  fi
  packages+=("$package")
done
if [ ${#packages[@]} -gt 0 ]; then
  printf '%s\n' "${packages[@]}" | sort -u
fi
exit $status
