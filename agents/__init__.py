"""Everything that runs an agent: the real clients (Claude Code, Codex, OpenClaw), the toy agent, the SWE-bench
driver and its rollouts. Statistics over what they did live in `harnesscheck.stats` (pure functions)."""
