"""Folding a 1,000-event stream, per API, before the per-event record, on main and now, side by side (issue 44).

- ``before-record``: the fold as it was before each fold recorded what every event did (the parent of
  46c4d6e, "each fold records per event the part it belongs to (_at) ..."; the grammar records came in
  ee5a281, 94caa20, 50379cc): ``base.fold(stream, accumulate)``, the snapshot only, loaded from git.
- ``main``: the fold on ``main`` (``--main REF``) with its per-event record: ``base.fold`` alone, its final
  answer, and what one check read of one transcript on main: the answer, the validator, the trace (sharing
  main's ``Reading`` where main has one, else each folding the stream again).
- ``now``: this tree. The answer folds with the API's ``place`` (the fold without the per-event record:
  ``answer fold now``, ``final_answer now``); the recorded fold (``accumulate``) runs when a reader asks for
  the record (the validator, the trace), and this tree's ``Reading`` shares it between them (``reading``).
  A check that reads the answer first and then the validator folds twice: once without, once with the record.

Each variant runs once per round, in turn, for ``--repeat`` rounds, and the best run is printed: a busy
spell of the (shared) machine falls on all of them alike.

The streams are the reference server's own (benchmarks/conftest.py's corpus: reasoning, text, four tool
calls), cut to 1,000 events by dropping reasoning deltas (Responses' sequence numbers renumbered).
Run: ``python benchmarks/fold_once.py [--main main] [--repeat 30]``; it needs git (the old folds are read
from the history). Not a test: nothing is asserted, the figures are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEFORE_RECORD = "46c4d6e^"  # the parent of the commit that gave each fold its per-event record
N_EVENTS = 1000


def _from_git(ref: str, folder: str, names: tuple[str, ...], package: str, imports_as: str,
              first: dict[str, str] | None = None) -> Path:
    """``folder``'s modules ``names`` at ``ref`` written as package ``package`` (their imports of the API
    modules, under either home, read ``imports_as``); ``first`` replaces a module's text. Returns its folder."""
    out = Path(tempfile.mkdtemp(prefix=f"{package}-")) / package
    out.mkdir()
    for name in names:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{folder}/{name}.py"], check=True,
                             capture_output=True, text=True).stdout
        for old in ("harnesscheck.conformance.apis", "harnesscheck.protocol.apis"):
            src = src.replace(old, imports_as)
        src = src.replace("harnesscheck.conformance.wire", "harnesscheck.protocol.wire")
        (out / f"{name}.py").write_text((first or {}).get(name, src))
    sys.path.insert(0, str(out.parent))
    return out


def _load(ref: str, folder: str, package: str) -> dict[str, ModuleType]:
    """The API modules at ``ref`` (``folder``: conformance/apis or protocol/apis) as package ``package``."""
    _from_git(ref, folder, ("__init__", "base", "anthropic", "chat", "responses"), package, package)
    return {name: importlib.import_module(f"{package}.{name}") for name in ("base", "anthropic", "chat", "responses")}


