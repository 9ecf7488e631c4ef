"""Issue 41: findings that name their cause, one per deviation, judged rather than timed out.

Each case is the suite (the checks named) forked from a warm process against a reference server with a
fault or a test process in front of one."""

from __future__ import annotations

from pathlib import Path

from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions
from tests.conftest import FAST


def _brief(doc: dict) -> dict[str, str]:
    return {c["id"]: f"{c['outcome']} {c['level']} {c.get('rules_failed')}: {c['message'][:300]}" for c in doc["checks"]}


def test_a_bad_request_accepted_by_a_slow_model_is_judged_not_timed_out(tmp_path: Path) -> None:
    """A slow model (300 ms a token) that accepts a bad role: the probe asks for the API's smallest answer, so the
    acceptance shows at once (CH-ERR-001 ended inconclusive after its timeout on a slow model). Responses' smallest
    answer is 16 tokens (its minimum), longer than this deadline allows at this speed: not selected."""
    server_args = ("--fault=lenient-input", "--decode-ms=300")
    doc = run_forked(SuiteOptions(select="AN-ERR-001 or CH-ERR-001", server_args=server_args, timeout=3.0), tmp_path)
    assert len(doc["checks"]) == 2, _brief(doc)
    for c in doc["checks"]:
        assert c["outcome"] == "fail", _brief(doc)
        assert c["rules_failed"][0] == f"{c['id']}:lenient", _brief(doc)


def _through_keepalive_proxy(tmp_path: Path, *args: str) -> dict:
    import sys

    from harnesscheck.conformance.runner import run_suite
    from harnesscheck.reference_server.launch import ServerProcess
    from tests.processes import http_process

    root = Path(__file__).resolve().parents[2]
    with ServerProcess(list(FAST)) as upstream, http_process(
            lambda port: [sys.executable, "-m", "tests.conformance.keepalive_proxy", "--upstream", upstream.url,
                          "--port", str(port), *args], "/v1/models", cwd=root, startup_s=30) as url:
        return run_suite(SuiteOptions(endpoint=url, select="SDK-001", timeout=30.0, preflight=False), tmp_path,
                         subprocess_run=True, quiet=True)


def test_an_answer_dropped_mid_way_stays_an_sdk_finding_though_the_sdk_retries_it(tmp_path: Path) -> None:
    """The first non-streamed answer is cut a few bytes after its headers: the SDK's default client retries it
    and gets a whole answer, but a client without retries fails there: still AN-SDK-001's finding."""
    doc = _through_keepalive_proxy(tmp_path, "--idle", "1000", "--cut-bodies", "1")
    failed = [c for c in doc["checks"] if c["outcome"] == "fail"]
    assert len(failed) == 1 and failed[0]["level"] == "MUST", _brief(doc)
    assert "then the connection dropped mid-answer" in failed[0]["message"], failed[0]["message"]


def test_the_sdk_oracles_retry_a_closed_keep_alive_connection_as_the_sdks_do(tmp_path: Path) -> None:
    """A server that closes kept-alive connections when the next request comes (idle 0: the race of a 1 s idle
    timeout, every time): the SDKs' default clients retry the connection error, so the oracles pass and note
    the retry (with max_retries=0, AN-SDK-001 failed at MUST with "Server disconnected without sending a
    response" on llama-server)."""
    doc = _through_keepalive_proxy(tmp_path, "--idle", "0")
    assert {c["id"]: c["outcome"] for c in doc["checks"]} == dict.fromkeys(
        ("AN-SDK-001", "CH-SDK-001", "RS-SDK-001"), "pass"), _brief(doc)
    notes = [n for c in doc["checks"] for n in c.get("notes", [])]
    assert any("retried as its default client does (a connection error before any answer" in n for n in notes), notes


