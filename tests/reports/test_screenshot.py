"""The report looked at in a real browser: headless Chromium renders it and saves a PNG."""

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from harnesscheck.reports.html import render_report
from tests.reports import factory

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshot_report.py"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} not installed (apt-get install -y chromium, or set $CHROMIUM)",
)


def test_screenshot_of_the_report(tmp_path):
    html = tmp_path / "report.html"
    html.write_text(render_report(factory.results(), generated_at="test"), encoding="utf-8")
    png = tmp_path / "report.png"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(html), str(png), "--width", "1400", "--height", "2000"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 2000)
    assert len(data) > 50_000  # a rendered page with tables and plots, not a blank canvas

    import matplotlib.image as mpimg

    pixels = mpimg.imread(png)
    assert pixels[..., :3].std() > 0.05  # not a single colour


LOAD_PROBE = """
<script>
const y = e => e.getBoundingClientRect().top + scrollY;
const found = {};
for (const kind of ["concurrency", "rate"]) {
  const sec = document.getElementById("b-load-" + kind + "-ttft");
  const table = sec.querySelector("table.vllm"), img = sec.querySelector(".sweep img");
  const settings = sec.querySelector("details.settings");
  found[kind] = {section: y(sec), table: y(table), tableBottom: y(table) + table.offsetHeight,
                 plot: y(img), plotHeight: img.offsetHeight, plotWidth: img.offsetWidth,
                 settings: y(settings), settingsOpen: settings.open,
                 rows: table.querySelectorAll("tbody tr").length};
}
found.folded = [...document.querySelectorAll("details.bench.folded")].filter(d => !d.open).length;
found.scrollWidth = document.documentElement.scrollWidth;
const pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(found);
document.body.appendChild(pre);
</script>
"""


def test_a_load_report_in_chromium_shows_its_table_and_plot_on_the_first_screen(tmp_path):
    """Issue 33: the HTML report of a `bench load` run shows its vLLM-style table and sweep plot without
    scrolling through settings: both start within one 900 px screen of the sweep's heading, the
    settings are folded below them, and the sweep's other metrics are folded."""
    import html as html_lib
    import json
    import re
    import tempfile

    html = render_report(factory.load_results(), generated_at="test")
    page = tmp_path / "load.html"
    page.write_text(html.replace("</body>", LOAD_PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="hc-chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1280,900", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    seen = json.loads(html_lib.unescape(found.group(1)))
    for kind in ("concurrency", "rate"):
        s = seen[kind]
        assert s["table"] - s["section"] < 900 and s["plot"] - s["section"] < 900, s
        assert s["settings"] > max(s["tableBottom"], s["plot"]) and not s["settingsOpen"], s
        assert s["plotWidth"] > 400 and s["plotHeight"] > 250 and s["rows"] >= 25, s
    assert seen["folded"] == 10 and seen["scrollWidth"] <= 1280, seen
    png = tmp_path / "load.png"
    shot = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "load.html"), str(png), "--width", "1280",
                           "--height", "1400"], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot.stderr
