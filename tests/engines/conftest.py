"""Fixtures for the real-compute engines: one tiny random model per test session (2 layers, hidden 128)."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = dict(layers=2, hidden=128, heads=4, kv_heads=2, intermediate=256, max_positions=4096)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    torch.set_num_threads(2)
    from harnesscheck.reference_server.make_model import ModelShape, make_model

    out = tmp_path_factory.mktemp("tiny-model")
    make_model(out, shape=ModelShape(**TINY), family="nemotron", seed=0)
    return out
