"""The checks that send their own forced choice (AN/CH/RS-TOOLS-001, -005, -006), the strict-arguments
check (-004) and the long session (-CTX-002) drive a reasoning model down their path with the levers
before they say "not exercised" (issue 35).

Through tests/conformance/reasoning_proxy.py in its `cut` mode, a model that reasons to the output limit
unless thinking is turned off (vLLM 0.32's tiny Qwen3 under its qwen3 reasoning parser: a forced choice
answered with reasoning alone, cut by the limit). Before these checks went through `Session.until_taken`
each was "not exercised" with no lever tried; now each is judged on an answer with thinking off, marked
with its levers, and a forcing check keeps its own forced choice (only thinking off is pulled for it).
The fault direction: a planted fault behind the same proxy still fails the check it breaks.
"""

from __future__ import annotations

from pathlib import Path

from harnesscheck.conformance import levers
from tests.conformance.test_true_verdicts import REASONING_UPSTREAM, _bad, through_reasoning_proxy

CUT = "anthropic=cut,chat=cut,responses=cut"


def _through_cut_proxy(tmp_path: Path, select: str, *upstream_args: str, modes: str = CUT) -> dict:
    """The suite (checks `select`) through the reasoning proxy (`modes`: in `cut` mode for every API), in
    front of a reference server started with `upstream_args` (a fault)."""
    return through_reasoning_proxy(tmp_path, select, "--modes", modes, upstream=(*REASONING_UPSTREAM, *upstream_args))


def test_forcing_strict_and_session_checks_take_thinking_off_before_not_exercised(tmp_path: Path) -> None:
    doc = _through_cut_proxy(tmp_path, "TOOLS-001 or TOOLS-004 or TOOLS-005 or TOOLS-006 or CTX-002")
    assert _bad(doc) == [], "\n".join(_bad(doc))
    by_id = {c["id"]: c for c in doc["checks"]}
    ids = {f"{p}-{n}" for p in ("AN", "CH", "RS") for n in ("TOOLS-001", "TOOLS-004", "TOOLS-005", "TOOLS-006",
                                                              "CTX-002")}
    assert {i: by_id[i]["outcome"] for i in ids} == dict.fromkeys(ids, "pass"), \
        {i: by_id[i]["message"][:300] for i in ids if by_id[i]["outcome"] != "pass"}
    for check_id in ids:
        record = by_id[check_id]["levers"]
        tried, judged = record["tried"], record["judged"]
        # as built first: the proxy's model reasoned to the limit (what vLLM's tiny Qwen3 did)
        assert tried[0]["levers"] == [] and not tried[0]["took"], (check_id, tried)
        assert tried[0]["came_back"].startswith("reasoning only, no tool call, cut at"), (check_id, tried)
        assert any(t["took"] for t in tried), (check_id, tried)
        assert any({"thinking-off", "reasoning-minimal", "thinking-off-template"} & set(names)
                   for names in judged.values()), (check_id, judged)
        if check_id[3:] in ("TOOLS-001", "TOOLS-005", "TOOLS-006"):  # the forced choice stays the check's own
            pulled = {n for t in tried for n in t["levers"]} | {n for names in judged.values() for n in names}
            assert pulled <= levers.THINKING_OFF, (check_id, pulled)
    # the session keeps the thinking switch on every later turn, as a client keeps it, and the call forced on
    # its opening turn (levers.SESSIONS_KEEP_FORCING: it judges the usage of every turn, not the choice)
    for prefix in ("AN", "CH", "RS"):
        judged = by_id[f"{prefix}-CTX-002"]["levers"]["judged"]
        later = [names for label, names in judged.items() if label.startswith("long_session turn ")
                 and not label.startswith("long_session turn 0")]
        assert len(later) >= 9 and all("thinking-off" in names or "thinking-off-template" in names
                                       for names in later), judged
        assert all("tool-choice-required" in names for names in later), judged


def test_a_planted_fault_still_fails_behind_the_levers(tmp_path: Path) -> None:
    """strict-ignored (a strict tool's arguments not constrained) fails the strict checks, and
    ignore-tool-choice the forced modes, on the answers thinking off reached."""
    doc = _through_cut_proxy(tmp_path, "TOOLS-004 or TOOLS-006", "--fault", "strict-ignored")
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    assert outcomes == {f"{p}-TOOLS-{n}": "fail" for p in ("AN", "CH", "RS") for n in ("004", "006")}, \
        {c["id"]: c["message"][:200] for c in doc["checks"]}
    doc = _through_cut_proxy(tmp_path / "ignore", "TOOLS-001", "--fault", "ignore-tool-choice")
    failed = {c["id"]: c for c in doc["checks"]}
    assert {i: c["outcome"] for i, c in failed.items()} == {f"{p}-TOOLS-001": "fail" for p in ("AN", "CH", "RS")}
    assert all({"thinking-off", "reasoning-minimal", "thinking-off-template"} & {
        n for names in c["levers"]["judged"].values() for n in names} for c in failed.values()), failed


