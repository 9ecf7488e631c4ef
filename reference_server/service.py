"""The shared turn runner: conversation -> prompt -> engine -> parsed events, for every API.

Frontends normalise a request into a Conversation and call `Service.start_turn`; they get a
`Turn` with the real prompt and cache counts up front, and an async stream of internal events
(parsed once, here) that their adapter maps to SSE frames or a whole response.

The CPU work of a request (chat-template rendering, tokenizing) runs on `CpuPool`'s worker
threads, never on the event loop: a 2 MB prompt takes seconds to tokenize, and on the loop it
stopped every concurrent stream for that long.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import itertools
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from harnesscheck.reference_server.checkpoint import Checkpoint, load_checkpoint, template_from_option
from harnesscheck.reference_server.config import ServerConfig
from harnesscheck.reference_server.context import ContextOverflow, check_window, engine_stop, output_room
from harnesscheck.reference_server.conversation import Conversation
from harnesscheck.reference_server.director import next_turn
from harnesscheck.reference_server.engines import build_engine
from harnesscheck.reference_server.engines.base import (Engine, EngineStopped, GenerateRequest, Generation,
                                                        StoppedGeneration)
from harnesscheck.reference_server.events import Event, Finish, ParsedEvent, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, Usage
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.parsers.stream import StreamParser
from harnesscheck.reference_server.pipeline.families import ModelProfile
from harnesscheck.reference_server.pipeline.history import render
from harnesscheck.reference_server.pipeline.plan import CallIds, TurnPlan, plan_turn
from harnesscheck.reference_server.pipeline.render import Prompt, render_text
from harnesscheck.reference_server.pipeline.template import ChatTemplate
from harnesscheck.reference_server.tokenizer import SPECIAL_TOKENS, IncrementalDecoder, Tokenizer
from harnesscheck.reference_server.tokenizer import load as load_tokenizer

T = TypeVar("T")
STEP_CHUNKS = 16  # most engine chunks in one step (one write), as hyper queues at most 16 buffers per writev
LARGE_CHARS = 64 * 1024  # a job over this much text (~20K tokens, tens of ms) takes the large lane
INLINE_CHARS = 8 * 1024  # up to this much text (~2K tokens, about a millisecond) runs on the event loop


_CALL_EVENTS = (ToolCallStart, ToolCallArgsDelta, ToolCallEnd)


class UnknownModel(LookupError):
    pass


def default_workers() -> int:
    """Worker threads for this machine: one per CPU this process may use, at least 2 (so one is
    always left for small jobs, see `CpuPool`), at most 32."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(2, min(32, cpus))


class CpuPool:
    """Worker threads for the CPU work of requests, with back-pressure.

    Threads suffice because the long part, tokenizing, runs in the `tokenizers` library's Rust code
    with the GIL released (`encode_text`); template rendering is Python and yields the GIL to the
    event loop every switch interval (5 ms).

    At most `workers` jobs run at once and none waits in an executor: a job first takes a slot (an
    asyncio semaphore), and a request that finds none free waits for one. Large jobs (more than
    LARGE_CHARS of text) also take a slot of the large lane, `workers - 1` wide, so at least one
    worker is always free for small jobs: a 2 MB count_tokens never delays the next stream's first
    token. The large lane's threads run at a lower OS priority (LARGE_NICE, Linux), so when the
    CPUs are contended the event loop writing frames comes first: measured on a loaded 2-core
    machine, the loop's worst lag during a 2 MB count_tokens went from 27-700 ms to 14-50 ms. A job
    whose caller goes away keeps its slot until its thread is done.
    """

    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or default_workers()
        self.large_slots = max(1, self.workers - 1)
        self._small = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="hc-cpu")
        self._bulk = concurrent.futures.ThreadPoolExecutor(self.large_slots, thread_name_prefix="hc-cpu-large",
                                                           initializer=_lower_priority)
        self._slots = asyncio.Semaphore(self.workers)
        self._large = asyncio.Semaphore(self.large_slots)
        self.running = 0
        self.waiting = 0

    async def run(self, fn: Callable[..., T], *args: Any, large: bool = False) -> T:
        """`fn(*args)` on a worker thread, once a slot is free."""
        lanes = (self._large, self._slots) if large else (self._slots,)
        held: list[asyncio.Semaphore] = []
        self.waiting += 1
        try:
            for lane in lanes:
                await lane.acquire()
                held.append(lane)
        except BaseException:
            for lane in held:
                lane.release()
            raise
        finally:
            self.waiting -= 1
        loop = asyncio.get_running_loop()

        def done(_: concurrent.futures.Future[T]) -> None:
            try:
                loop.call_soon_threadsafe(release)
            except RuntimeError:  # the loop is closed: nobody is waiting for a slot any more
                pass

        def release() -> None:
            self.running -= 1
            for lane in held:
                lane.release()

        self.running += 1
        try:
            future = (self._bulk if large else self._small).submit(fn, *args)
        except BaseException:
            release()
            raise
        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def stats(self) -> dict[str, int]:
        return {"workers": self.workers, "large_slots": self.large_slots, "running": self.running,
                "waiting": self.waiting}

    def close(self) -> None:
        for executor in (self._small, self._bulk):
            executor.shutdown(wait=False, cancel_futures=True)


