""".ci/run: a step that fails fails CI (issue 43). The README's test command was `pip install ... && python
-m pytest -n 2` under `set -e`, where a failing install skips the tests and the script goes on (bash does
not stop on the left side of `&&`): CI passed with its main tier never run.

The step is taken out of .ci/run as it stands and run under the script's own `set -euo pipefail` in a
throwaway folder (a copy of pyproject.toml), with pip pointed at a closed port: the install fails, and
so must the script, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"


def _readme_step() -> str:
    """The lines of .ci/run from the README's test command to the next blank line."""
    lines = CI.read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("# The README's test command"))
    end = next(n for n in range(start, len(lines)) if not lines[n].strip())
    return "\n".join(lines[start:end])


def test_ci_fails_when_the_install_of_the_test_extras_fails(tmp_path: Path) -> None:
    step = _readme_step()
    assert "pip install" in step and "pytest -n 2" in step, step
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    script = tmp_path / "step.sh"
    bindir = Path(sys.executable).parent  # `python` is this environment's; nothing is installed into it:
    # pip stops at the build requirements, which only the (closed) index could give
    script.write_text(f'set -euo pipefail\nexport PATH="{bindir}:$PATH"\n{step}\necho "ci: went on"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0",
               PIP_TIMEOUT="2", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode != 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert "ci: went on" not in run.stdout
    assert "ci: the install of the test extras failed" in run.stderr, run.stderr[-2000:]
