"""The turns a real client is measured on: a text turn and one turn per tool kind the client really uses.

``turns_for(client)`` lists a client's ``TurnSpec``s, in the order they run:

- every client: ``text`` ("Say ok") and ``tool`` (its shell tool runs ``echo harnesscheck-$((6*7))``);
- Claude Code: ``read`` (Read of a file the kit wrote, its text comes back), ``edit`` (Read, then Edit
  of that file: the file holds the new text afterwards), ``image`` (Read of a small PNG the kit makes, a
  screenshot-like picture: the tool result carries an image block). Claude Code asks for thinking on
  every request (``thinking: {"type": "adaptive"}`` in 2.1.x), so each of its turns carries the
  reasoning and its signature back;
- Codex under its gpt-5.x catalog profile (model ``gpt-5.5``: reasoning effort, the freeform
  ``apply_patch`` custom tool): ``patch`` (apply_patch edits a file; the file holds the new text) and
  ``shell`` (exec_command); its ``text`` and ``tool`` turns run under the run's model id (fallback
  metadata: no apply_patch, no reasoning effort);
- OpenClaw: ``patch`` (its apply_patch tool adds a file in its workspace).

The scripted reference model answers them from the prompt's words (reference_server/director.py): "the
NAME tool" calls NAME, arguments spelled ``key=`value``` are used as given, and several tools named in
one prompt run one per model turn, in the order named. ``{cwd}`` in a prompt is the client's working
folder (an absolute path: Claude Code's Read and Edit take only those), filled in when the turn runs.

The session long enough to reach the context window is ``overflow`` (``clients --overflow``), not a turn
here: its results for the overflow faults are taken into impact.json from there (``fault_runs``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
CODEX_CATALOG_MODEL = "gpt-5.5"  # a model id in Codex's own catalog: the gpt-5.x profile
TEXT_PROMPT = "Say ok"
TOOL_COMMAND = "echo harnesscheck-$((6*7))"
TOOL_MARKER = "harnesscheck-42"  # the command's output; not in the command text, so it proves a run
NOTES = "notes.txt"
NOTES_TEXT = "harnesscheck alpha\n"
EDITED_TEXT = "harnesscheck beta"
PATCHED = "harnesscheck-patched.txt"  # the file a patch turn adds
IMAGE = "screen.png"


@dataclass(frozen=True, slots=True)
class Effect:
    """What the turn leaves on disk: a file named ``name`` (in the client's working folder, else anywhere
    under its home: OpenClaw works in its own workspace) that holds ``text``."""

    name: str
    text: str


@dataclass(frozen=True, slots=True)
class TurnSpec:
    name: str  # the turn's name in results ("text", "tool", "edit", ...)
    prompt: str  # "{cwd}" is the client's working folder
    description: str = ""
    tool: str = ""  # the tool the scripted model must call (a tool turn); "" for a text turn
    model: str | None = None  # the model id the client asks for (None: the run's)
    marker: str = ""  # text a tool result must carry (the command's output), reported beside CL-TOOL-RUN
    files: dict[str, bytes] = field(default_factory=dict)  # written into the working folder first
    effect: Effect | None = None  # CL-EFFECT: what the turn must leave on disk
    image: bool = False  # CL-IMAGE: a tool result the client sent back carries an image block


def png(width: int = 64, height: int = 40) -> bytes:
    """A small screenshot-like RGB PNG: a title bar, a window body and a line of 'text' blocks."""
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter: none
        for x in range(width):
            if y < 6:
                px = (40, 90, 200)  # title bar
            elif 12 <= y < 15 and 4 <= x < width - 8 and (x // 6) % 2 == 0:
                px = (30, 30, 30)  # a line of text
            else:
                px = (235, 235, 235)
            row += bytes(px)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))
            + chunk(b"IEND", b""))


def _text() -> TurnSpec:
    return TurnSpec("text", TEXT_PROMPT, "a text answer, no tool")


def _tool(tool: str, model: str | None = None, name: str = "tool") -> TurnSpec:
    return TurnSpec(name, f"Use the {tool} tool to run `{TOOL_COMMAND}` and print its output.",
                    f"the shell tool {tool} runs a command" + (f" (model {model})" if model else ""),
                    tool=tool, model=model, marker=TOOL_MARKER)


def _patch(tool: str, add: bool, model: str | None = None) -> TurnSpec:
    if add:  # a new file: where the client applies it is its business; the file is looked for under its home
        patch = f"*** Begin Patch\n*** Add File: {PATCHED}\n+{EDITED_TEXT}\n*** End Patch\n"
        effect = Effect(PATCHED, EDITED_TEXT)
        files: dict[str, bytes] = {}
    else:
        patch = (f"*** Begin Patch\n*** Update File: {NOTES}\n@@\n-{NOTES_TEXT.strip()}\n+{EDITED_TEXT}\n"
                 "*** End Patch\n")
        effect = Effect(NOTES, EDITED_TEXT)
        files = {NOTES: NOTES_TEXT.encode()}
    return TurnSpec("patch", f"Use the {tool} tool with input=`{patch}` and say what changed.",
                    f"{tool} edits a file" + (f" (model {model})" if model else ""),
                    tool=tool, model=model, files=files, effect=effect)


CLAUDE_CODE = (
    _text(),
    _tool("Bash"),
    TurnSpec("read", f"Use the Read tool with file_path=`{{cwd}}/{NOTES}` and say what it holds.",
             "Read returns a file's text", tool="Read", marker="harnesscheck alpha",
             files={NOTES: NOTES_TEXT.encode()}),
    TurnSpec("edit", f"Use the Read tool with file_path=`{{cwd}}/{NOTES}`, then use the Edit tool with "
                     f"file_path=`{{cwd}}/{NOTES}` old_string=`harnesscheck alpha` new_string=`{EDITED_TEXT}`.",
             "Read, then Edit changes the file", tool="Edit", files={NOTES: NOTES_TEXT.encode()},
             effect=Effect(NOTES, EDITED_TEXT)),
    TurnSpec("image", f"Use the Read tool with file_path=`{{cwd}}/{IMAGE}` and describe the screenshot.",
             "Read of a PNG: the tool result is an image block", tool="Read", files={IMAGE: png()}, image=True),
)
CODEX = (
    _text(),
    _tool("exec_command"),
    _patch("apply_patch", add=False, model=CODEX_CATALOG_MODEL),
    _tool("exec_command", CODEX_CATALOG_MODEL, name="shell"),
)
OPENCLAW = (
    _text(),
    _tool("exec"),
    _patch("apply_patch", add=True),
)
_BY_CLIENT = {"claude-code": CLAUDE_CODE, "codex": CODEX, "openclaw": OPENCLAW}
# the turns --verify-clients runs (a few minutes per client): all of them
VERIFY = {name: tuple(t.name for t in specs) for name, specs in _BY_CLIENT.items()}


def on_endpoint(client: Any, spec: TurnSpec) -> tuple[Any, TurnSpec]:
    """The client and turn to run against an endpoint that serves only its own model id: a turn under a
    Codex catalog model (``gpt-5.5``) runs under the endpoint's model id with that catalog entry's profile
    (``codex.Codex`` option ``profile``: Codex's own entry, renamed, as its ``model_catalog_json``)."""
    if not spec.model or getattr(client, "name", "") != "codex":
        return client, spec
    from harnesscheck.agents.clients import get_client

    api = None if client.api == client.apis[0] else client.api
    return get_client(client.name, api, **{**client.options, "profile": spec.model}), replace(spec, model=None)


def turns_for(client: object) -> tuple[TurnSpec, ...]:
    """A client's turns (its ``name``: claude-code, codex, openclaw)."""
    return _BY_CLIENT[getattr(client, "name")]


def names() -> list[str]:
    """Every turn name, in the order the clients run them."""
    return list(dict.fromkeys(t.name for specs in _BY_CLIENT.values() for t in specs))
