# Sourced by the server test drivers: start `goose serve` on a free loopback port and stop it.
# start_goose_serve LOG ARGS...: starts it with --port 0, waits until ready; sets serve_pid and
#   serve_port. stop_goose_serve: SIGTERM, waits, fails unless the exit status is 0.

serve_pid=
serve_port=

start_goose_serve() {
  local log=$1
  shift
  "$goose" serve --port 0 "$@" 2>"$log" &
  serve_pid=$!
  for _ in $(seq 600); do
    grep -q "goose: ready" "$log" && break
    if ! kill -0 "$serve_pid" 2>/dev/null; then
      cat "$log"
      echo "FAILED: goose serve exited before it was ready"
      serve_pid=
      exit 1
    fi
    sleep 0.1
  done
  grep -q "goose: ready" "$log" || { cat "$log"; echo "FAILED: goose serve not ready"; exit 1; }
  serve_port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
}

stop_goose_serve() {
  local log=$1 rc=0
  kill -TERM "$serve_pid"
  wait "$serve_pid" || rc=$?
  serve_pid=
  if [ "$rc" -ne 0 ]; then
    cat "$log"
    echo "FAILED: goose serve exited with status $rc after SIGTERM"
    exit 1
  fi
}

# For an EXIT trap: a server still running after a failure is killed.
kill_goose_serve() {
  if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then kill -KILL "$serve_pid"; fi
}
