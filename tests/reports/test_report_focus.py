"""The report opens a failing case at its frame (issue 45): a client session's failure names the frame
its finding holds, the page links to that frame's row, and Chromium opens the wire log scrolled to
it, highlighted, with the page itself left at its top; the per-client lines are shown whole."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.conformance.runner import SuiteOptions, run_suite
from harnesscheck.reports.html import write_report
from tests.reports import factory

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                    reason=f"{CHROMIUM} not installed (apt-get install -y chromium, or set $CHROMIUM)")

# Measures the page as laid out (reading a box lays it out, and the log's initial scroll target with it),
# without opening, clicking or scrolling anything; it runs as the page's last element, so no timer is needed.
PROBE = """
<script>
const out = {scrollY: scrollY, logs: {}, clipped: []};
document.querySelectorAll("details.case[open]").forEach(d => {
  const wrap = d.querySelector(".log-wrap"), row = d.querySelector("tr.focus");
  if (!wrap) return;
  const w = wrap.getBoundingClientRect(), r = row && row.getBoundingClientRect();
  out.logs[d.id] = {scrollTop: wrap.scrollTop, scrollable: wrap.scrollHeight > wrap.clientHeight,
                    focus: row ? row.cells[0].textContent : null,
                    visible: r ? r.top >= w.top && r.bottom <= w.bottom : null};
});
out.clipped = [...document.querySelectorAll("table.clients td")]
  .filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent);
const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""


def _probe(report: Path, width: int = 1280) -> dict[str, Any]:
    page = report.with_name("probe.html")
    page.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="hc-chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--window-size={width},900",
             "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return result


def _long_stream(n: int) -> dict[str, Any]:
    frames = [{"index": i, "kind": "event", "event": "content_block_delta", "t_ns": 1_000_000 * (2 + i),
               "data": json.dumps({"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": f"word {i}"}})} for i in range(n)]
    return {"schema": 1, "api": "anthropic", "method": "POST", "url": "http://127.0.0.1:8123/v1/messages",
            "request_headers": {}, "request_body": {"stream": True}, "status": 200, "response_headers": {},
            "frames": frames, "chunks": [], "body": None, "error": None, "error_kind": None,
            "timings": {"started_at": 0, "start_ns": 0, "headers_ns": 1_000_000, "first_frame_ns": 2_000_000,
                        "end_ns": (3 + n) * 1_000_000}}


@needs_chromium
def test_chromium_opens_the_log_at_the_failing_frame_and_shows_client_lines_whole(tmp_path: Path) -> None:
    doc = factory.results()
    failing = doc["checks"][0]
    failing["transcript"] = "transcripts/AN-STREAM-001.json"
    failing["finding"]["frame_index"] = 67
    failing["clients"] = {"Claude Code 2.1.197": "no measured impact", "OpenClaw 2026.9.6": "would break",
                          "Codex 0.130.0 (gpt-5.5 catalog profile)": "unaffected"}
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "AN-STREAM-001.json").write_text(json.dumps(_long_stream(90)))
    (tmp_path / "results.json").write_text(json.dumps(doc))
    write_report([tmp_path / "results.json"], tmp_path / "report.html")
    seen = _probe(tmp_path / "report.html")
    log = seen["logs"]["d-AN-STREAM-001-anthropic"]
    assert log["scrollable"] and log["focus"] == "67", log
    assert log["visible"] and log["scrollTop"] > 500, log  # frame #67 in view, not frame #0
    assert seen["scrollY"] == 0  # the page itself opens at its top
    assert seen["clipped"] == [], seen["clipped"]  # "no measured impact", not "no measure…"


@pytest.fixture(scope="module")
def client_session_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("client-session")
    options = SuiteOptions(select="AN-CLIENT-001", apis="anthropic", server_args=("--fault=an-block-index-skip",))
    run_suite(options, out, subprocess_run=True, quiet=True)
    write_report([out / "results.json"], out / "report.html")
    return out


def test_a_client_session_failure_points_at_the_frame_its_message_names(client_session_run: Path) -> None:
    # issue 45: client-session failures named "frame #2" and the report showed frames #21-#24 (no finding)
    doc = json.loads((client_session_run / "results.json").read_text())
    (check,) = [c for c in doc["checks"] if c["id"] == "AN-CLIENT-001"]
    assert check["outcome"] == "fail" and check["level"] == "MUST", check["message"]
    named = int(re.search(r"at frame #(\d+)", check["message"]).group(1))
    # the finding is the session's rule; the stream rule the answer broke is named in it (and in rules_failed)
    assert check["finding"]["frame_index"] == named and check["finding"]["rule"] == "AN-CLIENT-001:grammar"
    assert "AN-GRAMMAR-INDEX" in check["finding"]["observed"] + check["message"]
    assert check["rules_failed"][0] == "AN-CLIENT-001:grammar"
    transcript = json.loads((client_session_run / check["transcript"]).read_text())
    assert any(f["index"] == named for f in transcript["frames"])
    html = (client_session_run / "report.html").read_text()
    target = f"d-AN-CLIENT-001-anthropic-f{named}"
    assert f'<tr id="{target}" class="event focus">' in html and f'href="#{target}">fail</a>' in html


@needs_chromium
def test_chromium_opens_the_client_sessions_log_at_its_frame(client_session_run: Path) -> None:
    seen = _probe(client_session_run / "report.html")
    log = seen["logs"]["d-AN-CLIENT-001-anthropic"]
    assert log["focus"] is not None and log["visible"], log
