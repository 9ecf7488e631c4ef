# Shared by the peer scripts (llamacpp_peer.sh, vllm_peer.sh): wait for a server this script started, and stop
# only that one. Sourced, not run.

# wait_ready NAME URL PIDFILE LOG SECONDS: poll URL until it answers, the process exits, or SECONDS pass.
wait_ready() {
  local name=$1 url=$2 pidfile=$3 log=$4 seconds=$5
  for _ in $(seq 1 "$seconds"); do
    curl -fsS "$url" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { echo "$name exited; see $log" >&2; tail -5 "$log" >&2; exit 1; }
    sleep 1
  done
  echo "$name did not become ready in $seconds s; see $log" >&2; exit 1
}

# stop_started PIDFILE: stop the process group the pid file names (TERM, then KILL after 15 s) and forget it.
stop_started() {
  local pidfile=$1
  [ -f "$pidfile" ] || { echo "not started by this script"; return; }
  local pid; pid=$(cat "$pidfile")
  kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 -- -"$pid" 2>/dev/null || true
  rm -f "$pidfile"; echo "stopped pid $pid"
}