def test_where_no_lever_reaches_the_path_the_result_says_what_was_tried(tmp_path: Path) -> None:
    """A model that reasons to the limit whatever the levers (the proxy's never+cut): still not exercised,
    and the message lists each lever tried and what came back."""
    doc = _through_cut_proxy(tmp_path, "CH-TOOLS-001 or CH-TOOLS-005 or CH-CTX-002", modes="chat=never+cut")
    by_id = {c["id"]: c for c in doc["checks"]}
    assert {i: c["outcome"] for i, c in by_id.items()} == dict.fromkeys(
        ("CH-TOOLS-001", "CH-TOOLS-005", "CH-CTX-002"), "inconclusive"), by_id
    for check_id, pulled in (("CH-TOOLS-001", ("thinking-off", "thinking-off-template")),
                             ("CH-TOOLS-005", ("thinking-off", "thinking-off-template")),
                             ("CH-CTX-002", ("name-the-tool", "tool-choice-required", "thinking-off"))):
        message = by_id[check_id]["message"]
        assert by_id[check_id]["cause"] == "not-exercised", message
        assert "levers tried: as built -> reasoning only, no tool call, cut at 16 tokens (length)" in message, message
        assert all(lever in message for lever in pulled), (check_id, message)
        if check_id != "CH-CTX-002":
            assert "name-the-tool" not in message and "prefill" not in message, message


def test_the_sdk_oracles_sample_a_turn_refused_at_the_limit_with_the_levers(tmp_path: Path) -> None:
    """openai's chat helper refuses a length end (LengthFinishReasonError) and its Responses helper an
    incomplete one: before, CH/RS-SDK-001 were not exercised on the first such turn; now the turn is sampled
    again with thinking off (sent as extra_body), judged, and the later turn keeps the switch."""
    doc = _through_cut_proxy(tmp_path, "CH-SDK-001 or RS-SDK-001")
    by_id = {c["id"]: c for c in doc["checks"]}
    assert {i: c["outcome"] for i, c in by_id.items()} == {"CH-SDK-001": "pass", "RS-SDK-001": "pass"}, by_id
    for check in by_id.values():
        tried, judged = check["levers"]["tried"], check["levers"]["judged"]
        assert tried[0]["levers"] == [], tried
        assert tried[0]["came_back"].startswith("ended at the output limit"), tried
        for scenario in ("plain_text", "calculator", "interleaved", "parallel_tools"):
            assert "thinking-off" in judged[f"{scenario} turn 0 (the openai SDK)"], judged
        assert "thinking-off" in judged["calculator turn 1 (the openai SDK)"], judged


def test_a_peer_profile_that_plays_no_forced_answer_leaves_the_forced_modes_unjudged(tmp_path: Path) -> None:
    """Under --peer dynamo-mocker a forced request carries no scripted output (the mocker emits random tokens
    there; Dynamo 1.6.1's parser dropped them: an empty answer, read as "no call where one was required" at
    MUST): TOOLS-001 says it could not judge the forcing rather than failing it. The same check without the
    profile, against a server that ignores forcing, still fails (the rule is still judged where it can be)."""
    from harnesscheck.conformance.runner import SuiteOptions, run_suite

    def run(out: str, **options: str) -> dict:
        doc = run_suite(SuiteOptions(select="CH-TOOLS-001", apis="chat", tries=1,
                                     server_args=("--fault=ignore-tool-choice",), **options),
                        tmp_path / out, subprocess_run=True, quiet=True)
        return doc["checks"][0]

    plain, mocked = run("plain"), run("mocked", peer="dynamo-mocker")
    assert plain["outcome"] == "fail" and "forced" in " ".join(plain.get("rules_failed") or []), plain["message"]
    assert mocked["outcome"] == "inconclusive" and "dynamo-mocker" in mocked["message"], mocked["message"]
    assert not levers.plays_forced("dynamo-mocker") and levers.plays_forced("")
