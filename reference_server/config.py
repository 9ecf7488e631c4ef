"""Server settings: one dataclass filled from the `serve` flags (named as Dynamo names them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harnesscheck.reference_server.context import DEFAULT_CONTEXT_WINDOW
from harnesscheck.reference_server.engines.scripted import TimingModel

DEFAULT_MODEL_IDS = ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "deepseek-ai/DeepSeek-R1=deepseek_r1")


@dataclass(slots=True)
class ServerConfig:
    model_ids: tuple[str, ...] = DEFAULT_MODEL_IDS  # `ID` or `ID=FAMILY`; the first is the default
    enable_anthropic_api: bool = True
    strip_anthropic_preamble: bool = True
    enable_streaming_tool_dispatch: bool = True
    reasoning_parser: str | None = ""  # "" = the family's parser; None = no reasoning parser
    tool_call_parser: str | None = ""
    api_key: str | None = None
    faults: tuple[str, ...] = ()
    engine: str = "scripted"
    model_path: str | None = None  # a checkpoint (model directory or .gguf): its tokenizer and chat template
    chat_template: str | None = None  # --chat-template: a Jinja file or a built-in template's name
    engine_options: dict[str, str] = field(default_factory=dict)
    timing: TimingModel = field(default_factory=TimingModel)
    block_size: int = 16
    cache_blocks: int = 1 << 16
    prefix_cache_bytes: int = 32 * 1024 * 1024  # the scripted engine's prefix cache, in bytes too (512 a block)
    max_concurrency: int = 1024
    max_body_bytes: int = 32 * 1024 * 1024
    max_output_tokens: int = 32768
    context_window: int = DEFAULT_CONTEXT_WINDOW  # prompt tokens the model takes; longer is refused (0: no limit)
    announce_window: bool = True  # GET /v1/models says the window (max_model_len); False: announced nowhere
    stored_responses: int = 10000  # previous_response_id store: at most this many responses (LRU)
    responses_store_bytes: int = 128 * 1024 * 1024  # ... and about this many bytes of them (LRU)
    cpu_workers: int = 0  # threads that render and tokenize prompts; 0: one per CPU, at least 2 (service.py)