def test_an_estimating_count_tokens_is_cross_checked_before_it_is_a_yardstick(tmp_path: Path) -> None:
    """count_tokens answers a local estimate (fault count-tokens-estimate, as a gateway's did: 129 for a prompt its
    usage counted 324): AN-USAGE-001 fails (SHOULD) naming both counts; the estimate grows with each part of the
    request, so AN-USAGE-005 holds, and message_start, judged against the usage, agrees."""
    doc = run_forked(SuiteOptions(select="AN-USAGE-001 or AN-USAGE-005",
                                  server_args=("--fault=count-tokens-estimate",)), tmp_path)
    by_id = {c["id"]: c for c in doc["checks"]}
    first = by_id["AN-USAGE-001"]
    assert (first["outcome"], first["level"]) == ("fail", "SHOULD"), _brief(doc)
    assert "count_tokens answers" in first["message"] and "non-streamed usage counts" in first["message"], first
    assert "message_start" not in first["message"], first["message"]  # message_start agrees with the usage
    assert by_id["AN-USAGE-005"]["outcome"] == "pass", _brief(doc)


def test_no_models_routes_with_path_echoing_404s_is_one_route_finding(tmp_path: Path) -> None:
    """A server with no /v1/models routes at all whose every 404 echoes its path (the missing-route probe
    recognised only identical bodies: AN-ROUTE-001..004 failed, one at MUST, titled after '/' and %2F): one
    finding, AN-ROUTE-004's, the others skipped saying so."""
    from harnesscheck.conformance.runner import run_suite
    from tests.conformance.test_plain_model import plain_server

    with plain_server("clean,no-models-routes") as url:
        doc = run_suite(SuiteOptions(endpoint=url, model="plain/tiny-model", apis="anthropic,chat", select="AN-ROUTE",
                                     timeout=20.0), tmp_path, subprocess_run=True, quiet=True)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    assert outcomes == {"AN-ROUTE-001": "skip", "AN-ROUTE-002": "skip", "AN-ROUTE-003": "skip",
                        "AN-ROUTE-004": "fail"}, _brief(doc)
    route = next(c for c in doc["checks"] if c["id"] == "AN-ROUTE-004")
    assert "no GET /v1/models/{id} route (nor GET /v1/models)" in route["message"], route["message"]


def test_a_refused_forced_choice_is_charged_to_the_check_that_forces(tmp_path: Path) -> None:
    """A 400 for `tool_choice: any` / `required`: <P>-TOOLS-001 fails on it; <P>-TOOLS-006, which forces a call of
    a strict tool, judges the strict arguments on an unforced answer and does not fail again on the refusal."""
    from tests.conformance.test_true_verdicts import through_reasoning_proxy

    doc = through_reasoning_proxy(tmp_path, "AN-TOOLS-001 or AN-TOOLS-006 or CH-TOOLS-006", "--modes",
                                  "anthropic=refuse-forced,chat=refuse-forced,responses=refuse-forced")
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["AN-TOOLS-001"]["outcome"] == "fail", _brief(doc)
    for check_id in ("AN-TOOLS-006", "CH-TOOLS-006"):
        assert by_id[check_id]["outcome"] in ("pass", "inconclusive"), _brief(doc)
        assert any("refused the forced choice" in n for n in by_id[check_id].get("notes", [])), _brief(doc)


def test_usage_zero_on_every_turn_says_so(tmp_path: Path) -> None:
    """Usage that reads 0 on every turn was reported as "counts the new turn only": it counts nothing."""
    from tests.conformance.test_true_verdicts import through_reasoning_proxy

    doc = through_reasoning_proxy(tmp_path, "CH-CTX-002", "--modes", "chat=zero-usage")
    c = doc["checks"][0]
    assert c["outcome"] == "fail", _brief(doc)
    assert "reports 0 prompt tokens on every turn" in c["message"] and "new turn" not in c["message"], c["message"]


