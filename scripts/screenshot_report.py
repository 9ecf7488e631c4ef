#!/usr/bin/env python3
"""Render a harnesscheck HTML report in headless Chromium and save a PNG screenshot.

    python scripts/screenshot_report.py report.html shot.png [--width 1400 --height 2000]

Uses Debian's chromium (/usr/bin/chromium, or $CHROMIUM) with networking features off, so the
screenshot also shows that the report needs nothing from the network. Exit 0 when the PNG was
written, 2 when Chromium is missing or failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_CHROMIUM = "/usr/bin/chromium"


def find_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), DEFAULT_CHROMIUM, shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def screenshot(html: str | Path, png: str | Path, *, width: int = 1400, height: int = 2000,
               chromium: str | None = None, timeout: float = 60.0) -> Path:
    """Screenshot `html` into `png`; raises RuntimeError when Chromium is missing or fails."""
    exe = chromium or find_chromium()
    if exe is None:
        raise RuntimeError(f"chromium not found (looked at $CHROMIUM, {DEFAULT_CHROMIUM}, PATH)")
    html = Path(html).resolve()
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    if png.exists():
        png.unlink()
    with tempfile.TemporaryDirectory(prefix="hc-chromium-") as profile:
        cmd = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={width},{height}", html.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "HOME": profile})
    if not png.exists() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium exited {proc.returncode} without a screenshot:\n{proc.stderr[-2000:]}")
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", help="the report HTML file")
    parser.add_argument("png", help="where to save the screenshot")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        out = screenshot(args.html, args.png, width=args.width, height=args.height)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"screenshot failed: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