def streams() -> dict[str, list[Any]]:
    """api -> 1,000 SSE frames of the reference server's long tool-calling turn."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import conftest  # the benchmarks' corpus

    from harnesscheck.protocol.wire.sse import decode_all

    corpus = conftest.build_corpus()
    out = {}
    for api, data in corpus.sse.items():
        frames = [f for f in decode_all(data) if f.kind == "event"]
        frames = frames[:10] + frames[10 + len(frames) - N_EVENTS:]  # reasoning deltas dropped
        if api == "responses":
            for i, f in enumerate(frames):
                if isinstance(f.json, dict) and "sequence_number" in f.json:
                    f.json["sequence_number"] = i
        out[api] = [dataclasses.replace(f, index=i) for i, f in enumerate(frames)]
    return out


def side_by_side(fns: dict[str, Any], repeat: int) -> dict[str, float]:
    """The best of ``repeat`` runs of each, seconds; run in rounds (each once per round, in turn), so that a
    busy spell of the machine falls on all of them alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--main", default="main", help="the ref of the code before this change (default: main)")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    data = streams()
    before = _load(BEFORE_RECORD, "conformance/apis", "_fold_before_record")
    old = _load(args.main, "protocol/apis", "_fold_main")
    from harnesscheck.conformance import grammar
    from harnesscheck.protocol import apis
    from harnesscheck.protocol.apis import base
    from harnesscheck.protocol.wire.transcript import Transcript

    def transcript(frames: list[Any]) -> Transcript:
        return Transcript(api="bench", method="POST", url="/", frames=list(frames))

    main_grammar = _load_grammar(args.main, "_fold_main", "_grammar_main")
    before_grammar = _load_grammar(BEFORE_RECORD, "_fold_before_record", "_grammar_before_record")
    rows = []
    for api, frames in data.items():
        pairs = [(f.index, f.json) for f in frames]
        b, m = before[api], old[api]
        oldm = old["base"]

        def main_check(frames: list[Any] = frames, m: ModuleType = m, api: str = api) -> None:
            t = transcript(frames)
            m.final_answer(t)
            main_grammar(api).validate(t)
            if hasattr(oldm, "Reading"):  # a main with the one fold: its trace shares it
                oldm.Reading.of(m, t).trace  # noqa: B018 - the read is what is timed
            else:
                oldm.trace(m, ((f.index, f.json) for f in t.events))

        def before_check(frames: list[Any] = frames, b: ModuleType = b, api: str = api) -> None:
            t = transcript(frames)
            b.final_answer(t)
            before_grammar(api).validate(t)  # no trace then: the dispatch checks read the frames themselves

        def after_check(frames: list[Any] = frames, api: str = api) -> None:
            t = transcript(frames)
            apis.get(api).final_answer(t)
            grammar.validate_for(api, t)
            base.Reading.of(apis.get(api), t).trace  # noqa: B018 - the read is what is timed

        def answer(module: ModuleType, frames: list[Any] = frames) -> None:
            module.final_answer(transcript(frames))  # a fresh transcript: nothing memoised

        now = apis.get(api)
        rows.append((api, len(frames), side_by_side({
            "before-record fold": lambda b=b, frames=frames: before["base"].fold(frames, b.accumulate),
            "main fold": lambda m=m, frames=frames: oldm.fold(frames, m.accumulate),
            "answer fold now (place)": lambda frames=frames, now=now: base.fold(frames, now.place),
            "recorded fold now (accumulate)": lambda frames=frames, now=now: base.fold(frames, now.accumulate),
            "before-record: final_answer": lambda b=b: answer(b),
            "main: final_answer": lambda m=m: answer(m),
            "final_answer now": lambda now=now: answer(now),
            "main trace": lambda m=m, pairs=pairs: oldm.trace(m, pairs),
            "reading (one fold)": lambda frames=frames, now=now: base.Reading.of(now, transcript(frames)).trace,
            "before-record: one check's reads": before_check,
            "main: one check's reads": main_check,
            "reading: one check's reads": after_check,
        }, args.repeat)))
    names = list(rows[0][2])
    print(f"{'':<36}" + "".join(f"{api:>12}" for api, _, _ in rows))
    for k in names:
        print(f"{k:<36}" + "".join(f"{t[k] * 1e3:>9.2f} ms" for _, _, t in rows))
    print(f"(events per stream: {', '.join(f'{api} {n}' for api, n, _ in rows)}; the best of {args.repeat} runs "
          "each; a check's reads: the answer, the validator's findings and, on main and now, the trace)")


def _load_grammar(ref: str, apis_package: str, grammar_package: str) -> Any:
    """The validators at ``ref``, reading the folds loaded as ``apis_package`` (grammar/<api>.py imports
    apis.<api>)."""
    only_apis = {"__init__": "from __future__ import annotations\n"}  # only the per-API modules are used
    _from_git(ref, "conformance/grammar", ("__init__", "findings", "anthropic", "chat", "responses"),
              grammar_package, apis_package, first=only_apis)
    return lambda api: importlib.import_module(f"{grammar_package}.{api}")


if __name__ == "__main__":
    main()