def test_calls_rendered_as_text_with_a_call_stop_reason_are_a_must_finding_and_no_tools_pass(tmp_path: Path) -> None:
    """A proxy renders every non-streamed call as text ("Tool usage: ...") and keeps stop_reason tool_use /
    finish_reason tool_calls (fault nonstream-calls-as-text): the shape is its own MUST finding
    (<P>-SHAPE-001:calls), and AN/CH-TOOLS-003 and -005, which passed on "no tool_use block", do not pass; with
    tool_choice none sent on as auto too (fault ignore-tool-choice), <P>-TOOLS-002 fails on the call as text."""
    select = " or ".join(f"{p}-{n}" for p in ("AN", "CH") for n in ("SHAPE-001", "TOOLS-003", "TOOLS-005"))
    doc = run_forked(SuiteOptions(select=select, apis="anthropic,chat",
                                  server_args=("--fault=nonstream-calls-as-text",)), tmp_path / "text")
    none = run_forked(SuiteOptions(select="AN-TOOLS-002 or CH-TOOLS-002", apis="anthropic,chat", server_args=(
        "--fault=nonstream-calls-as-text", "--fault=ignore-tool-choice")), tmp_path / "none")
    by_id = {c["id"]: c for c in doc["checks"] + none["checks"]}
    for p in ("AN", "CH"):
        shape = by_id[f"{p}-SHAPE-001"]
        assert (shape["outcome"], shape["level"], shape["rules_failed"]) == ("fail", "MUST", [f"{p}-SHAPE-001:calls"]), \
            _brief(doc)
        assert by_id[f"{p}-TOOLS-003"]["outcome"] == "inconclusive", _brief(doc)  # how many calls: unreadable
        assert by_id[f"{p}-TOOLS-005"]["outcome"] == "fail", _brief(doc)  # the forced call came back as text
        assert by_id[f"{p}-TOOLS-002"]["outcome"] == "fail", _brief(none)
        assert "answered with a call: " in by_id[f"{p}-TOOLS-002"]["message"], _brief(none)


def test_a_forced_call_cut_as_raw_markup_is_still_caught(tmp_path: Path) -> None:
    """Fault forced-cut-raw-markup (vLLM 0.32: the cut call not streamed as the model's raw <tool_call> text):
    <P>-TOOLS-005:markup fails, though the rule now wants an opened call, not a stray closing tag."""
    doc = run_forked(SuiteOptions(select="AN-TOOLS-005 or CH-TOOLS-005 or RS-TOOLS-005",
                                  server_args=("--fault=forced-cut-raw-markup",)), tmp_path)
    assert len(doc["checks"]) == 3, _brief(doc)
    for c in doc["checks"]:
        assert (c["outcome"], c["rules_failed"]) == ("fail", [f"{c['id']}:markup"]), _brief(doc)
        assert "'<tool_call>" in c["message"], _brief(doc)


def test_a_stream_without_indices_fails_the_index_rules_alone(tmp_path: Path) -> None:
    """Fault rs-no-indices (llama-server 11434's Responses events: no sequence_number, output_index or
    content_index): the items are placed by their item_id, so RS-STREAM-002 fails on the missing output_index
    alone, not on an item "never added" (RS-GRAMMAR-ITEM-ORDER) or a completed output the kit read as empty
    (RS-GRAMMAR-COMPLETED-OUTPUT), both listed against llama-server before; the client sessions likewise."""
    doc = run_forked(SuiteOptions(select="RS-STREAM-002 or RS-CLIENT-001 or RS-CLIENT-003", apis="responses",
                                  server_args=("--fault=rs-no-indices",)), tmp_path)
    by_id = {c["id"]: c for c in doc["checks"]}
    assert set(by_id) == {"RS-STREAM-002", "RS-CLIENT-001", "RS-CLIENT-003"}, _brief(doc)
    assert by_id["RS-STREAM-002"]["outcome"] == "fail", _brief(doc)
    assert by_id["RS-STREAM-002"]["rules_failed"] == ["RS-GRAMMAR-OUTPUT-INDEX"], _brief(doc)
    for check_id in ("RS-CLIENT-001", "RS-CLIENT-003"):
        assert by_id[check_id]["outcome"] == "fail", _brief(doc)
        assert by_id[check_id]["rules_failed"] == [f"{check_id}:grammar", "RS-GRAMMAR-OUTPUT-INDEX"], _brief(doc)
