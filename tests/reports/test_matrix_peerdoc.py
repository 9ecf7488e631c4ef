"""The compatibility matrix (reports/matrix.py) and a peer's page (reports/peerdoc.py) on documents written by
hand: a changed outcome is a change, an unchanged one is not; a page keeps its verified marks and notes only while
a row's verdict stays the same."""

from __future__ import annotations

from harnesscheck.reports import matrix, peerdoc


def _doc(*checks: dict, endpoint: str = "http://a") -> dict:
    return {"run": {"endpoint": endpoint, "model": "m", "started_at": "2026-12-07T08:00:00+00:00",
                    "apis": ["chat"], "settings": {"tries": 1}}, "checks": list(checks)}


def _check(cid: str, outcome: str, level: str = "MUST", **more: object) -> dict:
    return {"id": cid, "api": "chat", "title": f"title of {cid}", "outcome": outcome, "level": level,
            "rules_failed": [cid] if outcome == "fail" else [], "message": f"{cid} {outcome}", **more}


def test_a_changed_outcome_is_a_change_and_a_same_one_is_not() -> None:
    a = matrix.Run("clean", _doc(_check("CH-STREAM-001", "pass"), _check("CH-STREAM-002", "pass"),
                                 _check("CH-ERR-001", "inconclusive", cause="timeout")))
    b = matrix.Run("fault", _doc(_check("CH-STREAM-001", "pass"), _check("CH-STREAM-002", "fail"),
                                 _check("CH-ERR-001", "fail", level="SHOULD")))
    m = matrix.build([a, b])
    assert [r.check for r in m.changes] == ["CH-STREAM-002", "CH-ERR-001"]
    assert m.rows[0].cells == ("pass", "pass") and not m.rows[0].changed
    assert m.rows[1].cells == ("pass", "FAIL MUST")
    assert m.rows[2].cells == ("inconclusive (timeout)", "fail SHOULD")
    md = matrix.to_markdown(m)
    assert "| **CH-STREAM-002** | chat | **pass** | **FAIL MUST** |" in md
    assert "| CH-STREAM-001 | chat | pass | pass |" in md
    assert "2 of 3 checks differ" in md
    text = matrix.to_text(m)
    assert any(line.startswith("*") and "CH-STREAM-002" in line for line in text.splitlines())
    assert not any(line.startswith("*") and "CH-STREAM-001" in line for line in text.splitlines())
    page = matrix.to_html(m)
    assert page.count('class="changed"') == 2


def test_a_check_one_run_lacks_is_absent_and_a_change() -> None:
    m = matrix.build([matrix.Run("a", _doc(_check("X-1", "pass"))), matrix.Run("b", _doc())])
    assert m.rows[0].cells == ("pass", matrix.ABSENT) and m.rows[0].changed


def test_a_page_keeps_a_mark_while_the_verdict_stays_and_drops_it_when_it_changes() -> None:
    first = peerdoc.render(_doc(_check("CH-A", "fail"), _check("CH-B", "fail"), _check("CH-C", "pass")),
                           peerdoc.Header(peer="Peer"))
    assert peerdoc.unverified_failures(first) == ["CH-A", "CH-B"]
    marked = "\n".join(line[:-3] + " curl, 2026-12-07 |" if line.startswith(("| CH-A ", "| CH-B ")) else line
                       for line in first.splitlines())
    marked = marked.replace("(none yet: write here how each failure was verified by hand)", "CH-A: checked with curl.")
    assert peerdoc.unverified_failures(marked) == []
    # CH-A fails the same way again; CH-B now fails at SHOULD: its mark goes, CH-A's stays, the notes stay.
    again = peerdoc.render(_doc(_check("CH-A", "fail"), _check("CH-B", "fail", level="SHOULD"),
                                _check("CH-C", "pass")), peerdoc.Header(peer="Peer"), previous=marked)
    assert peerdoc.unverified_failures(again) == ["CH-B"]
    assert "| curl, 2026-12-07 |" in next(line for line in again.splitlines() if line.startswith("| CH-A "))
    assert "CH-A: checked with curl." in again


def test_a_page_row_shows_levers_and_escapes_pipes() -> None:
    c = _check("CH-T", "fail", message="a | b", levers={"tried": [{}, {}], "judged": {"t0": ["thinking-off"]}})
    page = peerdoc.render(_doc(c), peerdoc.Header(peer="P", commit="abc1234", versions="v1"))
    row = next(line for line in page.splitlines() if line.startswith("| CH-T "))
    assert "thinking-off (2 tries)" in row and "a \\| b" in row
    assert "kit commit `abc1234`" in page and "(v1)" in page
    assert peerdoc.previous_marks(page)["CH-T"][0] == ("fail", "MUST", "CH-T")
