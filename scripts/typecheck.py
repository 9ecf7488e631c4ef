#!/usr/bin/env python3
"""Type-check the kit with mypy (the configuration is pyproject.toml's [tool.mypy]).

The wheel maps top-level folders of the repository into the one ``harnesscheck`` namespace
(pyproject's [tool.setuptools.package-dir]: ``agents/`` is ``harnesscheck.agents``), and the editable
install resolves that with an import hook that mypy cannot see. So this script lays out the same
namespace as a tree of symbolic links in a temporary folder (one per checkout, rebuilt on every run, the
mypy cache beside it), runs mypy there, and prints each error with the path of the file in the
checkout. It works from any clone, whatever the folder is called.

    python scripts/typecheck.py            # the whole package; exit status 1 on any error
    python scripts/typecheck.py --pretty   # extra arguments go to mypy
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "harnesscheck"


def package_dirs() -> dict[str, str]:
    """Subpackage of ``harnesscheck`` (``agents``) -> its folder in the checkout, from pyproject."""
    with open(REPO / "pyproject.toml", "rb") as f:
        mapping: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    subs = {}
    for name, folder in mapping.items():
        if name.startswith(PACKAGE + "."):
            subs[name.removeprefix(PACKAGE + ".")] = folder
    return subs


def build_view(view: Path, subs: dict[str, str]) -> None:
    """``view/harnesscheck``: a link to each entry of the checkout's ``harnesscheck/`` and to each mapped
    folder under its subpackage name. Only links are removed when it is rebuilt."""
    root = view / PACKAGE
    if root.exists():
        shutil.rmtree(root)  # holds only links: rmtree unlinks them and never follows one
    root.mkdir(parents=True)
    for entry in (REPO / PACKAGE).iterdir():
        if entry.name not in subs and entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    for sub, folder in subs.items():
        (root / sub).symlink_to(REPO / folder, target_is_directory=True)


def main(argv: list[str]) -> int:
    subs = package_dirs()
    tag = hashlib.sha1(str(REPO).encode()).hexdigest()[:12]
    view = Path(tempfile.gettempdir()) / f"harnesscheck-mypy-{tag}"
    build_view(view, subs)
    # Paths in mypy's output back to the checkout: harnesscheck/agents/x.py -> agents/x.py.
    back = re.compile(rf"^{PACKAGE}/({'|'.join(map(re.escape, subs))})/")
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
           "--cache-dir", str(view / ".mypy_cache"), *argv]
    env = {**os.environ, "MYPY_FORCE_COLOR": "0"}
    proc = subprocess.Popen(cmd, cwd=view, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = back.sub(lambda m: subs[m.group(1)] + "/", line)
        sys.stdout.write(line)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
