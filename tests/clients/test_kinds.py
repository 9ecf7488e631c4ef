"""The clients' real tool kinds as measured turns (agents/clients/kinds.py), the checks they add to a
turn (CL-EFFECT, CL-IMAGE, a named tool for CL-TOOL-RUN) and the impact document's bookkeeping
(fault_runs: judging, merging partial runs, coverage, the overflow session's cases).

No npm and no client processes: recorded captures, hand-made captures and a stand-in client (a Python
script speaking Messages) against the real reference server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harnesscheck.agents.clients import fault_runs, get_client, kinds, turns
from harnesscheck.agents.clients.claude_code import ClaudeCode
from harnesscheck.agents.clients.install import Install
from harnesscheck.reference_server.faults import FAULTS

FIX = Path(__file__).parent / "fixtures"


# -- the turns --------------------------------------------------------------------------------

def test_each_client_runs_its_real_tool_kinds():
    names = {c: [t.name for t in kinds.turns_for(get_client(c))] for c in ("claude-code", "codex", "openclaw")}
    assert names == {"claude-code": ["text", "tool", "read", "edit", "image"],
                     "codex": ["text", "tool", "patch", "shell"], "openclaw": ["text", "tool", "patch"]}
    codex = {t.name: t for t in kinds.CODEX}
    assert codex["patch"].tool == "apply_patch" and codex["patch"].model == kinds.CODEX_CATALOG_MODEL
    assert codex["shell"].tool == "exec_command" and codex["shell"].model == kinds.CODEX_CATALOG_MODEL
    assert {t.name: t.tool for t in kinds.CLAUDE_CODE}["edit"] == "Edit"
    assert all(t.name in kinds.VERIFY[c] for c, ts in kinds._BY_CLIENT.items() for t in ts)


def test_the_screenshot_is_a_png_that_decodes():
    from matplotlib.image import imread
    import io

    pixels = imread(io.BytesIO(kinds.png()), format="png")
    assert pixels.shape == (40, 64, 3)
    assert pixels[0, 0].tolist() != pixels[-1, -1].tolist()  # a title bar over a window body


def test_on_endpoint_gives_codex_its_catalog_profile_under_the_endpoints_model():
    codex = get_client("codex")
    patch = next(t for t in kinds.CODEX if t.name == "patch")
    runner, spec = kinds.on_endpoint(codex, patch)
    assert spec.model is None and runner.options["profile"] == kinds.CODEX_CATALOG_MODEL
    text = kinds.CODEX[0]
    assert kinds.on_endpoint(codex, text) == (codex, text)
    claude = get_client("claude-code")
    assert kinds.on_endpoint(claude, kinds.CLAUDE_CODE[2])[0] is claude


def test_codex_profile_writes_its_own_catalog_entry_renamed(tmp_path, monkeypatch):
    from harnesscheck.agents.clients import codex as codex_mod
    import tomllib

    entry = {"slug": "gpt-5.5", "display_name": "GPT-5.5", "apply_patch_tool_type": "freeform"}
    monkeypatch.setattr(codex_mod, "catalog_entry", lambda inst, slug: entry if slug == "gpt-5.5" else None)
    c = get_client("codex", profile="gpt-5.5")
    inst = Install("codex", tmp_path / "cache", version="1.0")
    prep = c.prepare(inst, tmp_path / "w", "http://127.0.0.1:9", "served/model", "k")
    cfg = tomllib.loads((Path(prep.env["CODEX_HOME"]) / "config.toml").read_text())
    catalog = json.loads(Path(cfg["model_catalog_json"]).read_text())
    assert catalog["models"] == [{**entry, "slug": "served/model", "display_name": "served/model"}]
    with pytest.raises(OSError, match="no catalog entry"):
        get_client("codex", profile="gpt-9").prepare(inst, tmp_path / "w2", "http://h", "m", "k")
    plain = get_client("codex").prepare(inst, tmp_path / "w3", "http://h", "m", "k")
    assert "model_catalog_json" not in (Path(plain.env["CODEX_HOME"]) / "config.toml").read_text()


# -- the checks a tool kind adds ----------------------------------------------------------------

def _records(name: str) -> list[dict]:
    return turns.load_records(FIX / name)


def test_a_named_tool_turn_needs_a_call_of_that_tool():
    recs = _records("claude-code-tool.capture.jsonl")
    checks, _ = turns.capture_checks(recs, tool_turn=True, rc=0, final_text="Done.", tool="Bash")
    assert all(c.ok for c in checks)
    checks, _ = turns.capture_checks(recs, tool_turn=True, rc=0, final_text="Done.", tool="Edit")
    run = next(c for c in checks if c.id == "CL-TOOL-RUN")
    assert not run.ok and "no call of Edit" in run.detail and "Bash" in run.detail


def test_effect_passes_only_when_the_file_holds_the_new_text():
    recs = _records("claude-code-tool.capture.jsonl")
    want = kinds.Effect("notes.txt", "beta")
    for found, ok in (("alpha beta\n", True), ("alpha\n", False), (None, False)):
        checks, _ = turns.capture_checks(recs, tool_turn=True, rc=0, final_text="Done.", effect=(want, found))
        effect = next(c for c in checks if c.id == "CL-EFFECT")
        assert effect.ok is ok, effect.detail
    assert "not found" in effect.detail


def _image_turn(result: list | str) -> list[dict]:
    """A Messages capture: Read called, then its result sent back as ``result``."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/s.png"}}
    frames = [{"event": None, "data": json.dumps(d)} for d in (
        {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {**call, "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                              "partial_json": json.dumps(call["input"])}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"})]
    first = {"method": "POST", "url": "/v1/messages", "status": 200, "frames": frames, "request_body": {}}
    second = {"method": "POST", "url": "/v1/messages", "status": 200, "frames": [], "request_body": {"messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]}}
    return [first, second]


def test_image_passes_only_when_a_result_carries_an_image_block():
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]
    checks, _ = turns.capture_checks(_image_turn(image), tool_turn=True, rc=0, final_text="ok", tool="Read",
                                     image=True)
    assert [c.ok for c in checks] == [True, True, True, True], [(c.id, c.detail) for c in checks]
    checks, _ = turns.capture_checks(_image_turn("[binary file]"), tool_turn=True, rc=0, final_text="ok",
                                     tool="Read", image=True)
    assert checks[-1].id == "CL-IMAGE" and not checks[-1].ok


def test_a_failed_tool_kind_says_what_the_client_sent_back():
    """The client's own words for the call (an error result, Codex's "aborted") are in the failed check."""
    recs = _image_turn("aborted")
    checks, _ = turns.capture_checks(recs, tool_turn=True, rc=0, final_text="ok", tool="Read",
                                     effect=(kinds.Effect("notes.txt", "beta"), "alpha"))
    assert checks[-1].id == "CL-EFFECT" and not checks[-1].ok and "'aborted'" in checks[-1].detail
    recs[1]["request_body"]["messages"][0]["content"][0].update(is_error=True, content="InputValidationError: x")
    checks, _ = turns.capture_checks(recs, tool_turn=True, rc=0, final_text="ok", tool="Read")
    run = next(c for c in checks if c.id == "CL-TOOL-RUN")
    assert not run.ok and "InputValidationError: x" in run.detail


# -- run_turn with a tool kind's spec (stand-in client against the reference server) -------------

_EDITOR = r'''
import json, os, sys, httpx
prompt = sys.argv[1]
body = {"model": sys.argv[2], "max_tokens": 1024, "stream": False, "messages": [{"role": "user", "content": prompt}],
        "tools": [{"name": "Edit", "input_schema": {"type": "object", "properties": {
            "file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}},
            "required": ["file_path", "old_string", "new_string"]}}]}
h = {"x-api-key": os.environ["KEY"], "anthropic-version": "2023-06-01"}
r = httpx.post(os.environ["BASE"] + "/v1/messages", json=body, headers=h, timeout=30).json()
for call in [b for b in r["content"] if b["type"] == "tool_use"]:
    a = call["input"]
    if not os.environ.get("LAZY"):
        text = open(a["file_path"]).read()
        open(a["file_path"], "w").write(text.replace(a["old_string"], a["new_string"]))
    body["messages"] += [{"role": "assistant", "content": r["content"]}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call["id"], "content": "edited"}]}]
    r = httpx.post(os.environ["BASE"] + "/v1/messages", json=body, headers=h, timeout=30).json()
print(json.dumps({"type": "result", "is_error": False, "result": "".join(b.get("text", "") for b in r["content"])}))
'''


class _Editor(ClaudeCode):
    def __init__(self, lazy: bool = False):
        super().__init__()
        self.lazy = lazy

    def prepare(self, inst, work, base_url, model, api_key):
        prep = super().prepare(inst, work, base_url, model, api_key)
        prep.env.update(BASE=base_url, KEY=api_key, **({"LAZY": "1"} if self.lazy else {}))
        return prep

    def command(self, inst, prep, prompt, model):
        return [sys.executable, "-c", _EDITOR, prompt, model]


@pytest.mark.parametrize("lazy", [False, True])
def test_run_turn_writes_the_files_fills_cwd_and_judges_the_effect(reference_server, tmp_path, lazy):
    """The spec's file is in the working folder, {cwd} in the prompt is that folder, and CL-EFFECT reads
    the file before the private folder goes: an editor that says "edited" without editing fails it."""
    spec = kinds.TurnSpec("edit", "Use the Edit tool with file_path=`{cwd}/notes.txt` old_string=`alpha` "
                                  "new_string=`beta`.", tool="Edit", files={"notes.txt": b"alpha\n"},
                          effect=kinds.Effect("notes.txt", "beta"))
    r = turns.run_turn(_Editor(lazy), Install("claude-code", tmp_path / "c", version="1.0"), reference_server,
                       kinds.DEFAULT_MODEL, tmp_path / "out", turn="edit", prompt=spec.prompt, spec=spec, timeout=60)
    checks = {c.id: c for c in r.checks}
    assert "{cwd}" not in r.prompt and r.prompt.count("/notes.txt") == 1 and r.tool == "Edit"
    assert checks["CL-TOOL-RUN"].ok, checks["CL-TOOL-RUN"].detail
    assert checks["CL-EFFECT"].ok is (not lazy) and r.ok is (not lazy), checks["CL-EFFECT"].detail


# -- the impact document ------------------------------------------------------------------------

def _turn(ok: bool, error: str = "") -> dict:
    return {"ok": ok, "failed": [] if ok else ["CL-FINAL-TEXT: x"], "final_text": "", "error": error, "seconds": 1.0}


def test_judge_breaks_only_on_a_turn_that_passed_clean():
    clean = {"turns": {"text": _turn(True), "patch": _turn(True), "image": _turn(False)}}
    cell = fault_runs.judge({"turns": {"text": _turn(True), "patch": _turn(False, "aborted"),
                                       "image": _turn(False)}}, clean)
    assert cell["verdict"] == "breaks" and cell["broken_turns"] == ["patch"] and cell["unjudged_turns"] == ["image"]
    cell = fault_runs.judge({"turns": {"text": _turn(True), "image": _turn(False)}}, clean)
    assert cell["verdict"] == "unaffected" and cell["broken_turns"] == []


def test_merge_keeps_old_turns_and_judges_again():
    old = {"clients": {"codex": {"label": "Codex", "version": "1", "api": "responses"}},
           "clean": {"codex": {"turns": {"text": _turn(True)}}},
           "faults": {"f": {"codex": {"turns": {"text": _turn(True)}, "verdict": "unaffected"}, "_checks": ["X"]}}}
    new = {"measured": "2026-12-07T00:00:00Z", "clients": old["clients"],
           "clean": {"codex": {"turns": {"patch": _turn(True)}}},
           "faults": {"f": {"codex": {"turns": {"patch": _turn(False, "aborted")}}, "_checks": ["X"]}}}
    got = fault_runs.merge(old, new)
    cell = got["faults"]["f"]["codex"]
    assert set(cell["turns"]) == {"text", "patch"} and cell["verdict"] == "breaks" and cell["broken_turns"] == ["patch"]
    assert set(got["clean"]["codex"]["turns"]) == {"text", "patch"} and got["measured"] == new["measured"]
    assert old["faults"]["f"]["codex"]["verdict"] == "unaffected"  # the old document is left alone


def test_coverage_missing_and_the_unmeasurable():
    data: dict = {"faults": {f: {"codex": {"turns": {"text": _turn(True)}}} for f in list(FAULTS)[:3]}}
    assert fault_runs.missing(data) == [f for f in FAULTS if f not in list(FAULTS)[:3]
                                        and f not in fault_runs.NOT_MEASURABLE]
    fault_runs.mark_unmeasurable(data)
    assert data["faults"]["stall-stream"]["_not_measurable"]
    assert fault_runs.coverage(data) == (f"3 of {len(FAULTS)} faults measured, 1 not measurable, "
                                         f"{len(FAULTS) - 4} missing")
    assert set(fault_runs.NOT_MEASURABLE) <= set(FAULTS)


def test_runs_for_fault_keeps_other_apis_to_their_own_faults():
    runs = fault_runs.DEFAULT_RUNS
    assert fault_runs.runs_for_fault("rs-custom-call-as-function", runs) == [("codex", None), ("openclaw", "responses")]
    assert fault_runs.runs_for_fault("chat-no-done", runs) == [("openclaw", "chat")]
    assert fault_runs.runs_for_fault("invalid-tool-json", runs) == [("claude-code", None), ("codex", None),
                                                                    ("openclaw", None)]


def test_the_overflow_session_becomes_the_overflow_turns():
    assert set(fault_runs.overflow_cases(("overflow-500",))) == {"correct", "500", "usage-correct", "compact-500"}
    obs = {"rc": 1, "client_error": "API Error: 500", "outcome": "no compaction; broke", "seconds": 9.0}
    doc = {"clients": {"claude-code": "2.1.197"},
           "cases": {"claude-code m": {"correct": {"rc": 0, "outcome": "compacted"}, "500": obs}}}
    from harnesscheck.agents.clients import overflow

    doc["cases"] = {f"claude-code {overflow.MODELS['claude-code'][0]}": doc["cases"]["claude-code m"],
                    "claude-code other-model": {"500": {"rc": 0}}}
    part = fault_runs.from_overflow(doc)
    assert part["clients"]["claude-code"] == {"label": "Claude Code", "version": "2.1.197", "api": "anthropic"}
    assert part["clean"]["claude-code"]["turns"]["overflow"]["ok"] is True
    cell = fault_runs.merge({}, part)["faults"]["overflow-500"]["claude-code"]
    assert cell["verdict"] == "breaks" and cell["turns"]["overflow"]["error"] == "API Error: 500"
    # Codex's own compaction request refused: judged against the clean usage case
    doc = {"clients": {"codex": "0.171.0"}, "cases": {f"codex {overflow.MODELS['codex'][0]}": {
        "correct": {"rc": 1, "client_error": "ran out of room"}, "usage-correct": {"rc": 0},
        "compact-500": {"rc": 1, "client_error": "Reconnecting... 1/5"}}}}
    part = fault_runs.from_overflow(doc)
    assert part["clean"]["codex"]["turns"]["overflow-compact"]["ok"] is True
    cell = fault_runs.merge({}, part)["faults"]["overflow-500"]["codex"]
    assert cell["verdict"] == "breaks" and cell["broken_turns"] == ["overflow-compact"]


def test_prune_drops_short_turns_of_faults_met_only_at_the_window():
    data = {"clean": {"codex": {"turns": {"text": _turn(True), "overflow": _turn(True)}}},
            "faults": {"overflow-500": {"codex": {"turns": {"text": _turn(True), "overflow": _turn(False)}},
                                        "openclaw": {"turns": {"text": _turn(True)}}}}}
    fault_runs.prune(data)
    cells = data["faults"]["overflow-500"]
    assert list(cells) == ["codex"] and list(cells["codex"]["turns"]) == ["overflow"]
    assert cells["codex"]["verdict"] == "breaks"


def test_the_shipped_impact_file_covers_every_fault():
    """conformance/impact.json: every reference-server fault measured with a client on the turns of its tool
    kinds, or marked not measurable with why; dated, the client versions named; the cells in the schema
    conformance/impact.py reads (faults -> client -> turns -> {ok, failed, final_text, error, seconds})."""
    from harnesscheck.conformance import impact

    data = impact.load()
    assert data.get("measured") and all(c.get("version") for c in data["clients"].values())
    assert [f for f in fault_runs.missing(data) if f not in fault_runs.PENDING] == [], fault_runs.coverage(data)
    assert set(fault_runs.PENDING) <= set(fault_runs.missing(data)), "a measured fault is still listed as pending"
    for fault in FAULTS:
        if fault in fault_runs.PENDING:
            continue
        cells = fault_runs.client_cells(data, fault)
        assert cells or data["faults"][fault]["_not_measurable"], fault
        for key, cell in cells.items():
            assert key in data["clients"] and cell["verdict"] in ("breaks", "unaffected"), (fault, key)
            for name, turn in cell["turns"].items():
                assert {"ok", "failed", "final_text", "error", "seconds"} <= set(turn), (fault, key, name)
    tool_kinds = {n for f in FAULTS for c in fault_runs.client_cells(data, f).values() for n in c["turns"]}
    assert {"read", "edit", "image", "patch", "shell", "overflow"} <= tool_kinds


def test_markdown_has_a_row_per_fault_and_says_what_broke():
    clean = {"codex": {"turns": {"text": _turn(True), "patch": _turn(True)}}}
    bad = {"ok": False, "failed": ["CL-EFFECT: notes.txt holds 'alpha'"], "final_text": "", "error": "",
           "seconds": 1.0}
    data = {"clients": {"codex": {"label": "Codex", "version": "0.171.0", "api": "responses"}}, "clean": clean,
            "faults": {"rs-custom-call-as-function": {"codex": {"turns": {"text": _turn(True), "patch": bad}}}}}
    data = fault_runs.merge({}, data)
    fault_runs.mark_unmeasurable(data)
    table = fault_runs.markdown(data).splitlines()
    assert table[0] == "| fault | Codex 0.171.0 |" and len(table) == 2 + len(FAULTS)
    assert "| `rs-custom-call-as-function` | **breaks** (patch: CL-EFFECT) |" in table
    assert any(row.startswith("| `stall-stream` | not measurable: a transport fault") for row in table)
    assert "| `rs-sequence-gap` | not measured |" in table


def test_verify_runs_every_tool_kind_and_keeps_turns_the_kit_could_not_run_apart(reference_server, tmp_path,
                                                                                  monkeypatch):
    """verify_clients runs the client's VERIFY turns one by one; a turn the kit could not start (Codex's
    gpt-5.5 profile without that catalog entry: the install here has no binary to list it) is `not_run`,
    and the other turns still give the verdict."""
    from harnesscheck.agents.clients import codex as codex_mod
    from harnesscheck.agents.clients import verify

    class StandIn(codex_mod.Codex):  # Codex's turns, run by the Messages stand-in script of _Editor
        def prepare(self, inst, work, base_url, model, api_key):
            prep = super().prepare(inst, work, base_url, model, api_key)
            prep.env.update(BASE=base_url, KEY=api_key)
            return prep

        def command(self, inst, prep, prompt, model):
            return [sys.executable, "-c", _EDITOR, prompt, model]

        parse = ClaudeCode.parse

    inst = Install("codex", tmp_path / "cache" / "codex", version="0.0.1")
    monkeypatch.setattr(verify, "prepare_clients", lambda runs, install_missing: ([("codex", StandIn(), inst)], {}))
    got = verify.verify_clients(reference_server, kinds.DEFAULT_MODEL, None, ["responses"], tmp_path / "out",
                                timeout=60)
    codex = got["clients"]["codex"]
    assert list(codex["turns"]) == ["text", "tool"] and not codex["skipped"], codex
    assert set(codex["not_run"]) == {"patch", "shell"} and "catalog" in codex["not_run"]["patch"], codex["not_run"]
    assert codex["turns"]["text"]["ok"] and codex["measured"] in ("works", "breaks")


@pytest.mark.parametrize("args,words", [(["--fault", "nope"], "--fault: unknown fault 'nope' (all, missing"),
                                        (["--fault", "rs-sequence-gap", "--turn", "nope"], "--turn: unknown turn 'nope'")])
def test_faults_usage_errors_are_one_line(tmp_path, args, words):
    from tests.cli.helpers import harnesscheck

    ran = harnesscheck("clients", "--faults", *args, "--impact", str(tmp_path / "i.json"), "--out", "o", cwd=tmp_path)
    assert ran.rc == 2 and words in ran.err and "Traceback" not in ran.err, ran.err
    assert not (tmp_path / "i.json").exists()
