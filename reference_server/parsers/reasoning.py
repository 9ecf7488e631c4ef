"""`<think>` ... `</think>` reasoning parsers: deepseek_r1, qwen3, nemotron_deci.

All three families write reasoning between `<think>` and `</think>`, and a turn may hold several
reasoning segments between text and tool calls (`<think>r0</think> t0 <think>r1</think> t1`); each
comes out as its own run of ReasoningDelta events, in order. Inside reasoning only `</think>` is a
tag (a `<tool_call>` or `<think>` there is reasoning text); outside, only `<think>` is (a stray
`</think>` in text stays text).

`start_in_reasoning=True`: the generation prompt already opened reasoning (DeepSeek-R1's template
ends it with `<think>\\n`), so output begins inside reasoning without a tag. A model that writes the
`<think>` again anyway is tolerated: a `<think>` before any reasoning text is skipped (and then the
segment counts as explicitly opened).

If that implicit segment never sees `</think>`, `unterminated_is_reasoning` decides:
- True (deepseek_r1's default, as vLLM's DeepSeekR1ReasoningParser): everything is reasoning; it
  streams as ReasoningDelta at once.
- False (qwen3's and nemotron_deci's default, as vLLM's Qwen3ReasoningParser one-shot): everything
  is text. To keep streaming equal to one-shot, the implicit segment is then held back until
  `</think>` comes (emitted as reasoning) or the stream finishes (re-read as text).
A segment opened by an explicit `<think>` and cut off by the end is reasoning in every family.
An empty (or whitespace-only) reasoning segment is dropped without ending the text around it:
`a <think></think> b` is the text `a  b`, so no two text parts ever follow each other.

`render(r)` is `<think>\\n` + r + `\\n</think>\\n\\n` for all three, with or without
start_in_reasoning (the template writes the same form in history).
"""

from __future__ import annotations

from harnesscheck.reference_server.events import ParsedEvent, ReasoningDelta, TextDelta
from harnesscheck.reference_server.parsers import register_reasoning_parser
from harnesscheck.reference_server.parsers.base import ReasoningParser, TrimmedSegment, held_suffix


class ThinkTagReasoningParser(ReasoningParser):
    open_tag = "<think>"
    close_tag = "</think>"
    # class default for the implicit segment's policy; see the module docstring
    default_unterminated_is_reasoning = True

    def __init__(
        self, *, start_in_reasoning: bool = False, unterminated_is_reasoning: bool | None = None
    ) -> None:
        super().__init__(start_in_reasoning=start_in_reasoning)
        if unterminated_is_reasoning is None:
            unterminated_is_reasoning = self.default_unterminated_is_reasoning
        self.unterminated_is_reasoning = unterminated_is_reasoning
        self._buf = ""
        self._in_reasoning = start_in_reasoning
        self._implicit = start_in_reasoning  # inside the tagless opening segment
        self._opening = start_in_reasoning  # ... and nothing but whitespace seen in it yet
        self._text = TrimmedSegment()
        self._reasoning = TrimmedSegment()

    # -- streaming ---------------------------------------------------------------------------------

    def feed(self, text: str) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        if not self._buf and not self._opening and "<" not in text:
            # No tag can start in this piece and nothing is held back: it is all of the current kind
            # (what `_run` finds the slow way). Nearly every token of a long turn takes this path.
            if not self._in_reasoning:
                self._emit_text(out, text)
                return out
            if not self._implicit or self.unterminated_is_reasoning:
                self._emit_reasoning(out, text)
                return out
        self._buf += text
        self._run(out, final=False)
        return out

    def finish(self) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        if self._opening:
            self._opening = False  # whatever was held back as a possible `<think>` is content now
        if self._implicit and not self.unterminated_is_reasoning:
            # no `</think>` ever came: the held-back opening segment is text after all
            self._in_reasoning = self._implicit = False
        self._run(out, final=True)
        if self._in_reasoning:
            self._emit_reasoning(out, self._buf)
        else:
            self._emit_text(out, self._buf)
        self._buf = ""
        self._text.end()
        self._reasoning.end()
        return out

    def _run(self, out: list[ParsedEvent], *, final: bool) -> None:
        while self._buf:
            if self._opening and not self._skip_opening_tag(final=final):
                return
            if not self._in_reasoning:
                i = self._buf.find(self.open_tag)
                if i < 0:
                    keep = 0 if final else held_suffix(self._buf, [self.open_tag])
                    self._emit_text(out, self._buf[: len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep :]
                    return
                self._emit_text(out, self._buf[:i])
                self._buf = self._buf[i + len(self.open_tag) :]
                self._in_reasoning = True
                continue
            i = self._buf.find(self.close_tag)
            if i < 0:
                if self._implicit and not self.unterminated_is_reasoning:
                    return  # hold the whole implicit segment until `</think>` or the end
                keep = 0 if final else held_suffix(self._buf, [self.close_tag])
                self._emit_reasoning(out, self._buf[: len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep :]
                return
            self._emit_reasoning(out, self._buf[:i])
            self._reasoning.end()
            self._buf = self._buf[i + len(self.close_tag) :]
            self._in_reasoning = self._implicit = False

    def _skip_opening_tag(self, *, final: bool) -> bool:
        """In the implicit segment before any content: skip a repeated `<think>`. False: wait."""
        head = self._buf.lstrip()
        if not head:
            self._buf = ""
            return False
        if head.startswith(self.open_tag):
            self._buf = head[len(self.open_tag) :]
            self._implicit = False  # explicitly opened after all
        elif self.open_tag.startswith(head) and not final:
            self._buf = head
            return False
        else:
            self._buf = head
        self._opening = False
        return True

    def _emit_text(self, out: list[ParsedEvent], text: str) -> None:
        if text and (t := self._text.push(text)):
            out.append(TextDelta(t))

    def _emit_reasoning(self, out: list[ParsedEvent], text: str) -> None:
        if text and (t := self._reasoning.push(text)):
            self._text.end()  # the text segment before ends only when real reasoning follows
            out.append(ReasoningDelta(t))

    # -- rendering ---------------------------------------------------------------------------------

    def render(self, reasoning: str) -> str:
        return f"{self.open_tag}\n{reasoning}\n{self.close_tag}\n\n"


@register_reasoning_parser("deepseek_r1")
class DeepSeekR1ReasoningParser(ThinkTagReasoningParser):
    """DeepSeek-R1: the template opens `<think>\\n`; unterminated reasoning stays reasoning."""

    default_unterminated_is_reasoning = True


@register_reasoning_parser("qwen3")
class Qwen3ReasoningParser(ThinkTagReasoningParser):
    """Qwen3: the model writes `<think>` itself; with no `</think>` the output is text."""

    default_unterminated_is_reasoning = False


@register_reasoning_parser("nemotron_deci")
class NemotronDeciReasoningParser(ThinkTagReasoningParser):
    """Llama-Nemotron (Deci architecture): `<think>` blocks as Qwen3; with no `</think>`, text."""

    default_unterminated_is_reasoning = False
