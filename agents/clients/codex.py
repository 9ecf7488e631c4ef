"""Codex CLI (`@openai/codex`): `codex exec --json PROMPT` with a throwaway CODEX_HOME.

config.toml holds a ``model_provider`` with ``base_url`` (the proxy + /v1), ``wire_api =
"responses"`` and an ``env_key`` (so the Authorization header is sent: with only OPENAI_API_KEY
and ``openai_base_url`` it was not). ``supports_websockets`` is left to the option
``websockets`` (None: not written, the provider default; True: Codex first tries
``GET /v1/responses`` as a WebSocket upgrade). Sandbox and approvals:
``--dangerously-bypass-approvals-and-sandbox`` (the throwaway work folder is the blast radius; the
Linux sandbox needs namespaces a container may lack). The shell tool is ``exec_command``
(fallback metadata and gpt-5.5 alike in 0.171.0).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients import Client, Parsed, Prepared
from harnesscheck.agents.clients.install import Install

KEY_ENV = "HARNESSCHECK_CODEX_KEY"


def toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def config_toml(base_url: str, model: str, *, key_env: str = KEY_ENV, websockets: bool | None = None,
                provider: str = "harnesscheck", extra: dict[str, Any] | None = None,
                environment_context: bool | None = None, features: dict[str, bool] | None = None,
                top: dict[str, Any] | None = None) -> str:
    """The kit's one Codex ``config.toml`` (the clients runner's and the SWE-bench driver's): ``model``
    sent to a custom provider at ``base_url`` (Responses API, key from the environment variable
    ``key_env``), no approvals, no sandbox, no update check, no analytics; ``supports_websockets``
    and ``include_environment_context`` only when given; ``extra``: more keys of the provider's table
    (values JSON-encoded); ``features``: Codex's ``[features]`` switches (``apply_patch_freeform``: the
    freeform apply_patch custom tool under any model id, as its gpt-5.x catalog profiles offer it); ``top``:
    more top-level keys (values JSON-encoded: ``model_catalog_json``)."""
    lines = [f"model = {toml_str(model)}", f"model_provider = {toml_str(provider)}",
             "approval_policy = \"never\"", "sandbox_mode = \"danger-full-access\"",
             "check_for_update_on_startup = false"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in (top or {}).items()]
    if environment_context is not None:  # Codex's <environment_context> user item before the prompt
        lines.append(f"include_environment_context = {'true' if environment_context else 'false'}")
    lines += ["",
             "[analytics]", "enabled = false", ""]
    if features:
        lines += ["[features]", *(f"{k} = {'true' if v else 'false'}" for k, v in features.items()), ""]
    lines += [
             f"[model_providers.{provider}]", f"name = {toml_str('harnesscheck endpoint')}",
             f"base_url = {toml_str(base_url)}", "wire_api = \"responses\"", f"env_key = {toml_str(key_env)}"]
    if websockets is not None:
        lines.append(f"supports_websockets = {'true' if websockets else 'false'}")
    for k, v in (extra or {}).items():
        lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


def catalog_entry(inst: Install, slug: str, *, timeout: float = 60.0) -> dict[str, Any] | None:
    """Codex's own catalog entry ``slug`` (``codex debug models``, the catalog built into the installed
    binary), or None when the binary does not list it."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="harnesscheck-codex-catalog-") as home:
        try:
            proc = subprocess.run([str(inst.modules / ".bin" / "codex"), "debug", "models"], capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=home,
                                  env={"PATH": os.environ.get("PATH", ""), "HOME": home, "CODEX_HOME": home})
            models = json.loads(proc.stdout).get("models") or []
        except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
            return None
    return next((m for m in models if isinstance(m, dict) and m.get("slug") == slug), None)


class Codex(Client):
    name = "codex"
    install_name = "codex"
    apis = ("responses",)
    tool = "exec_command"

    def prepare(self, inst: Install, work: Path, base_url: str, model: str, api_key: str) -> Prepared:
        home = self.home(work, ".codex")
        codex_home = home / ".codex"
        top = {}
        profile = self.options.get("profile")  # a catalog slug whose profile the model id gets
        if profile and profile != model:
            entry = catalog_entry(inst, profile)
            if entry is None:
                raise OSError(f"Codex {inst.version} has no catalog entry {profile!r} (codex debug models)")
            catalog = codex_home / "catalog.json"
            catalog.write_text(json.dumps({"models": [{**entry, "slug": model, "display_name": model}]}))
            top["model_catalog_json"] = str(catalog)
        text = config_toml(base_url.rstrip("/") + "/v1", model, websockets=self.options.get("websockets"),
                           environment_context=self.options.get("environment_context"),
                           features=self.options.get("features"), top=top)
        (codex_home / "config.toml").write_text(text)
        env = {"HOME": str(home), "CODEX_HOME": str(codex_home), KEY_ENV: api_key}
        return Prepared(env=env, cwd=home, home=home, files={str(codex_home / "config.toml"): text})

    def command(self, inst: Install, prep: Prepared, prompt: str, model: str) -> list[str]:
        return [str(inst.modules / ".bin" / "codex"), "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "-m", model, prompt]

    def parse(self, stdout: str, stderr: str, rc: int) -> Parsed:
        p = Parsed(raw=[])
        texts: list[str] = []
        errors: list[str] = []
        for line in stdout.splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            p.raw.append(ev)
            item = ev.get("item") or {}
            if ev.get("type") == "item.completed" and item.get("type") == "agent_message":
                texts.append(str(item.get("text") or ""))
            elif ev.get("type") == "item.completed" and item.get("type") == "command_execution":
                p.tool_runs.append({"command": item.get("command"), "output": item.get("aggregated_output"),
                                    "exit_code": item.get("exit_code")})
            elif ev.get("type") in ("turn.failed", "error"):
                errors.append(json.dumps(ev.get("error") or ev.get("message") or ev)[:1000])
        p.final_text = texts[-1] if texts else ""
        p.is_error = rc != 0 or bool(errors)
        p.error = "; ".join(errors) or ("" if rc == 0 else (stderr.strip()[-2000:] or f"exit {rc}"))
        return p
