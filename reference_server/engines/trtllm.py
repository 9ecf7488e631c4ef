"""The TensorRT-LLM engine (production, on a B200/H200): the LLM API with KV-cache block reuse.

NOT VERIFIED HERE: TensorRT-LLM cannot be installed or run on the machines this project is built
on. This module is written against TensorRT-LLM's documented LLM API (`from tensorrt_llm import LLM,
SamplingParams`; `tensorrt_llm.llmapi.KvCacheConfig(enable_block_reuse=True)`;
`llm.generate_async(prompt, sampling_params, streaming=True)` yielding a result whose
`outputs[0].token_ids_diff` are the new ids and, in recent releases, `cached_tokens` the prompt tokens
served from reused KV blocks, as trtllm-serve reports in usage). Its adapter logic is tested here
with a stand-in object of that shape; the real test runs only where `tensorrt_llm` imports.

Token ids in and out, from the checkpoint's own tokenizer: the server's shared loader
(`reference_server/checkpoint.py`) reads the checkpoint's tokenizer.json, special tokens and end
ids, and the server renders, counts and decodes with it; there is no path that uses the server's
own small tokenizer here. At start-up the ids are verified against the model: the tokenizer must
fit the model's vocabulary (config.json `vocab_size`), and where transformers imports, the
checkpoint's tokenizer loaded by transformers must give the same ids for a probe text. TensorRT-LLM
runs with `skip_tokenizer_init=True` (ids in, ids out). Generation ends at the turn's end ids
(`end_id` plus `stop_token_ids`: the template's turn end and the checkpoint's eos ids).
Output is the model's own (free mode); scripted content is the transformers engine's job.

Finish reasons: TensorRT-LLM's "stop" and "length" pass through; "cancelled" and "timeout" (or any
other) are the engine's own ending, never reported as "stop": the turn fails with `EngineStopped`.

`start` waits for the first response, so usage at message_start carries the engine's own
cached-token count (TensorRT-LLM knows it once the request is scheduled); the first token is
handed out as the stream's first chunk.

Options (`--engine-option KEY=VALUE`): free_gpu_memory_fraction (default 0.85), tokens_per_block
(KV block size, default 32), max_tokens_in_kv (bound on the KV pool), temperature (default 0),
top_p, backend (pytorch default), tensor_parallel_size, max_seq_len, max_batch_size.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from harnesscheck.reference_server.engines.base import Engine, EngineStopped, GenerateRequest, Generation
from harnesscheck.reference_server.tokenizer import Tokenizer

if TYPE_CHECKING:
    from harnesscheck.reference_server.checkpoint import Checkpoint
    from harnesscheck.reference_server.config import ServerConfig

PROBE_TEXT = "Tokenizer check: 15 * 23 = 345, <think> ünïcödé 日本語 </think> {\"a\": [1, 2]}\n\tend"


class TrtllmUnavailable(RuntimeError):
    pass


def _int(opts: dict[str, str], key: str) -> int | None:
    return int(opts[key]) if key in opts else None


class _TrtGeneration(Generation):
    def __init__(self, engine: TrtllmEngine, request: GenerateRequest, result: Any) -> None:
        super().__init__(request, 0)
        self.engine = engine
        self.finish_reason = None
        self._result = result
        self._stream = result.__aiter__()
        self._first: list[int] | None = None
        self._done = False

    async def _admit(self) -> None:
        """Wait for the first response: it carries the first token(s) and the cache-hit count."""
        try:
            first = await self._stream.__anext__()
        except StopAsyncIteration:
            self._done = True
            self._first = []
            return
        self._first = self._take(first)

    def _take(self, result: Any) -> list[int]:
        cached = getattr(result, "cached_tokens", None)
        if cached is not None:
            self.cached_tokens = min(int(cached), self.prompt_tokens)
        out = result.outputs[0]
        new = list(getattr(out, "token_ids_diff", None) or out.token_ids[len(self.output_ids):])
        if out.finish_reason is not None:
            self._done = True
            if out.finish_reason not in ("stop", "length"):  # cancelled, timeout: not a "stop"
                raise EngineStopped(str(out.finish_reason),
                                    f"TensorRT-LLM ended the request: finish_reason {out.finish_reason!r}")
            self.finish_reason = out.finish_reason
        return new

    async def __aiter__(self) -> AsyncIterator[list[int]]:
        try:
            if self._first:
                self.output_ids.extend(self._first)
                yield self._first
            while not self._done:
                try:
                    result = await self._stream.__anext__()
                except StopAsyncIteration:
                    break
                new = self._take(result)
                if new:
                    self.output_ids.extend(new)
                    yield new
            if self.finish_reason is None:
                self.finish_reason = "length" if len(self.output_ids) >= self.request.max_tokens else "stop"
        finally:
            await self.close()

    def _release(self) -> None:
        if not self._done:  # the client went away: cancel the request in the engine
            abort = getattr(self._result, "abort", None)
            if abort is not None:
                abort()
        self.engine._release()


class TrtllmEngine(Engine):
    name = "trtllm"
    device = "cuda"
    timing = "real-compute"

    def __init__(self, llm: Any, *, tokenizer: Tokenizer, model_path: str, sampling_factory: Any,
                 options: dict[str, str] | None = None, block_size: int | None = None) -> None:
        import asyncio

        self.llm = llm
        self.tokenizer = tokenizer
        self.model_path = model_path
        self.options = dict(options or {})
        self.block_size = block_size
        self._sampling = sampling_factory
        self._active = 0
        self._slots = asyncio.Semaphore(int(self.options.get("max_active", 256)))

    @classmethod
    def from_config(cls, config: ServerConfig, tokenizer: Tokenizer,
                    checkpoint: Checkpoint | None = None) -> TrtllmEngine:
        try:
            from tensorrt_llm import LLM, SamplingParams
            from tensorrt_llm.llmapi import KvCacheConfig
        except ImportError as error:
            raise TrtllmUnavailable(
                f"--engine trtllm needs TensorRT-LLM (import failed: {error}); it runs on NVIDIA GPUs "
                "(B200/H200) in NVIDIA's container. Use --engine transformers here.") from error
        if not config.model_path or checkpoint is None:
            raise TrtllmUnavailable("--engine trtllm needs --model-path (a Hugging Face checkpoint directory)")
        verify_tokenizer(checkpoint, tokenizer)
        opts = dict(config.engine_options)
        block = int(opts.get("tokens_per_block", 32))
        kv_kwargs: dict[str, Any] = {"enable_block_reuse": True,
                                     "free_gpu_memory_fraction": float(opts.get("free_gpu_memory_fraction", 0.85))}
        if "max_tokens_in_kv" in opts:
            kv_kwargs["max_tokens"] = int(opts["max_tokens_in_kv"])
        # tokens_per_block: a KvCacheConfig field on recent releases (a build setting on older ones).
        if "tokens_per_block" in getattr(KvCacheConfig, "model_fields", {}):
            kv_kwargs["tokens_per_block"] = block
        kv = KvCacheConfig(**kv_kwargs)
        kwargs: dict[str, Any] = {"kv_cache_config": kv, "skip_tokenizer_init": True}
        for key in ("tensor_parallel_size", "max_seq_len", "max_batch_size"):
            if key in opts:
                kwargs[key] = int(opts[key])
        if "backend" in opts:
            kwargs["backend"] = opts["backend"]
        opts.setdefault("max_active", str(min(256, config.max_concurrency)))
        llm = LLM(model=str(checkpoint.model_dir), **kwargs)
        return cls(llm, tokenizer=tokenizer, model_path=config.model_path, sampling_factory=SamplingParams,
                   options=opts, block_size=block)

    def sampling_params(self, request: GenerateRequest) -> Any:
        temperature = float(self.options.get("temperature", 0.0))
        kwargs: dict[str, Any] = {"max_tokens": request.max_tokens, "end_id": request.eos_id,
                                  "temperature": temperature, "detokenize": False}
        others = [i for i in request.end_ids if i != request.eos_id]
        if others:
            kwargs["stop_token_ids"] = others
        if "top_p" in self.options:
            kwargs["top_p"] = float(self.options["top_p"])
        return self._sampling(**kwargs)

    async def start(self, request: GenerateRequest) -> Generation:
        await self._slots.acquire()
        self._active += 1
        try:
            result = self.llm.generate_async({"prompt_token_ids": list(request.prompt_ids)},
                                             self.sampling_params(request), streaming=True)
            generation = _TrtGeneration(self, request, result)
            await generation._admit()
        except BaseException:
            self._release()
            raise
        return generation

    def _release(self) -> None:
        self._active -= 1
        self._slots.release()

    def active_requests(self) -> int:
        return self._active

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "device": self.device, "timing": self.timing, "mode": "free",
                "model_path": self.model_path, "block_size": self.block_size, "kv_block_reuse": True,
                "options": self.options, "tokenizer": "the checkpoint's (shared loader), ids verified at start-up",
                "verified": "not on this project's machines (no GPU, no TensorRT-LLM)"}


def verify_tokenizer(checkpoint: Checkpoint, tokenizer: Tokenizer) -> None:
    """Refuse to start when the token ids the server sends could mean something else to the model."""
    if tokenizer is not checkpoint.tokenizer:
        raise TrtllmUnavailable("the trtllm engine takes token ids only from the checkpoint's own tokenizer")
    if checkpoint.vocab_size is None:
        raise TrtllmUnavailable(f"{checkpoint.model_dir}/config.json names no vocab_size: the tokenizer's ids "
                                "cannot be verified against the model")
    if tokenizer.vocab_size > checkpoint.vocab_size:
        raise TrtllmUnavailable(f"the checkpoint's tokenizer has {tokenizer.vocab_size} ids but the model embeds "
                                f"{checkpoint.vocab_size}: ids would fall outside its vocabulary")
    bad = [i for i in checkpoint.end_ids if not 0 <= i < checkpoint.vocab_size]
    if bad:
        raise TrtllmUnavailable(f"end ids {bad} are outside the model's vocabulary ({checkpoint.vocab_size})")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return
    theirs = AutoTokenizer.from_pretrained(str(checkpoint.model_dir)).encode(PROBE_TEXT, add_special_tokens=False)
    ours = tokenizer.encode(PROBE_TEXT)
    if list(theirs) != ours:
        raise TrtllmUnavailable(f"the checkpoint's tokenizer read by transformers gives other ids than tokenizer.json "
                                f"for a probe text ({list(theirs)[:12]}... vs {ours[:12]}...)")
