"""Dynamo's frontend and CPU mocker on this machine, without GPU, etcd or NATS: the peer of `bench
server`, and what ``tests/peers/dynamo.py`` starts for tests.

``DynamoProcess(python, model_dir, replay=...)`` starts, from the Dynamo environment of
``python`` (ai-dynamo 1.6.1 with ai-dynamo-runtime 1.6.1):

- the frontend: ``python -m dynamo.frontend --http-port PORT --discovery-backend file
  --request-plane tcp --enable-anthropic-api``;
- the mocker engine: ``replay/benchmarks/dynamo_mocker.py`` (which sets the reasoning and
  tool-call parsers the 1.6.1 mocker has no flags for) with ``--model-path DIR --model-name NAME
  --discovery-backend file --request-plane tcp --speedup-ratio R
  --response-replay-trace-path TRACE``;

both with ``DYN_FILE_KV`` set to one temporary discovery folder, so they find each other by file
discovery. ``url`` is the frontend's, ``pids`` its process and that process's children (the CPU
that `bench server` counts), ``model`` the served name. Start-up has a budget (``startup_s``);
on expiry the logs of both come with the error.

The model folder is copied without weights (the mocker loads none) and with ``<think>``,
``</think>``, ``<tool_call>`` and ``</tool_call>`` marked non-special, as Qwen3's own tokenizer
marks them: Dynamo decodes with special tokens skipped, so special tags would never reach its
reasoning and tool-call parsers.

Replay (``--response-replay-trace-path``): a JSON-lines trace, one row per scripted output:
``request_id`` (the key a request names with ``"nvext": {"annotations":
["output_replay_id:KEY"]}``), ``output_token_ids``, ``output_length`` (their count),
``input_length``, ``hash_ids`` and ``timestamp`` (measured here with 1.6.1: a row keyed by
another field is "not found" and the mocker emits random tokens instead).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV_PYTHON = "HARNESSCHECK_DYNAMO_PYTHON"
WRAPPER = Path(__file__).with_name("dynamo_mocker.py")
UNSPECIAL = ("<think>", "</think>", "<tool_call>", "</tool_call>")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def locate(python: str | None = None) -> tuple[str | None, str]:
    """Dynamo's Python (``python``, else ``$HARNESSCHECK_DYNAMO_PYTHON``) and a sentence saying
    where, or None and why not."""
    python = python or os.environ.get(ENV_PYTHON)
    if not python:
        return None, f"no Dynamo environment: set {ENV_PYTHON} to the Python of one with ai-dynamo 1.6.1"
    if not (os.path.exists(python) and os.access(python, os.X_OK)):
        return None, f"{python} is not an executable"
    probe = subprocess.run([python, "-c", "import dynamo.frontend, dynamo.mocker"], capture_output=True, text=True,
                           timeout=120, check=False)
    if probe.returncode:
        return None, f"{python} cannot import dynamo.frontend / dynamo.mocker: {probe.stderr.strip()[-300:]}"
    return python, python


def weightless_model(dst: Path) -> Path:
    """A Hugging Face folder the mocker serves, written without torch: the reference tokenizer, Qwen3's chat
    template and a config with a model's sizes (the mocker loads no weights; it sizes its KV cache from them)."""
    from harnesscheck.reference_server.make_model import write_checkpoint_files

    return write_checkpoint_files(dst, family="qwen3")


