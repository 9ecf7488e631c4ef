"""The transformers engine: real forward passes on a local Hugging Face model, with a real KV prefix cache.

Serves a local model directory (or a GGUF file transformers can load, when the `gguf` package is
installed) on CPU or CUDA. Every request's prompt is looked up in a bounded LRU store of KV blocks
keyed by hash chains (`kv_store.KVBlockStore`, block size from `--block-size`): the KV of the longest
cached block prefix is restored into the request's cache and only the rest is prefilled. The KV of
the prompt joins the store after prefill, and the KV of the generated tokens when the request ends
(also when the client went away), so a next turn that repeats the output reuses it. The cached-token
count in usage is what was restored: the hit is pinned from admission until the request ends.

Output modes (`--engine-option mode=...`):
  scripted (default)  every forward pass is computed (prefill, then one decode step per emitted token,
                      fed the token emitted), but the ids emitted are the scenario's script, so content
                      is deterministic while timing is real. Used with random weights (make-model).
  free                the model's own tokens: greedy (temperature=0, default) or sampled, until the
                      request's eos id or max_tokens.

Concurrency: one compute thread runs every forward pass in order (torch work never blocks the event
loop). Requests interleave per step: a decode step of one request can run between the prefill chunks
and steps of another, without batching. `max_active` (default 8) requests hold a slot at a time.

Tokenizer: served by the server (`harnesscheck serve --model-path`), the engine uses the tokenizer
the shared loader read from the checkpoint (`reference_server/checkpoint.py`: the model's own
tokenizer.json, special tokens and end ids; make-model writes the server's tokenizer there), and
the server counts and renders with the same one. The engine refuses a model whose vocabulary is
smaller than the tokenizer's. `load()` called directly takes `tokenizer=server|model`.

Options (`--engine-option KEY=VALUE`): mode, device (auto|cpu|cuda|cuda:N; auto: CUDA where torch sees
one, else CPU), dtype (auto|float32|bfloat16|float16; auto: bfloat16 on CUDA, float32 on CPU), cache_mb
(KV store bound; auto: 2048 on CPU, a quarter of the GPU memory free after loading on CUDA),
cache_blocks (overrides cache_mb), max_active, prefill_chunk (tokens per prefill forward; default 16384
on CPU, 65536 on CUDA), threads (torch CPU threads for prefill, default torch's), decode_threads (for
one-token decode steps, default 1), temperature, seed, gguf_file, attn (sdpa|eager; default sdpa).

On CUDA: the weights are moved to the device in their dtype, every forward pass runs there, and the
prefix cache's KV blocks stay in GPU memory (`kv_store` copies them on the cache's own device). A
prompt of up to `prefill_chunk` tokens is prefilled in one causal forward pass, so sdpa takes its
causal kernel with no n x n mask (a 52K-token prompt fits one H200; eager attention would not).

Why decode_threads defaults to 1: a one-token step of a small model is too little work to split, and on
a busy machine an OpenMP parallel region waits for its descheduled second thread (measured here at
load 6: 15 ms per step on one thread, 270-370 ms on two). Prefill has enough work to gain from more.
"""

from __future__ import annotations

from harnesscheck.errors import HarnesscheckError

import asyncio
import importlib.util
import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harnesscheck.reference_server.engines.base import (
    GenerateRequest, Generation, SlottedEngine, Slots, clip, stops,
)
from harnesscheck.reference_server.engines.kv_store import KVBlockStore, LayerKV
from harnesscheck.reference_server.tokenizer import Tokenizer

if TYPE_CHECKING:
    from harnesscheck.reference_server.checkpoint import Checkpoint
    from harnesscheck.reference_server.config import ServerConfig

log = logging.getLogger("harnesscheck.engine.transformers")

MODES = ("scripted", "free")


class EngineConfigError(HarnesscheckError, ValueError):
    """The model or the options cannot be served; the message says why and what to do."""


def _layer_kv(cache: Any, i: int) -> LayerKV:
    """(keys, values) of layer i of a DynamicCache, across transformers versions."""
    layers = getattr(cache, "layers", None)
    if layers is not None:  # transformers >= 4.56: cache.layers[i].keys / .values
        return layers[i].keys, layers[i].values
    return cache.key_cache[i], cache.value_cache[i]  # older versions


