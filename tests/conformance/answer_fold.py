"""The answer's fold (an API's ``place``) is its recorded fold (``accumulate``) without the per-event
record (issue 44: the answer is folded without the record, the record built when a reader asks for it).
Shared by the grammar tests' generated streams and test_fold_trace's recorded ones."""

from __future__ import annotations

from typing import Any

from harnesscheck.conformance.grammar import validate_for
from harnesscheck.protocol.apis.base import RECORD, Reading
from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.protocol.wire.transcript import Transcript


def _plain(snap: Any) -> Any:
    return {k: v for k, v in snap.items() if k not in RECORD} if isinstance(snap, dict) else snap


def agrees(module: Any, frames: list[SSEFrame]) -> None:
    """After every input (from each start the API folds from), ``place``'s snapshot is ``accumulate``'s
    without the record; the answer is the same whether it is read first (``place``), after the validator
    or the trace (taken from their recorded fold), or from a list of frames."""
    inputs = [d for f in frames if (d := module.fold_input(f)) is not None]
    starts = [None, *([module.recording()] if hasattr(module, "recording") else [])]
    for start in starts:
        full = plain = start
        for data in inputs:
            full, plain = module.accumulate(data, full), module.place(data, plain)
            assert _plain(full) == plain, (start, data)
    first = module.final_answer(_transcript(module, frames))
    after_validator = _transcript(module, frames)
    validate_for(module.NAME, after_validator)
    after_trace = _transcript(module, frames)
    Reading.of(module, after_trace).trace  # noqa: B018 - the trace's fold is what the answer then reads
    assert first == module.final_answer(after_validator) == module.final_answer(after_trace) \
        == module.final_answer(list(frames))
    assert Reading.of(module, after_validator).snapshot == Reading.of(module, _transcript(module, frames)).snapshot


def _transcript(module: Any, frames: list[SSEFrame]) -> Transcript:
    return Transcript(api=module.NAME, method="POST", url=module.PATH, status=200, frames=list(frames))