LARGE_NICE = 10  # the large lane's threads: nice +10 (about a tenth of the share of a nice-0 thread)


def _lower_priority() -> None:
    """Lower the calling thread's OS priority (Linux gives each thread its own nice value)."""
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + LARGE_NICE))
        except OSError:  # not allowed here: the thread keeps the process's priority
            pass


def encode_text(tokenizer: Tokenizer, text: str) -> Any:
    """The `tokenizers` Encoding of `text` (no special tokens added), by a call that releases the
    GIL while it works: `Tokenizer.encode` (the library's `encode`) holds it, and measured here a
    2 MB prompt then stopped every other thread for 1.8 s; `encode_batch_fast` (no offsets) let a
    1 ms ticker thread run with gaps of at most 20 ms. Same ids (tests/reference_server/test_offloop.py)."""
    hf = tokenizer.hf
    batch = getattr(hf, "encode_batch_fast", hf.encode_batch)  # encode_batch_fast: tokenizers >= 0.21
    return batch([text], add_special_tokens=False)[0]


def conversation_chars(conv: Conversation) -> int:
    """About how much text a conversation holds (characters), to tell large jobs from small ones."""
    n = sum(len(s) for s in conv.system) + sum(len(t.description) for t in conv.tools)
    for m in conv.messages:
        n += len(m.text) + sum(len(p.text) + (len(p.call.arguments) if p.call else 0) for p in m.parts)
        n += sum(len(r.content) for r in m.results)
    return n


@dataclass(slots=True)
class _Prepared:
    """What start_turn computes on a worker before the engine starts."""
    plan: TurnPlan
    prompt: Prompt
    request_id: str
    script: str
    parser: StreamParser
    eos_id: int
    end_ids: tuple[int, ...]
    counted: int | None = None  # fault usage-current-turn-only: the prompt tokens usage reports
    static: int | None = None  # fault cache-static-prefix-only: the most cached tokens usage reports


