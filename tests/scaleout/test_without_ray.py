"""Without Ray installed, `--ray` is one line saying how to install it (exit 2) and nothing runs.

Ray's absence is made real for the process: ``sys.modules["ray"] = None`` makes ``import ray``
raise ImportError, as on a machine without it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harnesscheck.cli.main import main
from harnesscheck.replay.cluster import INSTALL_HINT, RayUnavailable, import_ray


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("note:")]  # no datasets
    assert len(lines) == 1, lines
    return lines[0]


def test_import_ray_says_how_to_install(no_ray: None) -> None:
    with pytest.raises(RayUnavailable, match=r"pip install 'harnesscheck\[ray\]'"):
        import_ray()


def test_swebench_run_with_ray_but_no_ray(
    no_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    assert main(["swebench", "run", "--toy", "--run-dir", str(run_dir), "--ray"]) == 2
    assert _one_line(capsys) == f"harnesscheck swebench: {INSTALL_HINT}"
    assert not run_dir.exists()  # no repository built, no server started, nothing run


def test_replay_with_ray_but_no_ray(no_ray: None, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "builtin:agent-coding", "--endpoint", "http://127.0.0.1:9", "--ray", "--workers", "2"]
    assert main(argv) == 2
    assert _one_line(capsys) == f"harnesscheck replay: {INSTALL_HINT}"


def test_workers_needs_ray(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "builtin:agent-coding", "--endpoint", "http://127.0.0.1:9", "--workers", "2"]) == 2
    assert _one_line(capsys) == "harnesscheck replay: --workers needs --ray"
