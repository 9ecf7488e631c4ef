"""The shared turn runner: conversation -> prompt -> engine -> parsed events, for every API.

Frontends normalise a request into a Conversation and call `Service.start_turn`; they get a
`Turn` with the real prompt and cache counts up front, and an async stream of internal events
(parsed once, here) that their adapter maps to SSE frames or a whole response.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from reference_server.config import ServerConfig
from reference_server.conversation import Conversation
from reference_server.director import next_turn
from reference_server.engines.base import Engine, GenerateRequest, Generation
from reference_server.events import Event, Finish, ParsedEvent, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, Usage
from reference_server.faults import Faults
from reference_server.parsers.stream import StreamParser
from reference_server.pipeline.families import ModelProfile
from reference_server.pipeline.history import make_parsers, render_part, thinking_enabled
from reference_server.pipeline.render import Prompt, render_prompt
from reference_server.tokenizer import IncrementalDecoder, Tokenizer


class UnknownModel(LookupError):
    pass


@dataclass(slots=True)
class Turn:
    profile: ModelProfile
    prompt: Prompt
    generation: Generation
    parser: StreamParser
    decoder: IncrementalDecoder
    faults: Faults
    thinking: bool
    eos_id: int

    @property
    def prompt_tokens(self) -> int:
        return self.generation.prompt_tokens

    @property
    def cached_tokens(self) -> int:
        return self.generation.cached_tokens

    async def events(self) -> AsyncIterator[Event]:
        async for step in self.steps():
            for event in step:
                yield event

    async def steps(self) -> AsyncIterator[list[Event]]:
        """The turn's events grouped by the moment they became ready: one list per engine step (the
        tokens the engine yielded at once), then one for the end (held-back text, buffered calls,
        Finish). A stream writes each list in one go; a list may be empty."""
        held: list[ParsedEvent] = []  # the buffer-tool-calls fault holds calls to the end
        buffer = self.faults.on("buffer-tool-calls")
        bend = self.faults.on("invalid-tool-json")
        eos_id, push, feed = self.eos_id, self.decoder.push, self.parser.feed
        saw_call = False
        try:
            async for ids in self.generation:
                events = feed(push([i for i in ids if i != eos_id] if eos_id in ids else ids))
                if not events:
                    continue
                if bend:
                    events = self._bend(events)
                if buffer:
                    held.extend(e for e in events if isinstance(e, ToolCallStart | ToolCallArgsDelta | ToolCallEnd))
                    events = [e for e in events if not isinstance(e, ToolCallStart | ToolCallArgsDelta | ToolCallEnd)]
                saw_call = saw_call or any(isinstance(e, ToolCallStart) for e in events)
                yield events  # type: ignore[misc]
            tail = self.parser.finish()
            last: list[Event] = [*(self._bend(tail) if bend else tail), *held]
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


class Service:
    def __init__(self, config: ServerConfig, engine: Engine, tokenizer: Tokenizer) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self.faults = Faults(config.faults)
        self.profiles: dict[str, ModelProfile] = {}
        for spec in config.model_ids:
            profile = ModelProfile.parse(spec, reasoning_parser=config.reasoning_parser,
                                         tool_parser=config.tool_call_parser)
            self.profiles[profile.id] = profile
        self.default_model = next(iter(self.profiles))
        self._ids = itertools.count()

    def profile(self, model: str | None) -> ModelProfile:
        if not model:
            return self.profiles[self.default_model]
        if model in self.profiles:
            return self.profiles[model]
        raise UnknownModel(model)

    def prompt(self, conv: Conversation, *, add_generation_prompt: bool = True,
               extra_kwargs: dict[str, Any] | None = None) -> Prompt:
        return render_prompt(conv, self.profile(conv.model), self.tokenizer,
                             strip_preamble=self.config.strip_anthropic_preamble, faults=self.faults,
                             add_generation_prompt=add_generation_prompt, extra_kwargs=extra_kwargs)

    def count_tokens(self, conv: Conversation) -> int:
        return len(self.prompt(conv))

    async def start_turn(self, conv: Conversation, *, id_prefix: str = "call_") -> Turn:
        profile = self.profile(conv.model)
        thinking = thinking_enabled(profile, conv, self.faults)
        prompt = self.prompt(conv)
        digest = hashlib.blake2b(prompt.text.encode(), digest_size=8).hexdigest()
        request_id = f"{digest}{next(self._ids):06d}"
        id_factory = lambda i: f"{id_prefix}{digest}{i:02d}"  # noqa: E731 - same request, same ids
        reasoning, tools = make_parsers(profile, conv, thinking=thinking, id_factory=id_factory)
        parts = next_turn(conv, thinking=thinking and reasoning is not None)
        script = "".join(render_part(p, reasoning, tools) for p in parts)
        if profile.family.start_in_reasoning and thinking and script.startswith("<think>\n"):
            script = script[len("<think>\n"):]  # the generation prompt already opened it
        elif profile.family.start_in_reasoning and thinking:
            script = "\n</think>\n\n" + script  # empty reasoning, closed at once
        eos_id = self.tokenizer.token_id(profile.family.eos)
        max_tokens = min(conv.max_tokens or self.config.max_output_tokens, self.config.max_output_tokens)
        generation = await self.engine.start(GenerateRequest(
            request_id=request_id, prompt_ids=prompt.ids, max_tokens=max_tokens, eos_id=eos_id,
            script_text=script, conversation=conv, script_parts=parts))
        stream_parser = StreamParser(reasoning_parser=reasoning, tool_parser=tools)
        return Turn(profile=profile, prompt=prompt, generation=generation, parser=stream_parser,
                    decoder=IncrementalDecoder(self.tokenizer), faults=self.faults, thinking=thinking,
                    eos_id=eos_id)
