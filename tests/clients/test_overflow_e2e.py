"""Real clients at the context window (opt in: HARNESSCHECK_E2E=1; see conftest.py): the measurements of
docs/API_FACTS.md "Context overflow" that set the levels of the CTX rules, each rerun cheaply (a session
of `seq 1 3000` calls against a reference server with a small window; 3-30 s a case here).

Claude Code compacts on the API's own refusal and goes on, and breaks on a 400 without "prompt is too
long"; Codex compacts on its usage meter and goes on, and breaks when the usage counts only the new turn.
"""

from __future__ import annotations

import pytest

from harnesscheck.agents.clients import get_client, overflow

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.mark.parametrize("name,model,case,compacts_on,works", [
    ("claude-code", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "correct", "refusal", True),
    ("claude-code", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "bare-400", None, False),
    ("codex", "gpt-5.5", "usage-correct", "usage", True),
    ("codex", "gpt-5.5", "current-turn-only", None, False),
])
def test_what_the_client_does_at_the_window(name, model, case, compacts_on, works, e2e_install, tmp_path):
    client = get_client(name)
    inst = e2e_install(client.install_name)
    obs = overflow.run_case(client, inst, case, tmp_path, model=model, timeout=400)
    assert obs.signal == compacts_on, obs.outcome
    assert (obs.rc == 0 and not obs.client_error) is works, obs.outcome
    if not works:
        assert obs.refusals, obs.outcome  # it broke on the window's refusal, not on something else