@dataclass(slots=True)
class Turn:
    plan: TurnPlan
    prompt: Prompt
    generation: Generation
    parser: StreamParser
    decoder: IncrementalDecoder
    faults: Faults
    end_ids: frozenset[int]
    counted: int | None = None  # fault usage-current-turn-only: what usage reports instead of the prompt
    static: int | None = None  # fault cache-static-prefix-only: the most cached tokens usage reports

    @property
    def prompt_tokens(self) -> int:
        return self.generation.prompt_tokens if self.counted is None else self.counted

    @property
    def cached_tokens(self) -> int:
        if self.counted is not None:
            return 0
        cached = self.generation.cached_tokens
        return cached if self.static is None else min(cached, self.static)

    async def events(self) -> AsyncIterator[Event]:
        async for step in self.steps():
            for event in step:
                yield event

    async def steps(self) -> AsyncIterator[list[Event]]:
        """The turn's events grouped by the moment they became ready: one list per step, then one for
        the end (held-back text, buffered calls, Finish). A stream writes each list in one go; a list
        may be empty.

        A step is what the engine had ready at once: one chunk (the tokens the engine yielded
        together), or, with an engine that can tell (`ready()`: its next chunk is due already), the
        chunks that were due together, at most STEP_CHUNKS of them. Each chunk is parsed on its own,
        so it still makes its own events (frames): nothing is merged across chunks. The first chunk
        that makes an event, and one that ends a tool call, end their step at once; after a step
        that ended while the next chunk was due, the loop runs the other streams first.
        """
        held: list[ParsedEvent] = []  # the buffer-tool-calls fault holds calls to the end
        buffer = self.faults.on("buffer-tool-calls")
        bend = self.faults.on("invalid-tool-json")
        end_ids, push, feed = self.end_ids, self.decoder.push, self.parser.feed
        ready = getattr(self.generation, "ready", None)
        saw_call = False
        step: list[Event] = []
        taken = 0  # chunks in this step
        sent = False  # a step with events went out
        try:
            try:
                async for ids in self.generation:
                    if not end_ids.isdisjoint(ids):
                        ids = [i for i in ids if i not in end_ids]
                    events = feed(push(ids))
                    taken += 1
                    closes = False
                    if events:
                        if bend:
                            events = self._bend(events)
                        if buffer:
                            held.extend(e for e in events if isinstance(e, _CALL_EVENTS))
                            events = [e for e in events if not isinstance(e, _CALL_EVENTS)]
                        for event in events:
                            kind = type(event)
                            if kind is ToolCallEnd:
                                closes = True
                            elif kind is ToolCallStart:
                                saw_call = True
                        step += events
                    more = ready is not None and taken < STEP_CHUNKS and (sent or not step) and not closes
                    if more and ready is not None and ready():
                        continue
                    if step:
                        yield step
                        step, sent = [], True
                    taken = 0
                    if ready is not None and ready():
                        await asyncio.sleep(0)  # the next chunk is due: the other streams' turn first
            except EngineStopped:
                if step:  # what the engine gave before it stopped still goes out
                    yield step
                raise
            tail = self.parser.finish(cut=self.generation.finish_reason == "length")
            if bend:
                tail = self._bend(tail)
            if buffer:  # a call the finish ends (cut off by the limit, unterminated) is held after its start
                held.extend(e for e in tail if isinstance(e, _CALL_EVENTS))
                tail = [e for e in tail if not isinstance(e, _CALL_EVENTS)]
            last: list[Event] = [*step, *tail, *held]
            saw_call = saw_call or any(isinstance(e, ToolCallStart) for e in last)
        finally:
            await self.generation.close()
        reason = self.generation.finish_reason or "stop"
        usage = Usage(prompt_tokens=self.prompt_tokens, cached_tokens=self.cached_tokens,
                      completion_tokens=len(self.generation.output_ids))
        last.append(Finish(reason="tool_calls" if saw_call and reason == "stop" else reason, usage=usage))
        yield last

    def _bend(self, events: list[ParsedEvent]) -> list[ParsedEvent]:
        """The invalid-tool-json fault (callers check it is on): arguments that no longer join to a
        JSON object."""
        out: list[ParsedEvent] = []
        for event in events:
            out.append(event)
            if isinstance(event, ToolCallStart):
                out.append(ToolCallArgsDelta(index=event.index, text="{"))
            elif isinstance(event, ToolCallEnd):
                out[-1] = ToolCallEnd(index=event.index, arguments="{" + event.arguments)
        return out

    async def close(self) -> None:
        await self.generation.close()


class _OneIdDecodes(Tokenizer):
    """A tokenizer whose one-id decodes are remembered (same text: decoding is a pure function of the
    ids). A turn's `IncrementalDecoder` decodes one id at a time nearly always (its window restarts
    after every complete character), so each streamed token costs a dict look-up, not a call into
    the tokenizers library. At most one entry per id of the vocabulary."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer.hf)
        self._decode = tokenizer.decode  # the tokenizer's own decode, whatever its class
        self._one: dict[int, str] = {}

    def decode(self, ids: Sequence[int]) -> str:
        if len(ids) != 1:
            return self._decode(ids)
        text = self._one.get(ids[0])
        if text is None:
            text = self._one[ids[0]] = self._decode(ids)
        return text


def build_service(config: ServerConfig) -> Service:
    """The service for `config`: with --model-path, the checkpoint's tokenizer and chat template
    (every engine, `checkpoint.py`); without, the server's own tokenizer and built-in templates."""
    checkpoint = load_checkpoint(config.model_path, chat_template=config.chat_template) if config.model_path else None
    tokenizer = checkpoint.tokenizer if checkpoint else load_tokenizer()
    engine = build_engine(config, tokenizer, checkpoint)
    return Service(config, engine, tokenizer, checkpoint)


