"""The report of a faulty run, opened in headless Chromium (issue 20's "done when"): a real suite run
against the embedded reference server with one fault, its report built as `run` builds it, and the
page laid out at a desktop and a narrow width. A script added to a copy of the page measures the
layout and writes what it found into the DOM, which `chromium --dump-dom` returns."""

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

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FAULT = "an-missing-block-stop"  # AN-STREAM-003 fails on it; AN-STREAM-001 still passes
FAILING, PASSING = "d-AN-STREAM-003-anthropic", "d-AN-STREAM-001-anthropic"

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} not installed (apt-get install -y chromium, or set $CHROMIUM)",
)

# Opens every case, then measures: page width, the timeline pictures, the wire logs of two cases,
# the fault-matrix section, and matrix cells pushed off screen or too narrow for their text.
PROBE = """
<script>
document.querySelectorAll("details").forEach(d => d.open = true);
const box = e => { const r = e.getBoundingClientRect();
                   return {w: r.width, h: r.height, left: r.left, right: r.right}; };
const log = id => {
  const rows = [...document.querySelectorAll("#" + id + " table.wirelog tbody tr:not(.gap)")];
  return {rows: rows.length, numbers: rows.slice(0, 5).map(r => r.cells[0].textContent.trim()),
          times: rows.slice(0, 5).map(r => r.cells[1].textContent.trim()),
          focus: rows.filter(r => r.classList.contains("focus")).map(r => r.cells[0].textContent.trim()),
          missing: (document.querySelector("#" + id + " .no-transcript") || {}).textContent || null};
};
const fm = document.getElementById("faults");
const squeezed = [...document.querySelectorAll("table.matrix > tbody > tr > td")]
  .filter(td => td.getClientRects().length && td.textContent.trim())  // shown cells with text
  .filter(td => td.scrollWidth > td.clientWidth + 1 || box(td).w < 20 || box(td).right > innerWidth + 1)
  .map(td => td.textContent.trim().slice(0, 40));
const small = [...document.querySelectorAll("table.matrix td, .case summary, table.wirelog td")]
  .filter(e => parseFloat(getComputedStyle(e).fontSize) < 10).length;
const out = {
  innerWidth: innerWidth, scrollWidth: document.documentElement.scrollWidth,
  bodyScrollWidth: document.body.scrollWidth,
  timelines: [...document.querySelectorAll("svg.timeline")].map(box),
  failing: log("%(failing)s"), passing: log("%(passing)s"),
  timelineOfFailing: !!document.querySelector("#%(failing)s svg.timeline"),
  faultSection: fm ? {caught: [...fm.querySelectorAll("td.g.caught")].map(td => td.title),
                      heading: fm.querySelector("h2").textContent} : null,
  squeezed: squeezed, small: small,
};
const pre = document.createElement("pre");
pre.id = "probe-result";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
""" % {"failing": FAILING, "passing": PASSING}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("faulty")
    options = SuiteOptions(select="test_streams", apis="anthropic,chat", server_args=(f"--fault={FAULT}",))
    doc = run_suite(options, out, subprocess_run=True, quiet=True)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    assert outcomes["AN-STREAM-003"] == "fail" and outcomes["AN-STREAM-001"] == "pass", outcomes
    write_report([out / "results.json"], out / "report.html")
    return out / "report.html"


# Headless Chromium keeps a window at least 500 px wide, so the page is laid out in an iframe of the
# width asked for; the frame's own script measures, the outer page copies the result out.
FRAME = """<!doctype html><html><body style="margin:0"><iframe id="f" src="%(src)s"
 style="width:%(width)dpx;height:1000px;border:0"
 onload="const r = this.contentDocument.getElementById('probe-result');
 const p = document.createElement('pre'); p.id = 'frame-result'; p.textContent = r ? r.textContent : 'null';
 document.body.appendChild(p)"></iframe></body></html>"""


def _probe(report: Path, width: int) -> dict[str, Any]:
    """Lay the report out at `width` CSS px in headless Chromium and return what PROBE measured."""
    page = report.with_name(f"probe-{width}.html")
    html = report.read_text(encoding="utf-8")
    page.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    frame = report.with_name(f"frame-{width}.html")
    frame.write_text(FRAME % {"src": page.name, "width": width}, encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="hc-chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--allow-file-access-from-files", f"--user-data-dir={profile}",
             f"--window-size={width + 100},1000",
             "--dump-dom", frame.as_uri()],
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
    found = re.search(r'<pre id="frame-result">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    text = html_lib.unescape(found.group(1))
    result = json.loads(text)
    assert result is not None, "the probe did not run in the report"
    return result


def test_report_of_a_faulty_run_at_desktop_width(report: Path) -> None:
    seen = _probe(report, 1280)
    assert seen["innerWidth"] == 1280
    assert seen["scrollWidth"] <= 1280 and seen["bodyScrollWidth"] <= 1280, seen
    assert seen["squeezed"] == [] and seen["small"] == 0, seen["squeezed"]
    # a timeline per streamed case, drawn at a readable size, the failing case's among them
    assert len(seen["timelines"]) >= 5 and seen["timelineOfFailing"]
    assert all(t["w"] > 600 and t["h"] > 100 for t in seen["timelines"]), seen["timelines"][:3]
    # the numbered wire log, with arrival times, of the failing case (its finding's frame marked) ...
    failing = seen["failing"]
    assert failing["missing"] is None and failing["rows"] > 20
    assert failing["numbers"] == ["0", "1", "2", "3", "4"]
    assert all(re.fullmatch(r"\d+\.\d", t) for t in failing["times"]), failing["times"]
    assert len(failing["focus"]) == 1
    # ... and of a passing case
    passing = seen["passing"]
    assert passing["missing"] is None and passing["rows"] > 20 and passing["numbers"][0] == "0"
    assert passing["focus"] == []
    # the fault-matrix section: this run's fault, caught by the check the catalog maps to it
    assert seen["faultSection"] is not None and "Fault matrix" in seen["faultSection"]["heading"]
    assert any(t.startswith(f"{FAULT} × AN-STREAM-003") for t in seen["faultSection"]["caught"])


def test_report_of_a_faulty_run_at_narrow_width(report: Path) -> None:
    seen = _probe(report, 420)
    assert seen["innerWidth"] == 420
    assert seen["scrollWidth"] <= 420, seen["scrollWidth"]  # wide parts scroll inside their own boxes
    assert seen["squeezed"] == [], seen["squeezed"]  # every matrix cell on screen and wide enough to read
    assert seen["small"] == 0
    assert seen["failing"]["rows"] > 20 and seen["timelineOfFailing"]