def prepare_model(src: Path, dst: Path) -> Path:
    """Copy a Hugging Face model folder without weights, the reasoning and tool tags made non-special."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix not in (".safetensors", ".bin", ".pt"):
            shutil.copy(f, dst / f.name)
    tok = dst / "tokenizer.json"
    if tok.exists():
        data = json.loads(tok.read_text(encoding="utf-8"))
        for t in data.get("added_tokens", []):
            if t.get("content") in UNSPECIAL:
                t["special"] = False
        tok.write_text(json.dumps(data), encoding="utf-8")
    cfg = dst / "tokenizer_config.json"
    if cfg.exists():
        data = json.loads(cfg.read_text(encoding="utf-8"))
        for t in (data.get("added_tokens_decoder") or {}).values():
            if t.get("content") in UNSPECIAL:
                t["special"] = False
        cfg.write_text(json.dumps(data), encoding="utf-8")
    return dst


def write_replay_trace(path: Path, outputs: Mapping[str, Sequence[int]]) -> Path:
    """The mocker's replay trace: one row per key, its output token ids."""
    with path.open("w", encoding="utf-8") as f:
        for i, (key, ids) in enumerate(outputs.items()):
            f.write(json.dumps({"request_id": key, "timestamp": i, "input_length": 16, "hash_ids": [i],
                                "output_length": len(ids), "output_token_ids": list(ids)}) + "\n")
    return path


def annotate(body: dict[str, Any], key: str) -> dict[str, Any]:
    """``body`` asking the mocker to replay output ``key``."""
    return {**body, "nvext": {"annotations": [f"output_replay_id:{key}"]}}


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


class DynamoProcess:
    """``with DynamoProcess(python, model_dir) as d: d.url, d.model, d.pids``."""

    def __init__(self, python: str, model_dir: str | Path, *, model: str = "qwen3-tiny",
                 replay: Mapping[str, Sequence[int]] | None = None, reasoning_parser: str = "nemotron_deci",
                 tool_call_parser: str = "qwen3_coder", speedup_ratio: float = 1000.0,
                 startup_s: float = 180.0) -> None:
        self.python = python
        self.model_dir = Path(model_dir)
        self.model = model
        self.replay = dict(replay or {})
        self.parsers = (reasoning_parser, tool_call_parser)
        self.speedup_ratio = speedup_ratio
        self.startup_s = startup_s
        self.url = ""
        self.pids: list[int] = []
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []

    def __enter__(self) -> DynamoProcess:
        self._tmp = tempfile.TemporaryDirectory(prefix="hc-dynamo-")
        root = Path(self._tmp.name)
        (root / "kv").mkdir()
        model = prepare_model(self.model_dir, root / "model")
        env = {**os.environ, "DYN_FILE_KV": str(root / "kv"), "PYTHONUNBUFFERED": "1"}
        port = free_port()
        plane = ["--discovery-backend", "file", "--request-plane", "tcp"]
        frontend = [self.python, "-m", "dynamo.frontend", "--http-port", str(port), *plane, "--enable-anthropic-api"]
        mocker = [self.python, str(WRAPPER), "--reasoning-parser", self.parsers[0], "--tool-call-parser",
                  self.parsers[1], "--", "--model-path", str(model), "--model-name", self.model, *plane,
                  "--speedup-ratio", f"{self.speedup_ratio:g}"]
        if self.replay:
            mocker += ["--response-replay-trace-path", str(write_replay_trace(root / "harnesscheck.replay.jsonl", self.replay))]
        try:
            for name, cmd in (("frontend", frontend), ("mocker", mocker)):
                log = root / f"{name}.log"
                self._logs.append(log)
                with log.open("wb") as f:
                    self._procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=root))
            self.url = f"http://127.0.0.1:{port}"
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        self.pids = [self._procs[0].pid, *children(self._procs[0].pid)]
        return self

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    raise RuntimeError(f"Dynamo exited ({p.returncode}) during start-up:\n{self.logs()}")
            try:
                r = httpx.get(self.url + "/v1/models", timeout=2)
                if r.status_code == 200 and any(m.get("id") == self.model for m in r.json().get("data") or []):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"Dynamo did not serve {self.model} within {self.startup_s:g} s:\n{self.logs()}")

    def logs(self, tail: int = 3000) -> str:
        out = []
        for log in self._logs:
            if log.exists():
                out.append(f"--- {log.name}\n{log.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self._procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._procs = []
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
