#!/usr/bin/env bash
# CTest entry of one integration test file: runs it with the test venv's pytest, and fails with
# instructions when the venv is missing. Usage: run_pytest.sh VENV_DIR TEST_FILE
set -euo pipefail
venv=$1
file=$2
if [ ! -x "$venv/bin/python" ] ||
  ! "$venv/bin/python" -c 'import pytest, smg_grpc_proto' 2>/dev/null; then
  echo "integration tests: no test venv at $venv (or it lacks pytest / smg-grpc-proto)." >&2
  echo "Create it with:  scripts/setup-test-venv.sh $venv   (./dev test does this)" >&2
  exit 1
fi
cd "$(dirname "$0")/../.."
exec "$venv/bin/python" -m pytest "$file" -x -q -p no:cacheprovider
