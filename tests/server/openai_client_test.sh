#!/usr/bin/env bash
# Runs openai_client_test.mjs (the official `openai` npm client) against a `goose serve` on a
# free loopback port, then stops the server with SIGTERM and checks it exits 0.
# Usage: openai_client_test.sh GOOSE_BINARY MODEL
# Exit 77 (ctest: skipped) only when node or npm is missing; everything else failing fails.
set -euo pipefail
goose=$1
model=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIPPED: node and npm are needed to run the official openai client (tools/install-deps.sh installs them)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'kill_goose_serve; rm -rf "$tmp"' EXIT
# The server's and goose generate's table and cost caches stay in the test's folder.
export XDG_CACHE_HOME="$tmp/cache"

# openai 7.x needs Node 22; 6.x runs on Node 18 and 20.
(cd "$tmp" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent openai@6) || {
  echo "FAILED: npm install openai@6 (is registry.npmjs.org reachable?)"
  exit 1
}
cp "$here/openai_client_test.mjs" "$tmp/"

start_goose_serve "$tmp/serve.log" -m "$model" --parallel 2 -t 1 --chat-template chatml
node "$tmp/openai_client_test.mjs" "$serve_port" "$goose" "$model"
stop_goose_serve "$tmp/serve.log"
echo "PASSED"
