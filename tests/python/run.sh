#!/usr/bin/env bash
# Runs tests/python/goose_test.py with Debian's python3 on an installed goose package.
# Usage: run.sh PYTHON_DIR GOOSE_BINARY MODEL [SANITIZED]
# A sanitized libgoose needs the sanitizers' runtimes loaded first (python3 is not built
# with them); leaks are not checked there (python3's own would be reported).
set -euo pipefail
pydir=$1 binary=$2 model=$3 sanitized=${4:-}
python=/usr/bin/python3
[ -x "$python" ] || { echo "no $python: skipped"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$pydir" GOOSE_BINARY="$binary" GOOSE_TEST_MODEL="$model"
if [ "$sanitized" = "ON" ] || [ "$sanitized" = "1" ]; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
exec "$python" -B "$here/goose_test.py" -v
