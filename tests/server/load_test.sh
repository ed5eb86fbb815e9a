#!/usr/bin/env bash
# Load run from a second process: CLIENTS concurrent clients x REQUESTS requests each (mixed
# streaming, greedy and seeded sampling) against `goose serve --parallel SLOTS`; every text must
# equal `goose generate`'s. Prints latency percentiles, throughput and the server's peak RSS.
# Usage: load_test.sh GOOSE_BINARY MODEL [CLIENTS REQUESTS SLOTS MAX_TOKENS [SERVE_ARGS...]]
# Prompts come from $GOOSE_SHARED/data/tinystories (default: the shared/ beside the checkout).
# Exit 77 (ctest: skipped) only when node is missing.
set -euo pipefail
goose=$1
model=$2
clients=${3:-8}
requests=${4:-25}
slots=${5:-4}
max_tokens=${6:-96}
shift $(( $# < 6 ? $# : 6 ))
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIPPED: node is needed for the load test (tools/install-deps.sh installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'kill_goose_serve; rm -rf "$tmp"' EXIT
# The server's and goose generate's table and cost caches stay in the test's folder.
export XDG_CACHE_HOME="$tmp/cache"

start_goose_serve "$tmp/serve.log" -m "$model" --parallel "$slots" --max-queue 64 "$@"
rss_ready=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status")
shared=${GOOSE_SHARED:-$here/../../../shared}
node "$here/load_test.mjs" "$serve_port" "$goose" "$model" "$clients" "$requests" "$max_tokens" \
  "$shared/data/tinystories/validation.jsonl"
rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status")
rss_peak=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
echo "server RSS ($slots slots): ${rss_ready} KiB when ready, ${rss_after} KiB after the run," \
     "${rss_peak} KiB peak"
stop_goose_serve "$tmp/serve.log"
echo "PASSED"