class Service:
    def __init__(self, config: ServerConfig, engine: Engine, tokenizer: Tokenizer,
                 checkpoint: Checkpoint | None = None) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self._decodes = _OneIdDecodes(tokenizer)  # what the turns' incremental decoders decode with
        self.checkpoint = checkpoint
        self.pool = CpuPool(config.cpu_workers)
        self.faults = Faults(config.faults)
        template = None  # None: each family's built-in template
        if checkpoint is not None:
            template = ChatTemplate(checkpoint.template, bos_token=checkpoint.bos_token,
                                    eos_token=checkpoint.eos_token, special_tokens=tuple(checkpoint.special_tokens))
        elif config.chat_template:
            template = ChatTemplate(template_from_option(config.chat_template), special_tokens=tuple(SPECIAL_TOKENS))
        self.profiles: dict[str, ModelProfile] = {}
        self._end_ids: dict[str, tuple[int, ...]] = {}
        for spec in config.model_ids:
            profile = replace(ModelProfile.parse(spec, reasoning_parser=config.reasoning_parser,
                                                 tool_parser=config.tool_call_parser), template=template)
            self.profiles[profile.id] = profile
            self._end_ids[profile.id] = self.end_ids(profile)
        self.default_model = next(iter(self.profiles))
        self._ids = itertools.count()

    def end_ids(self, profile: ModelProfile) -> tuple[int, ...]:
        """The ids that end a turn, the first one the id a script ends with: the token the template
        closes an assistant turn with, then the checkpoint's eos ids (without a checkpoint: the
        family's eos in the server's tokenizer)."""
        ids = []
        turn_end = profile.chat_template.traits.turn_end
        if turn_end is not None and self.tokenizer.hf.token_to_id(turn_end) is not None:
            ids.append(self.tokenizer.token_id(turn_end))
        if self.checkpoint is not None:
            ids.extend(self.checkpoint.end_ids)
        elif self.tokenizer.hf.token_to_id(profile.family.eos) is not None:
            ids.append(self.tokenizer.token_id(profile.family.eos))
        if not ids:
            raise ValueError(f"model {profile.id}: no end-of-turn token (the chat template closes no turn with a "
                             "special token and the checkpoint names no eos_token_id)")
        return tuple(dict.fromkeys(ids))

    def template_metadata(self, model_id: str) -> dict[str, Any]:
        """The model's chat template, what its probes showed, its end ids and the checkpoint, for /v1/models."""
        profile = self.profiles[model_id]
        out = profile.chat_template.describe() | {"end_ids": list(self._end_ids[model_id])}
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint.describe()
        return out

    def template_report(self) -> list[str]:
        """One line per served model: its chat template and what the probes showed (start-up log)."""
        lines = []
        for profile in self.profiles.values():
            t = profile.chat_template
            kw = ", ".join(t.traits.honoured_kwargs) or "none"
            lines.append(f"model {profile.id}: chat template {t.source.origin}; reasoning history "
                         f"{t.traits.reasoning_history}; reads reasoning_content: {t.traits.reads_reasoning_content}; "
                         f"renders tool_calls: {t.traits.renders_tool_calls}; honours: {kw}; turn end "
                         f"{t.traits.turn_end}; end ids {list(self._end_ids[profile.id])}")
        return lines

    def profile(self, model: str | None) -> ModelProfile:
        if not model:
            return self.profiles[self.default_model]
        if model in self.profiles:
            return self.profiles[model]
        if self.faults.on("unknown-model-openai-shape"):  # any model name served
            return self.profiles[self.default_model]
        raise UnknownModel(model)

    def plan(self, conv: Conversation, *, call_ids: CallIds | None = None) -> TurnPlan:
        """The turn's plan (profile, thinking switch, parsers), made once per turn."""
        if call_ids is None:
            return plan_turn(self.profile(conv.model), conv, self.faults)
        return plan_turn(self.profile(conv.model), conv, self.faults, id_factory=call_ids)

    def prompt(self, conv: Conversation, *, add_generation_prompt: bool = True,
               extra_kwargs: dict[str, Any] | None = None, plan: TurnPlan | None = None) -> Prompt:
        """The rendered and tokenized prompt (CPU work: call it on a worker, `self.pool`)."""
        text, kwargs = self._render(conv, plan, add_generation_prompt=add_generation_prompt,
                                    extra_kwargs=extra_kwargs)
        return Prompt(text=text, ids=encode_text(self.tokenizer, text).ids, template_kwargs=kwargs)

    def _render(self, conv: Conversation, plan: TurnPlan | None = None, **options: Any) -> tuple[str, dict[str, Any]]:
        return render_text(conv, plan or self.plan(conv), strip_preamble=self.config.strip_anthropic_preamble,
                           faults=self.faults, **options)

    def count_prompt_tokens(self, conv: Conversation) -> int:
        """len(self.prompt(conv)) without building the list of ids (CPU work, on a worker)."""
        return len(encode_text(self.tokenizer, self._render(conv)[0]))

    async def _cpu(self, conv: Conversation, fn: Callable[..., T], *args: Any) -> T:
        """A request's CPU work: inline when its text is small (no thread hop, no slot: 256 short
        requests start together), else on the pool (large ones on its large lane)."""
        chars = conversation_chars(conv)
        if chars <= INLINE_CHARS:
            return fn(*args)
        return await self.pool.run(fn, *args, large=chars > LARGE_CHARS)

    async def count_tokens(self, conv: Conversation) -> int:
        return await self._cpu(conv, self.count_prompt_tokens, conv)

    async def start_turn(self, conv: Conversation, *, id_prefix: str = "call_") -> Turn:
        prep = await self._cpu(conv, self._prepare, conv, id_prefix)
        window = self.config.context_window
        max_tokens = min(conv.max_tokens or self.config.max_output_tokens, self.config.max_output_tokens)
        request = GenerateRequest(request_id=prep.request_id, prompt_ids=prep.prompt.ids, max_tokens=max_tokens,
                                  eos_id=prep.eos_id, end_ids=prep.end_ids, script_text=prep.script)
        generation: Generation
        try:
            check_window(len(prep.prompt.ids), window)  # a prompt that does not fit is refused (context.py)
        except ContextOverflow as over:
            stop = engine_stop(over, self.faults)  # fault overflow-stream-error: the engine fails it instead
            if stop is None:
                raise
            generation = StoppedGeneration(request, stop)
        else:
            request.max_tokens = output_room(len(prep.prompt.ids), window, max_tokens)
            generation = await self.engine.start(request)
        return Turn(plan=prep.plan, prompt=prep.prompt, generation=generation, parser=prep.parser,
                    decoder=IncrementalDecoder(self._decodes), faults=self.faults,
                    end_ids=frozenset(prep.end_ids), counted=prep.counted, static=prep.static)

    def _prepare(self, conv: Conversation, id_prefix: str) -> _Prepared:
        """A turn's CPU work before the engine starts: its plan, prompt, ids and the scripted output."""
        call_ids = CallIds(id_prefix)
        plan = self.plan(conv, call_ids=call_ids)
        prompt = self.prompt(conv, plan=plan)
        digest = hashlib.blake2b(prompt.text.encode(), digest_size=8).hexdigest()
        call_ids.seal(digest)
        request_id = f"{digest}{next(self._ids):06d}"
        parts = next_turn(conv, thinking=plan.reasoning_on, faults=self.faults)
        script = "".join(render(p, plan) for p in parts)
        opens = plan.profile.chat_template.traits.opens_reasoning
        if opens and plan.thinking and script.startswith("<think>\n"):
            script = script[len("<think>\n"):]  # the generation prompt already opened it
        elif opens and plan.thinking:
            script = "\n</think>\n\n" + script  # empty reasoning, closed at once
        end_ids = self._end_ids[plan.profile.id]
        counted = self._current_turn_tokens(conv) if self.faults.on("usage-current-turn-only") else None
        static = self._static_tokens(conv) if self.faults.on("cache-static-prefix-only") else None
        return _Prepared(plan=plan, prompt=prompt, request_id=request_id, script=script,
                         parser=StreamParser(reasoning_parser=plan.reasoning, tool_parser=plan.tools),
                         eos_id=end_ids[0], end_ids=end_ids, counted=counted, static=static)

    def _static_tokens(self, conv: Conversation) -> int:
        """The fault cache-static-prefix-only: about the tokens of the system prompt and the tools (their
        text), the most a cache that keeps only the static prefix reuses."""
        tools = "".join(t.name + t.description + json.dumps(t.parameters) for t in conv.tools)
        return len(encode_text(self.tokenizer, conv.system_text + tools).ids)

    def _current_turn_tokens(self, conv: Conversation) -> int | None:
        """The fault usage-current-turn-only: the tokens of the messages after the last assistant turn
        (its tool results and user text), as a proxy counting only the new input reports them; None
        (the whole prompt, counted right) for a conversation with no assistant turn yet."""
        last = max((i for i, m in enumerate(conv.messages) if m.role == "assistant"), default=None)
        if last is None:
            return None
        texts = [m.text for m in conv.messages[last + 1:]]
        texts += [r.content for m in conv.messages[last + 1:] for r in m.results]
        return len(encode_text(self.tokenizer, "\n".join(t for t in texts if t)).ids)
