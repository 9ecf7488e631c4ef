"""Real clients against the reference server (opt in: HARNESSCHECK_E2E=1; see conftest.py).

Each client completes every turn of its real tool kinds (agents/clients/kinds.py) through the capture
proxy; Codex falls back from the WebSocket transport at once (the server answers the upgrade 426); a
sample of faults gives, per client and turn, the verdict conformance/impact.json records (a client update
that changes one is noticed here: re-measure with `harnesscheck clients --faults`);
``verify.verify_clients`` measures "works" on a clean server, "breaks" for Codex under
``rs-missing-completed`` and, on its apply_patch turn alone, under ``rs-custom-call-as-function``.
"""

from __future__ import annotations

import pytest

from harnesscheck.agents.clients import get_client, kinds, turns, verify
from harnesscheck.conformance import impact
from harnesscheck.reference_server.launch import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
MODELS = ("--model-id", MODEL, "--model-id", kinds.CODEX_CATALOG_MODEL)  # Codex's catalog turns ask for gpt-5.5
# (client, fault, turn): a sample of impact.json's verdicts, both ways (about 3 minutes, OpenClaw's most of it)
SAMPLE = (("codex", "rs-custom-call-as-function", "patch"), ("codex", "rs-missing-completed", "text"),
          ("codex", "rs-sequence-gap", "shell"), ("claude-code", "an-delta-type-mismatch", "tool"),
          ("claude-code", "reject-tool-result-image", "image"), ("claude-code", "an-block-index-skip", "edit"),
          ("openclaw", "an-end-turn-after-tool-use", "tool"), ("openclaw", "invalid-tool-json", "patch"))


@pytest.fixture(scope="module")
def server():
    with ServerProcess([*FAST, *MODELS]) as s:
        yield s.url


@pytest.mark.parametrize("name", ["claude-code", "codex", "openclaw"])
def test_client_completes_every_tool_kind(name, server, e2e_install, tmp_path):
    client = get_client(name)
    inst = e2e_install(client.install_name)
    results = turns.run_client(client, inst, server, MODEL, tmp_path, specs=kinds.turns_for(client))
    for r in results:
        assert r.ok, (r.turn, [(c.id, c.detail) for c in r.checks if not c.ok], r.error, r.stderr_tail[-800:])
    assert [r.turn for r in results] == [t.name for t in kinds.turns_for(client)]


def test_codex_websocket_refusal_falls_back_at_once(server, e2e_install, tmp_path):
    inst = e2e_install("codex")
    r = turns.run_turn(get_client("codex", websockets=True), inst, server, MODEL, tmp_path, turn="text",
                        prompt=turns.TEXT_PROMPT)
    assert r.ok and r.ws_probes >= 1
    assert [q["status"] for q in r.requests if q["method"] == "GET"] == [426] * r.ws_probes
    assert r.first_post_s is not None and r.first_post_s < 4.0  # 405 cost ~6.5 s of retries


@pytest.mark.parametrize("name,fault,turn", SAMPLE)
def test_fault_gives_the_recorded_verdict(name, fault, turn, e2e_install, tmp_path):
    """The turn passes or fails under the fault as impact.json recorded it (with the client version it
    names); a different version that changes the verdict fails here: re-measure and update the docs."""
    client = get_client(name)
    inst = e2e_install(client.install_name)
    recorded = impact.load()["faults"][fault][name]["turns"][turn]
    spec = next(t for t in kinds.turns_for(client) if t.name == turn)
    with ServerProcess([*FAST, *MODELS, "--fault", fault]) as s:
        r = turns.run_turn(client, inst, s.url, MODEL, tmp_path, turn=turn, prompt=spec.prompt, spec=spec,
                           timeout=150)
    version = impact.load()["clients"][name]["version"]
    assert r.ok is recorded["ok"], (f"{client.label} {inst.version} (impact.json: {version}) under {fault}, "
                                    f"{turn} turn: recorded ok={recorded['ok']} ({recorded['failed'][:1]}), now "
                                    f"ok={r.ok}: {[(c.id, c.detail) for c in r.checks if not c.ok]} {r.error}")


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
        name = key.partition(":")[0]
        assert c["measured"] == "works" and list(c["turns"]) == list(kinds.VERIFY[name]), (key, c["turns"])
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
    assert list(codex["turns"]) == list(kinds.VERIFY["codex"])
    assert codex["label"] == f"Codex {inst.version}" and codex["measured"] == "breaks", codex
    for turn in codex["turns"].values():
        assert any(f.startswith("CL-FINAL-TEXT") for f in turn["failed"]), turn
    assert "response.completed" in codex["turns"]["text"]["error"]
    assert verify.compare_verdicts({codex["label"]: "would break"}, got) == [
        {"client": codex["label"], "inferred": "would break", "measured": "breaks", "agrees": True,
         "by_api": {"responses": "breaks"}}]


def test_verify_clients_codex_breaks_on_its_patch_turn_when_the_custom_call_is_a_function(e2e_install, tmp_path,
                                                                                          monkeypatch):
    """The issue's case: with a custom tool's call answered as a function_call, Codex's text and shell turns
    pass, its apply_patch turn does not edit the file (Codex answers the call "aborted"): it breaks."""
    inst = e2e_install("codex")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "codex").symlink_to(inst.prefix)
    monkeypatch.setenv("HARNESSCHECK_CLIENTS_DIR", str(tmp_path / "cache"))
    with ServerProcess([*FAST, "--fault", "rs-custom-call-as-function"]) as s:
        got = verify.verify_clients(s.url, MODEL, None, ["responses"], tmp_path / "out", timeout=150)
    codex = got["clients"]["codex"]
    assert codex["measured"] == "breaks", codex
    assert [n for n, t in codex["turns"].items() if not t["ok"]] == ["patch"], codex["turns"]
    assert codex["turns"]["patch"]["failed"][0].startswith("CL-EFFECT"), codex["turns"]["patch"]