def _num_layers(cache: Any) -> int:
    layers = getattr(cache, "layers", None)
    return len(layers) if layers is not None else len(cache.key_cache)


class _TorchGeneration(Generation):
    def __init__(self, engine: TransformersEngine, request: GenerateRequest, cached: int, keys: list[bytes]) -> None:
        super().__init__(request, cached)
        self.engine = engine
        self.finish_reason = None
        self._keys = keys
        self._cache: Any = None
        self._kv_ids: list[int] = []  # token ids whose KV is in self._cache, in order
        self._stored = 0  # tokens of _kv_ids already offered to the store
        self.timings: dict[str, float] = {}
        self.prefill_logits: Any = None  # the last prompt position's logits (tests compare cold vs warm)
        self._script: list[int] | None = None
        if engine.mode == "scripted":
            script = engine.tokenizer.encode(request.script_text or "") + [request.eos_id]
            self._script, cut = clip(script, request.max_tokens)
            self.finish_reason = "length" if cut else "stop"

    # --- compute (runs on the engine's compute thread) ---------------------------------------

    def _prefill(self) -> int:
        eng = self.engine
        t0 = time.perf_counter()
        cache = eng.new_cache()
        if self._keys:
            for i, (k, v) in enumerate(eng.cache.gather(self._keys)):
                cache.update(k, v, i)
        t1 = time.perf_counter()
        ids = self.request.prompt_ids or [self.request.eos_id]  # an empty prompt still gets a forward pass
        past = self.cached_tokens
        logits = None
        while past < len(ids):
            chunk = ids[past : past + eng.prefill_chunk]
            logits = eng.forward(chunk, cache, past)
            past += len(chunk)
        self._cache = cache
        self._kv_ids = list(ids)
        self.prefill_logits = logits
        token = eng.pick(logits)  # reading the token also waits for the device
        self.timings.update(restore_s=t1 - t0, prefill_s=time.perf_counter() - t1)
        return token

    def _step(self, token: int) -> int:
        logits = self.engine.forward([token], self._cache, len(self._kv_ids))
        self._kv_ids.append(token)
        return self.engine.pick(logits)

    def _store(self) -> None:
        """Offer the computed KV (prompt, then the output fed so far) to the store."""
        if self._cache is None or len(self._kv_ids) < self._stored + self.engine.cache.block_size:
            return
        cache = self._cache
        layers = [_layer_kv(cache, i) for i in range(_num_layers(cache))]
        if min(int(k.shape[-2]) for k, _ in layers) < len(self._kv_ids):
            # A sliding-window layer (Gemma 3: 512 tokens) keeps only its last positions: its blocks
            # would be stored under the wrong positions, so nothing past the window is stored.
            return
        self.engine.cache.insert(self._kv_ids, layers)
        self._stored = len(self._kv_ids) // self.engine.cache.block_size * self.engine.cache.block_size

    def _finish_compute(self, last: int | None) -> None:
        """After the last emitted token: feed it (its KV joins the cache for the next turn), store."""
        if last is not None and self._cache is not None:
            self.engine.forward([last], self._cache, len(self._kv_ids))
            self._kv_ids.append(last)
        self._store()
        self._cache = None

    def _release_compute(self) -> None:
        self._store()
        self._cache = None

    # --- streaming ------------------------------------------------------------------------------

    async def __aiter__(self) -> AsyncIterator[list[int]]:
        eng = self.engine
        try:
            t0 = time.perf_counter()
            token = await eng.run(self._prefill)
            self.timings["ttft_s"] = time.perf_counter() - t0
            eng.submit(self._store)  # the prompt's blocks join the store at once
            if self._script is not None:
                for n, scripted in enumerate(self._script):
                    if n:
                        await eng.run(self._step, self._script[n - 1])
                    self.output_ids.append(scripted)
                    yield [scripted]
                last = self._script[-1] if self._script else None
            else:
                limit = self.request.max_tokens
                end = stops(self.request)
                while True:
                    if limit <= 0:
                        self.finish_reason = "length"
                        break
                    self.output_ids.append(token)
                    yield [token]
                    if token in end:
                        self.finish_reason = "stop"
                        break
                    if len(self.output_ids) >= limit:
                        self.finish_reason = "length"
                        break
                    token = await eng.run(self._step, token)
                last = self.output_ids[-1] if self.output_ids else None
            self.timings["total_s"] = time.perf_counter() - t0
            await eng.run(self._finish_compute, last)
        finally:
            await self.close()

    def _release(self) -> None:
        # Store what was computed (also when the client went away mid-stream), on the compute thread,
        # after any step of this request still running there; the slot is free at once.
        if self._cache is not None:
            self.engine.submit(self._release_compute)
        self.engine.slots.release(self.engine.cache, self._keys)


