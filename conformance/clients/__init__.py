"""Real agent clients (Claude Code, Codex CLI, OpenClaw) driven against an endpoint.

Each client module defines a ``Client`` subclass: how to write its throwaway config (HOME,
CODEX_HOME, ~/.openclaw/openclaw.json), the command line of one non-interactive turn, the name
of the shell tool it offers, and how to read its final text from its own output. ``runner`` puts
the capture proxy in front of the endpoint, runs each turn with a time limit and judges the
capture (``runner.capture_checks``); ``impact`` runs the clients against the reference server's
faults; ``profile`` diffs what Codex's model catalog changes in its first request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.conformance.clients.install import Install

__all__ = ["Client", "Prepared", "Parsed", "CLIENT_NAMES", "get_client", "LABELS"]

CLIENT_NAMES = ("claude-code", "codex", "openclaw")
LABELS = {"claude-code": "Claude Code", "codex": "Codex", "openclaw": "OpenClaw"}
DUMMY_KEY = "sk-harnesscheck-local-0000"


@dataclass
class Prepared:
    """What one run needs: the environment, the working folder, the client's home."""
    env: dict[str, str]
    cwd: Path
    home: Path
    files: dict[str, str] = field(default_factory=dict)  # config files written (path -> text)


@dataclass
class Parsed:
    final_text: str = ""
    is_error: bool = False
    error: str = ""
    tool_runs: list[dict[str, Any]] = field(default_factory=list)  # what the client says it ran
    raw: Any = None


class Client:
    name = ""
    install_name = ""
    apis: tuple[str, ...] = ()  # wire APIs it can use; the first is the default
    tool = ""  # the shell tool it offers the model
    tool_arg = "command"

    def __init__(self, api: str | None = None, **options: Any) -> None:
        self.api = api or self.apis[0]
        self.options = options

    @property
    def label(self) -> str:
        return LABELS[self.name] + ("" if self.api == self.apis[0] else f" ({self.api})")

    def prepare(self, inst: Install, work: Path, base_url: str, model: str, api_key: str) -> Prepared:
        raise NotImplementedError

    def command(self, inst: Install, prep: Prepared, prompt: str, model: str) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str, rc: int) -> Parsed:
        raise NotImplementedError

    def tool_prompt(self, command: str) -> str:
        return f"Use the {self.tool} tool to run `{command}` and print its output."


def get_client(name: str, api: str | None = None, **options: Any) -> Client:
    if name == "claude-code":
        from harnesscheck.conformance.clients.claude_code import ClaudeCode
        return ClaudeCode(api, **options)
    if name == "codex":
        from harnesscheck.conformance.clients.codex import Codex
        return Codex(api, **options)
    if name == "openclaw":
        from harnesscheck.conformance.clients.openclaw import OpenClaw
        return OpenClaw(api, **options)
    raise KeyError(f"unknown client {name!r} (known: {', '.join(CLIENT_NAMES)})")
