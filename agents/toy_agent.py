"""A small real agent loop for the toy SWE-style run: ``python -m harnesscheck.agents.toy_agent exec -m MODEL PROMPT``.

Called the way the driver calls Codex (``DEFAULT_COMMAND``'s shape; Codex flags it does not know are
ignored), in the task's working copy. Each model request goes to the endpoint with the official
``openai`` SDK over the Responses API, streamed, with Codex-like function tools:

``exec_command``  ``{"cmd": str, "workdir"?: str, "timeout_ms"?: int}``, Codex's shell tool: runs
                 ``cmd`` under ``bash -c`` in the working copy (this interpreter's folder first on
                 PATH) and answers as Codex does (``Wall time: ...``, ``Process exited with code N``,
                 ``Output:`` and the output); ``apply_patch <<'EOF' ... EOF`` is applied here, as
                 Codex intercepts it.
``apply_patch``  ``{"input": "*** Begin Patch ... *** End Patch"}`` in Codex's patch format (Add, Delete,
                 Update File with ``@@`` hunks of context/``-``/``+`` lines, ``*** Move to:``).

Real Codex (0.171, fallback model metadata) offers ``exec_command`` but no ``apply_patch`` tool, so the
scripted toy scenarios (``scenarios/data/toycalc_fix*.yaml``) patch through ``exec_command``, and
the same server script drives this agent and ``codex exec`` alike.

The loop sends the whole history each time (``store: false``, as Codex does): the user prompt, every
output item the model returned (reasoning, messages, function calls) and a ``function_call_output``
per call; it stops when an answer has no function calls (exit 0) or after ``--max-turns`` requests
(exit 3); an API error ends it with exit 1, bad arguments with exit 2. Every network wait of a request
(connect, each read of the stream) is limited to ``--request-timeout`` seconds (default 60); the
driver's per-task time limit bounds the whole run.

Environment (the driver sets it): HARNESSCHECK_ENDPOINT or OPENAI_BASE_URL (base URL, ending in
``/v1``), HARNESSCHECK_MODEL (when no ``-m``), HARNESSCHECK_API_KEY (else OPENAI_API_KEY, else a
dummy), CODEX_HOME (default ``~/.codex``).

It writes a Codex rollout, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``, lines
``{timestamp, type, payload}``: ``session_meta``, one ``turn_context``, the user message, each output
item and call output as a ``response_item``, a ``token_count`` ``event_msg`` after each response
(cumulative ``total_token_usage``), ``agent_message`` and ``task_complete``; ``harnesscheck.agents.rollouts`` reads
it. With ``--json`` it also prints ``codex exec --json`` events (thread/turn/item) on stdout.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["TOOLS", "USAGE", "PatchError", "Rollout", "apply_patch", "main", "parse_args", "run", "run_exec"]

INSTRUCTIONS = (
    "You are a coding agent working in a git repository (the current directory). Use exec_command "
    "to inspect files and run commands, and apply_patch to edit files. Make the smallest change that "
    "fixes the issue, run the relevant tests, then answer with a short summary and no tool call."
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a command with bash -c in the working copy; returns its exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {
                "cmd": {"type": "string"},
                "workdir": {"type": "string"},
                "timeout_ms": {"type": "integer"},
            },
            "required": ["cmd"],
        },
    },
    {
        "type": "function",
        "name": "apply_patch",
        "description": "Edit files with a patch: *** Begin Patch / *** Update File: PATH / @@ / -old / "
        "+new / *** End Patch (also *** Add File: and *** Delete File:).",
        "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]},
    },
]

MAX_OUTPUT_CHARS = 16000


class PatchError(ValueError):
    """A patch that does not parse or does not match the files."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_HEREDOC = re.compile(r"\s*apply_patch\s*<<-?\s*(['\"]?)(\w+)\1[ \t]*\n(.*)\n\2\s*", re.DOTALL)


_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|AUTH", re.I)


def _tool_env() -> dict[str, str]:
    """The agent's environment without credentials (as Codex drops *KEY*/*SECRET*/*TOKEN* from its
    shell): a model that runs `env` must not put the endpoint's key into the rollout."""
    return {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}


def run_exec(args: dict[str, Any], cwd: Path) -> tuple[str, int]:
    """Run an ``exec_command`` call; returns (the output text sent back, exit code)."""
    cmd = args.get("cmd")
    if not isinstance(cmd, str) or not cmd.strip():
        return "exec_command: cmd must be a non-empty string", 2
    workdir = cwd / str(args.get("workdir") or ".")
    timeout_ms = args.get("timeout_ms")
    timeout = min(max(timeout_ms, 1000), 600000) / 1000 if isinstance(timeout_ms, int) else 60.0
    start = time.monotonic()
    heredoc = _HEREDOC.fullmatch(cmd)
    if heredoc:  # as Codex does: the patch is applied by the agent, not by a program on PATH
        output, code = apply_patch_output(heredoc.group(3), workdir)
    else:
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        try:
            proc = subprocess.Popen(["bash", "-c", cmd], cwd=workdir, env={**_tool_env(), "PATH": path},
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
        except OSError as exc:
            output, code = f"could not run bash: {exc}", 127
        else:
            try:
                output, _ = proc.communicate(timeout=timeout)
                code = proc.returncode
            except subprocess.TimeoutExpired:  # the whole group: pipelines and background jobs too
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                output, code = f"command timed out after {timeout:g} s", 124
    took = time.monotonic() - start
    head = f"Wall time: {took:.4f} seconds\nProcess exited with code {code}\nOutput:\n"
    return head + output[-MAX_OUTPUT_CHARS:], code


def _apply_hunk(
    lines: list[str], hunk: list[str], header: str, start: int, path: str
) -> tuple[list[str], int]:
    old = [h[1:] for h in hunk if h[:1] in (" ", "-") or h == ""]
    new = [h[1:] for h in hunk if h[:1] in (" ", "+") or h == ""]
    if header:  # "@@ def add(a, b):": search from the line that matches the header
        for i in range(start, len(lines)):
            if lines[i].strip() == header.strip():
                start = i
                break
    for loose in (False, True):  # exact first, then ignoring trailing whitespace
        for i in range(start, len(lines) - len(old) + 1):
            window = lines[i : i + len(old)]
            if window == old or (loose and [w.rstrip() for w in window] == [o.rstrip() for o in old]):
                return lines[:i] + new + lines[i + len(old) :], i + len(new)
    raise PatchError(f"Failed to find expected lines in {path}:\n" + "\n".join(old))


def apply_patch(patch: str, cwd: Path) -> list[str]:
    """Apply a Codex-format patch under ``cwd``; returns ``["M calc.py", ...]``. Raises PatchError."""
    body = patch.strip().splitlines()
    if not body or body[0].strip() != "*** Begin Patch" or body[-1].strip() != "*** End Patch":
        raise PatchError("a patch must start with '*** Begin Patch' and end with '*** End Patch'")
    changed: list[str] = []
    i, body = 0, body[1:-1]
    while i < len(body):
        line = body[i]
        i += 1
        if line.startswith("*** Add File: "):
            path = line[len("*** Add File: ") :].strip()
            added = []
            while i < len(body) and not body[i].startswith("*** "):
                added.append(body[i][1:])
                i += 1
            (cwd / path).parent.mkdir(parents=True, exist_ok=True)
            (cwd / path).write_text("\n".join(added) + "\n")
            changed.append(f"A {path}")
        elif line.startswith("*** Delete File: "):
            path = line[len("*** Delete File: ") :].strip()
            try:
                (cwd / path).unlink()
            except OSError as exc:
                raise PatchError(f"cannot delete {path}: {exc}") from exc
            changed.append(f"D {path}")
        elif line.startswith("*** Update File: "):
            path = line[len("*** Update File: ") :].strip()
            target = path
            if i < len(body) and body[i].startswith("*** Move to: "):
                target = body[i][len("*** Move to: ") :].strip()
                i += 1
            try:
                lines = (cwd / path).read_text().splitlines()
            except OSError as exc:
                raise PatchError(f"cannot read {path}: {exc}") from exc
            pos = 0
            while i < len(body) and (not body[i].startswith("*** ") or body[i] == "*** End of File"):
                if body[i] == "*** End of File":
                    i += 1
                    continue
                header = body[i][2:].strip() if body[i].startswith("@@") else ""
                i += 1 if body[i].startswith("@@") else 0
                hunk = []
                while i < len(body) and not body[i].startswith(("@@", "*** ")):
                    hunk.append(body[i])
                    i += 1
                if hunk:
                    lines, pos = _apply_hunk(lines, hunk, header, pos, path)
            (cwd / target).write_text("\n".join(lines) + "\n")
            if target != path:
                (cwd / path).unlink()
            changed.append(f"M {target}")
        elif line.strip():
            raise PatchError(f"unexpected patch line: {line!r}")
    return changed


def apply_patch_output(patch: str, cwd: Path) -> tuple[str, int]:
    try:
        changed = apply_patch(patch, cwd)
    except PatchError as exc:
        return str(exc), 1
    except OSError as exc:  # a path the patch names cannot be written: the model hears of it
        return f"apply_patch: {exc}", 1
    return "Success. Updated the following files:\n" + "".join(c + "\n" for c in changed), 0


_TOKEN_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)


class Rollout:
    """The Codex rollout file and, with ``--json``, the ``codex exec --json`` events on stdout."""

    def __init__(self, codex_home: Path, cwd: Path, print_events: bool) -> None:
        now = dt.datetime.now(dt.UTC)
        self.session_id = str(uuid.uuid4())
        folder = codex_home / "sessions" / now.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{self.session_id}.jsonl"
        self.fh = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.print_events = print_events
        self.items = 0
        self.total = dict.fromkeys(_TOKEN_KEYS, 0)
        meta = {
            "id": self.session_id,
            "timestamp": now.isoformat(),
            "cwd": str(cwd),
            "originator": "harnesscheck_toy_agent",
            "cli_version": "0.0.0-toy",
            "model_provider": "harnesscheck",
        }
        self.line("session_meta", meta)
        self.event({"type": "thread.started", "thread_id": self.session_id})

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        self.fh.write(json.dumps({"timestamp": _now(), "type": kind, "payload": payload}) + "\n")
        self.fh.flush()

    def event(self, ev: dict[str, Any]) -> None:
        if self.print_events:
            print(json.dumps(ev), flush=True)

    def item(self, item: dict[str, Any]) -> None:
        self.items += 1
        self.event({"type": "item.completed", "item": {"id": f"item_{self.items}", **item}})

    def usage(self, usage: dict[str, Any] | None) -> None:
        """A ``token_count`` record from a Responses ``usage`` object (OpenAI meaning of the fields)."""
        if not usage:
            return
        details_in = usage.get("input_tokens_details") or {}
        details_out = usage.get("output_tokens_details") or {}
        last = {
            "input_tokens": usage.get("input_tokens") or 0,
            "cached_input_tokens": details_in.get("cached_tokens") or 0,
            "output_tokens": usage.get("output_tokens") or 0,
            "reasoning_output_tokens": details_out.get("reasoning_tokens") or 0,
            "total_tokens": usage.get("total_tokens") or 0,
        }
        for key, value in last.items():
            self.total[key] += value
        info = {"total_token_usage": dict(self.total), "last_token_usage": last}
        self.line("event_msg", {"type": "token_count", "info": info, "rate_limits": None})

    def close(self, message: str) -> None:
        self.line("event_msg", {"type": "agent_message", "message": message})
        self.line("event_msg", {"type": "task_complete", "last_agent_message": message})
        self.item({"type": "agent_message", "text": message})
        usage = {k: self.total[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens")}
        self.event({"type": "turn.completed", "usage": usage})
        self.fh.close()


def _call(name: str, arguments: str, cwd: Path, log: Rollout) -> str:
    """Run one function call; returns the text sent back as its output."""
    try:
        args = json.loads(arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as exc:
        return f"invalid arguments for {name}: {exc}"
    if name == "exec_command":
        output, code = run_exec(args, cwd)
        aggregated = output.split("Output:\n", 1)[-1]
        item = {"type": "command_execution", "command": str(args.get("cmd")), "aggregated_output": aggregated}
        log.item({**item, "exit_code": code, "status": "completed" if code == 0 else "failed"})
        return output
    if name == "apply_patch":
        output, code = apply_patch_output(str(args.get("input", "")), cwd)
        changes = [{"path": c[2:], "kind": "update"} for c in output.splitlines()[1:]] if code == 0 else []
        status = "completed" if code == 0 else "failed"
        log.item({"type": "file_change", "changes": changes, "status": status})
        return output
    return f"unsupported call: {name} (the tools are exec_command and apply_patch)"


def _events(client: Any, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The server-sent events of one streamed Responses request, as JSON objects.

    The SDK builds, authenticates, sends (time limit, one retry) and checks the request
    (``with_streaming_response``: an HTTP error raises ``APIStatusError``); the ``data:`` lines are
    decoded here with ``json``, which spares each run the typed event models' first-use schema build
    (about 1.5 s of CPU per process).
    """
    from harnesscheck.protocol.wire.sse import SSEDecoder

    with client.responses.with_streaming_response.create(**body) as response:
        decoder = SSEDecoder()  # the kit's own parser: events end at blank lines, [DONE] is marked

        def frames() -> Iterator[Any]:
            for chunk in response.iter_bytes():
                yield from decoder.feed(chunk)
            yield from decoder.flush()

        completed = False
        for frame in frames():
            if not frame.is_event or frame.done:
                continue
            if not isinstance(frame.json, dict):
                raise ValueError(f"event data is not a JSON object: {frame.data[:200]!r}")
            completed = completed or frame.json.get("type") == "response.completed"
            yield frame.json
        if not completed:  # Codex fails such a turn too
            raise RuntimeError("the stream ended without response.completed")


def run(
    prompt: str,
    *,
    model: str,
    base_url: str,
    api_key: str,
    cwd: Path,
    codex_home: Path,
    print_events: bool = False,
    max_turns: int = 20,
    request_timeout: float = 60.0,
) -> int:
    """The agent loop (see the module docstring); returns the exit code."""
    import httpx
    from openai import OpenAI, OpenAIError

    client = OpenAI(base_url=base_url, api_key=api_key, timeout=request_timeout, max_retries=1)
    log = Rollout(codex_home, cwd, print_events)
    log.event({"type": "turn.started"})
    sandbox = {"type": "danger-full-access"}
    context = {"cwd": str(cwd), "approval_policy": "never", "sandbox_policy": sandbox, "model": model}
    log.line("turn_context", context)
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}
    log.line("response_item", user)
    log.line("event_msg", {"type": "user_message", "message": prompt, "images": []})
    history: list[dict[str, Any]] = [user]
    for _ in range(max_turns):
        output: list[dict[str, Any]] = []
        usage = None
        body = {
            "model": model,
            "instructions": INSTRUCTIONS,
            "input": history,
            "tools": TOOLS,
            "stream": True,
            "store": False,
        }
        try:
            for event in _events(client, body):
                kind = event.get("type")
                if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
                    output.append(event["item"])
                elif kind == "response.completed":
                    usage = (event.get("response") or {}).get("usage")
                elif kind in ("response.failed", "response.incomplete", "error"):
                    raise RuntimeError(f"{kind}: {json.dumps(event)[:500]}")
        except (OpenAIError, httpx.HTTPError, RuntimeError, ValueError) as exc:
            message = f"request failed: {type(exc).__name__}: {exc}"
            print(message, file=sys.stderr)
            log.line("event_msg", {"type": "error", "message": message})
            log.close(message)
            return 1
        for item in output:
            log.line("response_item", item)
            history.append(item)
            if item.get("type") == "reasoning":
                parts = (item.get("summary") or []) + (item.get("content") or [])
                log.item({"type": "reasoning", "text": " ".join(p.get("text", "") for p in parts)})
        log.usage(usage)
        calls = [item for item in output if item.get("type") == "function_call"]
        if not calls:
            texts = [
                part.get("text", "")
                for item in output
                if item.get("type") == "message"
                for part in item.get("content") or []
                if part.get("type") == "output_text"
            ]
            log.close("\n".join(texts))
            return 0
        for call in calls:
            output_text = _call(str(call.get("name")), call.get("arguments") or "", cwd, log)
            call_id = call.get("call_id", "")
            result = {"type": "function_call_output", "call_id": call_id, "output": output_text}
            log.line("response_item", result)
            history.append(result)
    log.close(f"stopped after {max_turns} model requests")
    return 3


#: options that take a value -> where it goes ("" = a Codex option, ignored)
_VALUE_FLAGS = {
    "-m": "model",
    "--model": "model",
    "--max-turns": "max_turns",
    "--request-timeout": "request_timeout",
    **dict.fromkeys(("-c", "--config", "-s", "--sandbox", "-C", "--cd"), ""),
}
USAGE = (
    "usage: python -m harnesscheck.agents.toy_agent [exec] [--json] -m MODEL [--max-turns N] [--request-timeout S] PROMPT\n"
    "needs a prompt, a model (-m or HARNESSCHECK_MODEL) and HARNESSCHECK_ENDPOINT or OPENAI_BASE_URL"
)


def parse_args(argv: list[str]) -> dict[str, Any]:
    """Codex-style arguments (see ``USAGE``); other Codex flags are ignored (``-c/-s/-C`` with their
    value). Raises ValueError for a bad number."""
    opts: dict[str, Any] = {
        "model": os.environ.get("HARNESSCHECK_MODEL"),
        "json": False,
        "max_turns": 20,
        "request_timeout": 60.0,
        "words": [],
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _VALUE_FLAGS:
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if _VALUE_FLAGS[name]:
                opts[_VALUE_FLAGS[name]] = value
        elif arg == "--json":
            opts["json"] = True
        elif not arg.startswith("-") or arg == "-":
            opts["words"].append(arg)
        i += 1
    if opts["words"][:1] == ["exec"]:
        opts["words"] = opts["words"][1:]
    opts["max_turns"], opts["request_timeout"] = int(opts["max_turns"]), float(opts["request_timeout"])
    return opts


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"{exc}\n{USAGE}", file=sys.stderr)
        return 2
    base_url = os.environ.get("HARNESSCHECK_ENDPOINT") or os.environ.get("OPENAI_BASE_URL")
    if not opts["words"] or not opts["model"] or not base_url:
        print(USAGE, file=sys.stderr)
        return 2
    return run(
        " ".join(opts["words"]),
        model=opts["model"],
        base_url=base_url,
        api_key=os.environ.get("HARNESSCHECK_API_KEY") or os.environ.get("OPENAI_API_KEY") or "harnesscheck",
        cwd=Path.cwd(),
        codex_home=Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex"),
        print_events=opts["json"],
        max_turns=opts["max_turns"],
        request_timeout=opts["request_timeout"],
    )


if __name__ == "__main__":
    sys.exit(main())
