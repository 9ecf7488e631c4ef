"""Real clients against the reference server (opt in: HARNESSCHECK_E2E=1; see conftest.py).

Each client completes a text turn and a tool turn through the capture proxy; Codex falls back from
the WebSocket transport at once (the server answers the upgrade 426); one fault that breaks each
client does break it; ``verify.verify_clients`` measures "works" on a clean server and "breaks" for
Codex under ``rs-missing-completed``.
"""

from __future__ import annotations

import pytest

from harnesscheck.agents.clients import get_client, turns, verify
from harnesscheck.reference_server.launch import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


@pytest.fixture(scope="module")
def server():
    with ServerProcess(FAST) as s:
        yield s.url


@pytest.mark.parametrize("name", ["claude-code", "codex", "openclaw"])
def test_client_completes_both_turns(name, server, e2e_install, tmp_path):
    client = get_client(name)
    inst = e2e_install(client.install_name)
    results = turns.run_client(client, inst, server, MODEL, tmp_path)
    for r in results:
        assert r.ok, (r.turn, [(c.id, c.detail) for c in r.checks if not c.ok], r.error, r.stderr_tail[-800:])
    assert results[1].turn == "tool"


def test_codex_websocket_refusal_falls_back_at_once(server, e2e_install, tmp_path):
    inst = e2e_install("codex")
    r = turns.run_turn(get_client("codex", websockets=True), inst, server, MODEL, tmp_path, turn="text",
                        prompt=turns.TEXT_PROMPT)
    assert r.ok and r.ws_probes >= 1
    assert [q["status"] for q in r.requests if q["method"] == "GET"] == [426] * r.ws_probes
    assert r.first_post_s is not None and r.first_post_s < 4.0  # 405 cost ~6.5 s of retries


@pytest.mark.parametrize("name,fault,turn", [("claude-code", "an-delta-type-mismatch", "tool"),
                                             ("codex", "rs-missing-completed", "text")])
def test_fault_breaks_client(name, fault, turn, e2e_install, tmp_path):
    client = get_client(name)
    inst = e2e_install(client.install_name)
    prompt = dict(turns.turns_for(client))[turn]
    with ServerProcess([*FAST, "--fault", fault]) as s:
        r = turns.run_turn(client, inst, s.url, MODEL, tmp_path, turn=turn, prompt=prompt, timeout=150)
    assert not r.ok


def _usable(e2e_install, names: tuple[str, ...]) -> list[str]:
    """The clients the install fixture can give (installed within the budget, starting); verify
    uses the cache only, so this also installs them when the budget allows."""
    got = []
    for name in names:
        try:
            e2e_install(name)
            got.append(name)
        except pytest.skip.Exception:
            pass
    return got


def test_verify_clients_clean_server_works(server, e2e_install, tmp_path):
    usable = _usable(e2e_install, ("claude-code", "codex", "openclaw"))
    if not usable:
        pytest.skip("no real client usable")
    got = verify.verify_clients(server, MODEL, None, ["anthropic", "responses"], tmp_path)
    ran = {k: c for k, c in got["clients"].items() if not c["skipped"]}
    assert {k.partition(":")[0] for k in ran} == set(usable), got["clients"]
    for key, c in ran.items():
        assert c["measured"] == "works" and set(c["turns"]) == {"text", "tool"}, (key, c["turns"])
    rows = verify.compare_verdicts({}, got)
    assert rows and all(r["measured"] == "works" and r["agrees"] for r in rows)


def test_verify_clients_codex_breaks_without_response_completed(e2e_install, tmp_path, monkeypatch):
    inst = e2e_install("codex")
    # A cache holding only Codex: OpenClaw over Responses takes ~90 s a turn under this fault.
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "codex").symlink_to(inst.prefix)
    monkeypatch.setenv("HARNESSCHECK_CLIENTS_DIR", str(tmp_path / "cache"))
    with ServerProcess([*FAST, "--fault", "rs-missing-completed"]) as s:
        got = verify.verify_clients(s.url, MODEL, None, ["responses"], tmp_path / "out", timeout=150)
    assert list(got["clients"]) == ["codex", "openclaw:responses"]
    assert "not installed" in got["clients"]["openclaw:responses"]["skipped"]
    codex = got["clients"]["codex"]
    assert set(codex["turns"]) == {"text", "tool"}
    assert codex["label"] == f"Codex {inst.version}" and codex["measured"] == "breaks", codex
    for turn in codex["turns"].values():
        assert any(f.startswith("CL-FINAL-TEXT") for f in turn["failed"]), turn
    assert "response.completed" in codex["turns"]["text"]["error"]
    assert verify.compare_verdicts({codex["label"]: "would break"}, got) == [
        {"client": codex["label"], "inferred": "would break", "measured": "breaks", "agrees": True,
         "by_api": {"responses": "breaks"}}]