class TransformersEngine(SlottedEngine):
    name = "transformers"
    timing = "real-compute"

    def __init__(self, *, model: Any, tokenizer: Tokenizer, model_path: str, device: str, dtype: str,
                 mode: Literal["scripted", "free"] = "scripted", block_size: int = 16,
                 cache_blocks: int | None = None, cache_mb: float = 2048.0, max_active: int = 8,
                 prefill_chunk: int = 16384, temperature: float = 0.0, seed: int = 0,
                 threads: int | None = None, decode_threads: int = 1,
                 extra: dict[str, Any] | None = None) -> None:
        import torch

        if mode not in MODES:
            raise EngineConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.model_path = model_path
        self.device = device
        self.dtype = dtype
        self.mode = mode
        self.prefill_chunk = max(1, prefill_chunk)
        self.temperature = temperature
        self.max_active = max(1, max_active)
        self.extra = extra or {}
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.config = cfg
        vocab = int(getattr(cfg, "vocab_size", 0) or 0)
        if vocab and vocab < tokenizer.vocab_size:
            raise EngineConfigError(
                f"the model's vocabulary ({vocab}) is smaller than the tokenizer's ({tokenizer.vocab_size}): "
                "token ids would fall outside the embedding table. Use a model made by `harnesscheck make-model` "
                "(it carries the server's tokenizer), or --engine-option tokenizer=model for a model with its own "
                "tokenizer.json")
        self.params = sum(p.numel() for p in model.parameters())
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        elem = torch.empty((), dtype=model.dtype).element_size()
        self.block_bytes = 2 * cfg.num_hidden_layers * kv_heads * head_dim * block_size * elem
        if cache_blocks is None:
            cache_blocks = max(1, int(cache_mb * 2**20 // self.block_bytes))
        self.cache = KVBlockStore(block_size=block_size, capacity_blocks=cache_blocks)
        self._generator = torch.Generator(device="cpu").manual_seed(seed)
        params = inspect.signature(model.forward).parameters
        # transformers 5.x renamed past_key_values to `cache` (the old name is deprecated until 5.40).
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._logits_kw = "logits_to_keep" if "logits_to_keep" in params else (
            "num_logits_to_keep" if "num_logits_to_keep" in params else None)
        self.prefill_threads = max(1, threads or torch.get_num_threads())
        self.decode_threads = max(1, decode_threads)
        self._threads_now: int | None = None  # per OpenMP thread: the first forward pass sets it
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hc-compute")
        self.slots = Slots(self.max_active)
        self._torch = torch

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: ServerConfig, tokenizer: Tokenizer,
                    checkpoint: Checkpoint | None = None) -> TransformersEngine:
        """The engine on the server's checkpoint: its weights from `checkpoint.model_dir` (a GGUF's
        Hugging Face copy), token ids from the checkpoint's tokenizer, which the server also counts with."""
        opts = dict(config.engine_options)
        if not config.model_path or checkpoint is None:
            raise EngineConfigError("--engine transformers needs --model-path DIR (a local Hugging Face model "
                                    "directory or .gguf file); `harnesscheck make-model DIR` creates a small one")
        opts["tokenizer"] = "checkpoint"  # the server's loader read it from the checkpoint (checkpoint.py)
        return cls.load(checkpoint.model_dir, tokenizer, opts, block_size=config.block_size,
                        max_active=min(config.max_concurrency, int(opts.get("max_active", 8))),
                        cache_blocks_default=config.cache_blocks)

    @classmethod
    def load(cls, model_path: str | Path, tokenizer: Tokenizer | None = None, options: dict[str, str] | None = None,
             *, block_size: int = 16, max_active: int | None = None,
             cache_blocks_default: int | None = None) -> TransformersEngine:
        opts = dict(options or {})
        try:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM
        except ImportError as error:
            raise EngineConfigError(f"the transformers engine needs torch and transformers ({error}); "
                                    "pip install torch transformers safetensors") from error
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(model_path)
        if not path.exists():
            raise EngineConfigError(f"model path {str(path)!r} does not exist")
        device = opts.get("device", "auto")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device != "cpu" and not (device == "cuda" or device.startswith("cuda:") and device[5:].isdigit()):
            raise EngineConfigError(f"device must be auto, cpu, cuda or cuda:N, not {device!r}")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineConfigError(f"device={device} asked for, but torch sees no CUDA device "
                                    f"(torch {torch.__version__})")
        on_gpu = device.startswith("cuda")
        dtype_name = opts.get("dtype", "auto")
        if dtype_name == "auto":
            dtype_name = "bfloat16" if on_gpu else "float32"
        if dtype_name not in ("float32", "bfloat16", "float16"):
            raise EngineConfigError(f"dtype must be auto, float32, bfloat16 or float16, not {dtype_name!r}")
        dtype = getattr(torch, dtype_name)

        load_kw: dict[str, Any] = {"dtype": dtype, "attn_implementation": opts.get("attn", "sdpa")}
        if tuple(int(x) for x in transformers.__version__.split(".")[:1]) < (5,):
            load_kw["torch_dtype"] = load_kw.pop("dtype")
        model_dir = path
        gguf_file = opts.get("gguf_file")
        if path.is_file() and path.suffix == ".gguf":
            model_dir, gguf_file = path.parent, path.name
        if gguf_file:
            if importlib.util.find_spec("gguf") is None:
                raise EngineConfigError(f"{gguf_file} is a GGUF file: transformers loads those only with the "
                                        "`gguf` package (pip install gguf); it is not installed")
            load_kw["gguf_file"] = gguf_file
        elif not (model_dir / "config.json").is_file():
            raise EngineConfigError(f"{str(model_dir)!r} is not a Hugging Face model directory (no config.json); "
                                    "`harnesscheck make-model DIR` creates one")
        try:
            model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True, **load_kw)
        except (OSError, ValueError) as error:
            raise EngineConfigError(f"could not load a causal LM from {str(path)!r}: {error}") from error
        model.to(device)
        model.eval()
        gpu: dict[str, Any] = {}
        cache_mb = opts.get("cache_mb", "auto")
        if on_gpu:
            free, total = torch.cuda.mem_get_info(torch.device(device))
            gpu = {"gpu": torch.cuda.get_device_name(torch.device(device)),
                   "gpu_memory_gib": round(total / 2**30, 1), "cuda": torch.version.cuda}
            if cache_mb == "auto":  # a quarter of what the weights left free (another server may share the GPU)
                cache_mb = str(max(2048, free // 4 // 2**20))
        elif cache_mb == "auto":
            cache_mb = "2048"

        tokenizer = cls._pick_tokenizer(model_dir, tokenizer, opts)
        manifest_path = model_dir / "harnesscheck.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
        mode = opts.get("mode", "scripted")
        cache_blocks = int(opts["cache_blocks"]) if "cache_blocks" in opts else None
        engine = cls(model=model, tokenizer=tokenizer, model_path=str(path), device=device, dtype=dtype_name,
                     mode=mode,  # type: ignore[arg-type]
                     block_size=block_size, cache_blocks=cache_blocks,
                     cache_mb=float(cache_mb),
                     max_active=max_active if max_active is not None else int(opts.get("max_active", 8)),
                     prefill_chunk=int(opts.get("prefill_chunk", 65536 if on_gpu else 16384)),
                     temperature=float(opts.get("temperature", 0.0)), seed=int(opts.get("seed", 0)),
                     threads=int(opts["threads"]) if "threads" in opts else None,
                     decode_threads=int(opts.get("decode_threads", 1)),
                     extra={**gpu, "attn": load_kw["attn_implementation"],
                            "family": manifest.get("family"), "gguf_file": gguf_file,
                            "tokenizer": opts.get("tokenizer", "server"),
                            "transformers": transformers.__version__, "torch": torch.__version__})
        if cache_blocks is None and cache_blocks_default is not None:
            engine.cache.capacity = min(engine.cache.capacity, cache_blocks_default)
        if mode == "free" and not manifest.get("created_by", "").startswith("harnesscheck") \
                and opts.get("tokenizer", "server") == "server" and (model_dir / "tokenizer.json").is_file() \
                and not _same_vocab(tokenizer, model_dir / "tokenizer.json"):
            log.warning("free mode with the server tokenizer, but %s has its own tokenizer.json: the model's "
                        "output ids will be decoded with the wrong vocabulary (use --engine-option tokenizer=model)",
                        model_dir)
        return engine

    @staticmethod
    def _pick_tokenizer(model_dir: Path, tokenizer: Tokenizer | None, opts: dict[str, str]) -> Tokenizer:
        choice = opts.get("tokenizer", "server")
        if choice == "model":
            file = model_dir / "tokenizer.json"
            if not file.is_file():
                raise EngineConfigError(f"tokenizer=model, but {str(model_dir)!r} has no tokenizer.json")
            return Tokenizer.from_file(file)
        if choice not in ("server", "checkpoint"):
            raise EngineConfigError(f"tokenizer must be server or model, not {choice!r}")
        if tokenizer is None:
            from harnesscheck.reference_server.tokenizer import load

            tokenizer = load()
        return tokenizer

    # --- compute --------------------------------------------------------------------------------

    def new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers: no config argument
            return DynamicCache()

    def forward(self, ids: Sequence[int], cache: Any, past: int) -> Any:
        """One forward pass over `ids` at positions past.., extending `cache`; the last position's logits."""
        torch = self._torch
        device = self.model.device
        threads = self.decode_threads if len(ids) == 1 else self.prefill_threads
        if threads != self._threads_now:  # per thread (OpenMP): set here, on the compute thread
            torch.set_num_threads(threads)
            self._threads_now = threads
        input_ids = torch.tensor([list(ids)], dtype=torch.long, device=device)
        position_ids = torch.arange(past, past + len(ids), dtype=torch.long, device=device).unsqueeze(0)
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True, "position_ids": position_ids}
        if self._logits_kw:
            kwargs[self._logits_kw] = 1
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, **kwargs)
        return out.logits[0, -1]

    def pick(self, logits: Any) -> int:
        torch = self._torch
        if self.mode == "free" and logits.shape[-1] > self.tokenizer.vocab_size:
            # the embedding table is padded past the tokenizer: never emit an id it cannot decode
            logits = logits[: self.tokenizer.vocab_size]
        if self.mode == "free" and self.temperature > 0:
            probs = torch.softmax(logits.float() / self.temperature, dim=-1).cpu()
            return int(torch.multinomial(probs, 1, generator=self._generator).item())
        return int(torch.argmax(logits).item())

    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def submit(self, fn: Any, *args: Any) -> None:
        """Queue work on the compute thread without waiting (ordered after the work queued before)."""
        future = self._executor.submit(fn, *args)
        future.add_done_callback(_log_failure)

    # --- Engine interface -----------------------------------------------------------------------

    def _generation(self, request: GenerateRequest, cached: int, keys: list[bytes]) -> Generation:
        return _TorchGeneration(self, request, cached, keys)

    def cache_stats(self) -> dict[str, Any]:
        return super().cache_stats() | {"capacity_blocks": self.cache.capacity}

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "engine": self.name, "device": self.device, "dtype": self.dtype, "timing": self.timing,
            "mode": self.mode, "model_path": self.model_path, "model_type": getattr(cfg, "model_type", None),
            "params": self.params, "layers": getattr(cfg, "num_hidden_layers", None),
            "hidden": getattr(cfg, "hidden_size", None), "vocab_size": getattr(cfg, "vocab_size", None),
            "block_size": self.cache.block_size, "cache_capacity_blocks": self.cache.capacity,
            "cache_block_bytes": self.block_bytes, "prefill_chunk": self.prefill_chunk,
            "max_active": self.max_active, "temperature": self.temperature,
            "threads": self.prefill_threads if self.device == "cpu" else None,
            "decode_threads": self.decode_threads if self.device == "cpu" else None,
            "scheduling": "one compute thread; requests interleave per forward pass (no batching)",
            **{k: v for k, v in self.extra.items() if v is not None},
        }

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("background compute failed", exc_info=future.exception())


def _same_vocab(tokenizer: Tokenizer, file: Path) -> bool:
    try:
        return Tokenizer.from_file(file).hf.get_vocab() == tokenizer.hf.get_vocab()
    except Exception:  # an unreadable file: treat as different
        return False
