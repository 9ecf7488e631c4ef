"""The model's context window: a prompt longer than it is refused, in each API's own form.

`Service.start_turn` raises `ContextOverflow` when the rendered prompt has more tokens than the
window (`--context-window N`; 0: no window); a prompt that fits gets at most the room left as its
output limit. `frontends/http.py` answers the refusal with `overflow_response`, before any stream starts,
in the form of the route's API (the frontends' knowledge, not this module's):

- Anthropic: 400 ``invalid_request_error`` whose message is ``prompt is too long: N tokens > M
  maximum``, the wording Claude Code matches (``/prompt is too long[^0-9]*(\\d+)\\s*tokens?\\s*>\\s*(\\d+)/i``,
  read from the client itself; docs/API_FACTS.md "Context overflow");
- Chat Completions: 400 ``{"error": {"message": "This model's maximum context length is M tokens.
  However, your messages resulted in N tokens. ...", "type": "invalid_request_error", "param":
  "messages", "code": "context_length_exceeded"}}``;
- Responses: 400 with ``code: "context_length_exceeded"``, ``param: "input"`` and OpenAI's message
  "Your input exceeds the context window of this model. ..."

Three faults plant the bad forms seen in the wild: ``overflow-detail-shape`` (``{"detail": "Prompt
too long: ..."}``), ``overflow-500`` (a 500 in the API's error shape, no marker) and
``overflow-bare-400`` (a 400 in the API's error shape without the marker). A fourth,
``overflow-stream-error``, lets the prompt past the frontend and has the engine fail it
(`engine_stop`): a streamed request gets HTTP 200 and then the API's in-stream error, as Dynamo 1.6.1
answers a 4 MiB prompt; one not streamed, the engine stop's 500.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnesscheck.reference_server.engines.base import EngineStopped
from harnesscheck.reference_server.faults import Faults

DEFAULT_CONTEXT_WINDOW = 131072  # tokens of prompt the scripted model takes (a common 128K window)



@dataclass
class ContextOverflow(Exception):
    """The prompt (``prompt_tokens``, as rendered and tokenized) does not fit the window."""
    prompt_tokens: int
    window: int

    def __str__(self) -> str:
        return f"prompt of {self.prompt_tokens} tokens exceeds the context window of {self.window}"


def check_window(prompt_tokens: int, window: int | None) -> None:
    """Raise ContextOverflow when a prompt of ``prompt_tokens`` does not fit ``window`` (None/0: no window)."""
    if window is not None and window > 0 and prompt_tokens > window:
        raise ContextOverflow(prompt_tokens, window)


def output_room(prompt_tokens: int, window: int | None, max_tokens: int) -> int:
    """The output limit a fitting prompt gets: ``max_tokens``, at most what the window leaves (at least 1)."""
    if window is None or window <= 0:
        return max_tokens
    return max(1, min(max_tokens, window - prompt_tokens))


@dataclass(frozen=True, slots=True)
class Refusal:
    """How the server answers an overflow: status, and either the API's error fields or a raw body."""
    status: int
    message: str
    param: str | None = None
    code: str | None = None
    raw: dict | None = None  # a body in no API's shape (fault overflow-detail-shape)


def planted_refusal(over: ContextOverflow, faults: Faults) -> Refusal | None:
    """The planted bad form of the refusal of ``over`` under an overflow fault; None: the route's API's
    own form (frontends/http.py)."""
    n, m = over.prompt_tokens, over.window
    if faults.on("overflow-detail-shape"):  # a FastAPI-style server's own HTTPException
        return Refusal(400, "", raw={"detail": f"Prompt too long: {n} tokens, the limit is {m}"})
    if faults.on("overflow-500"):
        return Refusal(500, f"internal error while scheduling the request ({n} input ids, {m} slots)")
    if faults.on("overflow-bare-400"):
        return Refusal(400, "Bad Request")
    return None


def engine_stop(over: ContextOverflow, faults: Faults) -> EngineStopped | None:
    """Fault overflow-stream-error: the stop the engine fails the over-long prompt with (after the stream
    opened: the route's in-stream error); None without the fault (the frontend refuses it)."""
    if not faults.on("overflow-stream-error"):
        return None
    n, m = over.prompt_tokens, over.window
    return EngineStopped("error", f"internal error while scheduling the request ({n} input ids, {m} slots)")
