"""Claude Code (`@anthropic-ai/claude-code`): `claude -p PROMPT --output-format json`.

Environment: ANTHROPIC_BASE_URL (the proxy), ANTHROPIC_API_KEY, DISABLE_TELEMETRY=1,
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, a throwaway HOME. Permissions: ``--allowedTools
Bash,Read,Edit`` (the tool kinds the measured turns use, ``kinds``; ``--dangerously-skip-permissions`` is
refused when running as root). The shell tool is ``Bash``.
"""

from __future__ import annotations

import json
from pathlib import Path

from harnesscheck.agents.clients import Client, Parsed, Prepared
from harnesscheck.agents.clients.install import Install


class ClaudeCode(Client):
    name = "claude-code"
    install_name = "claude-code"
    apis = ("anthropic",)
    tool = "Bash"

    def prepare(self, inst: Install, work: Path, base_url: str, model: str, api_key: str) -> Prepared:
        home = self.home(work)
        env = {"HOME": str(home), "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key,
               "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
        return Prepared(env=env, cwd=home, home=home)

    def command(self, inst: Install, prep: Prepared, prompt: str, model: str) -> list[str]:
        return [str(inst.modules / ".bin" / "claude"), "-p", prompt, "--model", model, "--output-format", "json",
                "--allowedTools", "Bash,Read,Edit"]

    def parse(self, stdout: str, stderr: str, rc: int) -> Parsed:
        for line in reversed(stdout.strip().splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("type") == "result":
                err = bool(data.get("is_error")) or rc != 0
                return Parsed(final_text=str(data.get("result") or ""), is_error=err,
                              error=str(data.get("result") or "") if err else "", raw=data)
        return Parsed(final_text="", is_error=True, error=(stderr or stdout).strip()[-2000:] or f"exit {rc}")
