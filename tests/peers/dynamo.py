"""The Dynamo peer for tests: Dynamo 1.6.1's frontend and CPU mocker, started by file discovery
(``replay.benchmarks.dynamo_peer.DynamoProcess``), or a skip with the reason.

Where: ``$HARNESSCHECK_DYNAMO_PYTHON`` (the Python of an environment with ``ai-dynamo-runtime==1.6.1``
and ``ai-dynamo==1.6.1 --no-deps``, plus the few modules the frontend and mocker import that ``--no-deps``
leaves out: ``pyyaml packaging msgspec "zstandard<1"``), else ``/work/dynamo-venv/bin/python`` when it
exists; the model
folder: ``$HARNESSCHECK_DYNAMO_MODEL`` else ``/work/models/qwen3-tiny`` (tokenizer, chat template,
config; no weights needed) else one the kit writes without torch. CI has neither, so these tests skip there. Start-up budget:
``$HARNESSCHECK_DYNAMO_STARTUP_S`` seconds (default 180); a start that overruns it skips with
Dynamo's logs in the reason rather than failing.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

DEFAULT_PYTHON = "/work/dynamo-venv/bin/python"
DEFAULT_MODEL = "/work/models/qwen3-tiny"


def dynamo_python() -> str:
    """Dynamo's Python, or a skip saying why there is none."""
    from harnesscheck.replay.benchmarks.dynamo_peer import ENV_PYTHON, locate

    candidate = os.environ.get(ENV_PYTHON) or (DEFAULT_PYTHON if os.path.exists(DEFAULT_PYTHON) else None)
    if candidate is None:
        pytest.skip(f"Dynamo not installed: set {ENV_PYTHON} (no {DEFAULT_PYTHON} either)")
    python, why = locate(candidate)
    if python is None:
        pytest.skip(f"Dynamo not usable: {why}")
    return python


def model_dir() -> str:
    """$HARNESSCHECK_DYNAMO_MODEL, else /work/models/qwen3-tiny where it exists, else a folder the kit writes
    without torch (the reference tokenizer, Qwen3's chat template, a config: the mocker loads no weights)."""
    path = os.environ.get("HARNESSCHECK_DYNAMO_MODEL")
    if path is None and not (Path(DEFAULT_MODEL) / "tokenizer.json").exists():
        return _written_model()
    path = path or DEFAULT_MODEL
    if not (Path(path) / "tokenizer.json").exists():
        pytest.skip(f"no model folder with a tokenizer.json at {path} (set HARNESSCHECK_DYNAMO_MODEL)")
    return path


@functools.lru_cache(maxsize=1)
def _written_model() -> str:
    """One weightless folder per test process, removed when it ends."""
    from harnesscheck.replay.benchmarks.dynamo_peer import weightless_model

    folder = tempfile.mkdtemp(prefix="hc-dynamo-model-")
    atexit.register(shutil.rmtree, folder, True)
    return str(weightless_model(Path(folder)))


def startup_s() -> float:
    return float(os.environ.get("HARNESSCHECK_DYNAMO_STARTUP_S", "180"))


def start(**kwargs):
    """A started ``DynamoProcess`` (a context manager already entered), or a skip with the logs."""
    from harnesscheck.replay.benchmarks.dynamo_peer import DynamoProcess

    proc = DynamoProcess(dynamo_python(), model_dir(), startup_s=startup_s(), **kwargs)
    try:
        return proc.__enter__()
    except RuntimeError as exc:
        if "did not serve" in str(exc):
            pytest.skip(f"Dynamo did not start within the budget: {str(exc)[-600:]}")
        raise
