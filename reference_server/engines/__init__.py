"""Engines by name: `scripted` (CPU default), `transformers` (real compute), `trtllm` (GPU)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnesscheck.reference_server.checkpoint import Checkpoint
    from harnesscheck.reference_server.config import ServerConfig
    from harnesscheck.reference_server.engines.base import Engine
    from harnesscheck.reference_server.tokenizer import Tokenizer

ENGINES = ("scripted", "transformers", "trtllm")


def build_engine(config: ServerConfig, tokenizer: Tokenizer, checkpoint: Checkpoint | None = None) -> Engine:
    """The engine `config` names; a real-compute engine serves `checkpoint` (its weights, and the
    tokenizer the server loaded from it, `checkpoint.py`)."""
    if config.engine == "scripted":
        from harnesscheck.reference_server.engines.scripted import ScriptedEngine, stop_switch

        return ScriptedEngine(tokenizer=tokenizer, timing=config.timing, block_size=config.block_size,
                              cache_blocks=config.cache_blocks, cache_bytes=config.prefix_cache_bytes,
                              max_concurrency=config.max_concurrency,
                              stop=stop_switch(config.engine_options))
    if config.engine == "transformers":
        from harnesscheck.reference_server.engines.transformers_engine import TransformersEngine

        return TransformersEngine.from_config(config, tokenizer, checkpoint)
    if config.engine == "trtllm":
        from harnesscheck.reference_server.engines.trtllm import TrtllmEngine

        return TrtllmEngine.from_config(config, tokenizer, checkpoint)
    raise KeyError(f"unknown engine {config.engine!r}; known: {', '.join(ENGINES)}")
