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
