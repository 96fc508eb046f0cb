#!/usr/bin/env bash
# Creates (or refreshes) the Python virtualenv of the integration tests: pinned packages from
# tests/integration/requirements.txt. Idempotent: skips pip when the venv's stamp matches the hash
# of the requirements file. Usage: scripts/setup-test-venv.sh VENV_DIR
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ]; then
  echo "usage: scripts/setup-test-venv.sh VENV_DIR" >&2
  exit 2
fi
venv=$1
requirements=tests/integration/requirements.txt
stamp="$venv/.tandem-requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup-test-venv: $venv is up to date"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup-test-venv: creating $venv"
  python3 -m venv "$venv"
fi
echo "setup-test-venv: installing $requirements into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
# smg is a Rust binary with a Python launcher; check it runs here (offline) before stamping.
"$venv/bin/smg" launch --help >/dev/null
echo "$want" >"$stamp"
echo "setup-test-venv: done"
