"""Real agent clients (Claude Code, Codex CLI, OpenClaw) driven against an endpoint.

Each client module defines a ``Client`` subclass: how to write its throwaway config (HOME,
CODEX_HOME, ~/.openclaw/openclaw.json), the command line of one non-interactive turn, the name
of the shell tool it offers, and how to read its final text from its own output. ``turns`` puts
the capture proxy in front of the endpoint, runs each turn with a time limit and judges the
capture (``turns.capture_checks``); ``fault_runs`` runs the clients against the reference server's
faults (conformance/impact.json); ``verify`` runs them against an endpoint under test
(``check --verify-clients``); ``profile`` diffs what Codex's model catalog changes in its first
request. ``python -m harnesscheck.agents.clients --budget S`` installs them (``install``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients.install import Install

__all__ = ["CLIENT_NAMES", "LABELS", "Client", "Parsed", "Prepared", "client_entry", "client_key",
           "get_client", "prepare_clients"]

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

    def __init__(self, api: str | None = None, **options: Any) -> None:
        self.api = api or self.apis[0]
        self.options = options

    @property
    def label(self) -> str:
        return LABELS[self.name] + ("" if self.api == self.apis[0] else f" ({self.api})")

    def prepare(self, inst: Install, work: Path, base_url: str, model: str, api_key: str) -> Prepared:
        raise NotImplementedError

    @staticmethod
    def home(work: Path, config_dir: str = "") -> Path:
        """The client's own HOME inside the turn's folder, made with ``config_dir`` in it (absolute: the
        client runs in another folder)."""
        home = work.resolve() / "home"
        (home / config_dir).mkdir(parents=True, exist_ok=True)
        return home

    def command(self, inst: Install, prep: Prepared, prompt: str, model: str) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str, rc: int) -> Parsed:
        raise NotImplementedError

    def tool_prompt(self, command: str) -> str:
        return f"Use the {self.tool} tool to run `{command}` and print its output."


# client name -> (module of this package, its Client class), imported when asked for
_CLASSES = {"claude-code": ("claude_code", "ClaudeCode"), "codex": ("codex", "Codex"),
            "openclaw": ("openclaw", "OpenClaw")}


def get_client(name: str, api: str | None = None, **options: Any) -> Client:
    """The client ``name`` (one of CLIENT_NAMES) over ``api`` (None: its first); KeyError for others."""
    if name not in _CLASSES:
        raise KeyError(f"unknown client {name!r} (known: {', '.join(CLIENT_NAMES)})")
    module, cls = _CLASSES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(api, **options)


def client_key(name: str, api: str | None) -> str:
    """A (client, api) run's key in measurements: "codex", or "openclaw:chat" when the run chose the API."""
    return name if api is None else f"{name}:{api}"


def prepare_clients(runs: Iterable[tuple[str, str | None]], *, install_missing: bool = True
                    ) -> tuple[list[tuple[str, Client, Install]], dict[str, str]]:
    """The clients of ``runs`` ((name, api) pairs) ready to run, as [(key, client, install)], and
    {key: why not} for the others: not installed (``install_missing=False`` uses the cache only;
    otherwise ``install.ensure`` installs it, and an install that fails says why), or its binary
    missing or not starting (``install.runnable``). Shared by ``fault_runs`` and ``verify``."""
    from harnesscheck.agents.clients import install

    prepared: list[tuple[str, Client, Install]] = []
    skipped: dict[str, str] = {}
    for name, api in runs:
        client = get_client(name, api)
        key = client_key(name, api)
        if install_missing:
            inst = install.ensure(client.install_name)
        else:
            inst = install.installed(client.install_name) or install.Install(
                client.install_name, install.cache_dir() / client.install_name,
                skip=f"not installed in {install.cache_dir()} (python -m harnesscheck.agents.clients "
                     f"{client.install_name} installs it)")
        why = inst.skip or install.runnable(client.install_name, inst)
        if why:
            skipped[key] = why
            continue
        prepared.append((key, client, inst))
    return prepared, skipped


def client_entry(client: Client, inst: Install) -> dict[str, str]:
    """A client's record in results: {"label": "Codex", "version": "0.171.0", "api": "responses"}."""
    return {"label": client.label.split(" (")[0], "version": inst.version, "api": client.api}
