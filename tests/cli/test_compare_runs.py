"""`harnesscheck compare RUN_A RUN_B` with results folders (issue 42): two real runs of the suite's stream checks,
a clean embedded server and one with a fault, laid side by side; the check the fault breaks shows as a change, the
others do not; compare.md and compare.html are written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = "CH-STREAM-001 or CH-STREAM-002"


def _check(out: Path, *extra: str) -> None:
    done = subprocess.run([sys.executable, "-m", "harnesscheck", "check", "--apis", "chat", "-k", CHECKS,
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=240)
    assert (out / "results.json").is_file(), done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("compare")
    _check(base / "clean")
    _check(base / "broken", "--server-arg=--fault=invalid-tool-json")
    return base / "clean", base / "broken"


def test_a_changed_outcome_shows_as_a_change(runs: tuple[Path, Path], tmp_path: Path) -> None:
    clean, broken = runs
    done = subprocess.run([sys.executable, "-m", "harnesscheck", "compare", f"clean={clean}", f"fault={broken}",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {next(w for w in line.split() if w.startswith("CH-STREAM-00")): line
            for line in done.stdout.splitlines() if line.lstrip("* ").startswith("CH-STREAM-00")}
    assert rows["CH-STREAM-002"].startswith("*") and "FAIL MUST" in rows["CH-STREAM-002"]
    assert not rows["CH-STREAM-001"].startswith("*")
    assert "1 of 2 checks differ" in done.stdout
    md = (tmp_path / "compare.md").read_text()
    assert "| **CH-STREAM-002** | chat | **pass** | **FAIL MUST** |" in md
    assert 'class="changed"' in (tmp_path / "compare.html").read_text()


def test_markdown_to_stdout_and_a_bad_input_is_one_line(runs: tuple[Path, Path], tmp_path: Path) -> None:
    clean, broken = runs
    done = subprocess.run([sys.executable, "-m", "harnesscheck", "compare", str(clean), str(broken), "--format",
                           "md", "--only-changes"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "CH-STREAM-001" not in done.stdout and "CH-STREAM-002" in done.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "harnesscheck", "compare", str(clean), str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
