"""A model checkpoint's own tokenizer, chat template and end ids, shared by every engine.

`load_checkpoint(path)` reads a Hugging Face model directory without torch or transformers:
`tokenizer.json` (the fast-tokenizer file: the model's own ids and special tokens, read with the
`tokenizers` library), `tokenizer_config.json` (`chat_template`, `bos_token`, `eos_token`),
`chat_template.jinja` (where newer transformers save the template), `generation_config.json` and
`config.json` (`eos_token_id`, one id or a list; `vocab_size`).

A `.gguf` file is read through a Hugging Face copy beside it (`<name>-hf/`): the first use
converts it with transformers' GGUF support (dequantised weights, tokenizer, the GGUF's
`tokenizer.chat_template` when it has one; slow: minutes for a 270M model on two busy cores), later
uses read the copy, which records the GGUF's size and modification time it was made from.

The chat template: `--chat-template` (a file, or the name of a built-in template in
`reference_server/templates/`) wins; else the checkpoint's; a checkpoint that ships none and no
`--chat-template` is a start-up error that names the files looked in.

`python -m harnesscheck.reference_server.checkpoint FILE.gguf [OUT_DIR]` makes the copy ahead of time.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.reference_server.tokenizer import Tokenizer

log = logging.getLogger("harnesscheck.checkpoint")

TEMPLATES = Path(__file__).resolve().parent / "templates"
CONVERTED = "harnesscheck-converted.json"  # written into a GGUF's Hugging Face copy


class CheckpointError(ValueError):
    """The checkpoint cannot be served as given; the message names what is missing and what to do."""


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """A chat template's Jinja text and where it came from (shown in /v1/models metadata)."""

    text: str
    origin: str  # "tokenizer_config.json", "chat_template.jinja", "--chat-template FILE", "built-in NAME"
    builtin: str | None = None  # the file name in reference_server/templates/ when it is one of ours


@dataclass(slots=True)
class Checkpoint:
    """What the server needs from a model directory, read once at start-up."""

    path: str  # what --model-path named (a directory or a .gguf file)
    model_dir: Path  # the Hugging Face directory the weights are loaded from
    tokenizer: Tokenizer
    template: TemplateSource
    bos_token: str | None
    eos_token: str | None
    end_ids: tuple[int, ...]  # every id that ends generation: the model's eos ids (config, generation config)
    vocab_size: int | None  # the model's (config.json), which may exceed the tokenizer's (padding)
    special_tokens: dict[str, int] = field(default_factory=dict)
    gguf_file: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "model_dir": str(self.model_dir), "gguf_file": self.gguf_file,
                "tokenizer": "tokenizer.json", "tokenizer_vocab_size": self.tokenizer.vocab_size,
                "model_vocab_size": self.vocab_size, "bos_token": self.bos_token, "eos_token": self.eos_token,
                "end_ids": list(self.end_ids), "chat_template": self.template.origin}


def _read_json(file: Path) -> dict[str, Any]:
    if not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{file} is not valid JSON: {error}") from error
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _ids(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def builtin_template(name: str) -> TemplateSource:
    """A template the server ships, by name (`chatml`, `chatml.jinja`, ...)."""
    file = name if name.endswith(".jinja") else f"{name}.jinja"
    path = TEMPLATES / file
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
        raise CheckpointError(f"no built-in chat template {name!r} (known: {known})")
    return TemplateSource(text=path.read_text(encoding="utf-8"), origin=f"built-in {file}", builtin=file)


def template_from_option(value: str) -> TemplateSource:
    """`--chat-template VALUE`: a Jinja file, else the name of a built-in template."""
    path = Path(value)
    if path.is_file():
        return TemplateSource(text=path.read_text(encoding="utf-8"), origin=f"--chat-template {path}")
    looks_like_path = os.sep in value or value.endswith((".jinja", ".j2"))
    if looks_like_path and not (TEMPLATES / value).is_file():
        raise CheckpointError(f"--chat-template {value}: no such file")
    return builtin_template(value)


def _checkpoint_template(model_dir: Path, config: dict[str, Any]) -> TemplateSource | None:
    raw = config.get("chat_template")
    if isinstance(raw, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in raw if isinstance(t, dict)}
        raw = named.get("default") or next((v for v in named.values() if isinstance(v, str)), None)
    if isinstance(raw, str) and raw.strip():
        return TemplateSource(text=raw, origin="tokenizer_config.json chat_template")
    jinja_file = model_dir / "chat_template.jinja"
    if jinja_file.is_file():
        return TemplateSource(text=jinja_file.read_text(encoding="utf-8"), origin="chat_template.jinja")
    return None


def load_checkpoint(path: str | Path, *, chat_template: str | None = None) -> Checkpoint:
    """Read the checkpoint at `path` (a model directory or a .gguf file); see the module docstring."""
    given = Path(path)
    if not given.exists():
        raise CheckpointError(f"model path {str(given)!r} does not exist")
    gguf_file = None
    model_dir = given
    if given.is_file():
        if given.suffix != ".gguf":
            raise CheckpointError(f"{str(given)!r} is a file but not a .gguf: pass a model directory or a .gguf file")
        gguf_file = given.name
        model_dir = converted_dir(given)
    tokenizer_file = model_dir / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise CheckpointError(f"{str(model_dir)!r} has no tokenizer.json: the server reads the checkpoint's own "
                              "tokenizer from that file (a Hugging Face fast tokenizer); a .gguf file is converted "
                              "to that layout on first use")
    tokenizer = Tokenizer.from_file(tokenizer_file)
    tok_config = _read_json(model_dir / "tokenizer_config.json")
    gen_config = _read_json(model_dir / "generation_config.json")
    model_config = _read_json(model_dir / "config.json")
    inner = model_config.get("text_config")
    text_config: dict[str, Any] = inner if isinstance(inner, dict) else {}

    if chat_template:
        template = template_from_option(chat_template)
    else:
        found = _checkpoint_template(model_dir, tok_config)
        if found is None:
            where = f"{model_dir}/tokenizer_config.json (chat_template) and {model_dir}/chat_template.jinja"
            if gguf_file:
                where += f", and {gguf_file}'s tokenizer.chat_template metadata"
            raise CheckpointError(f"the checkpoint ships no chat template (looked in {where}); pass "
                                  "--chat-template FILE (a Jinja chat template) or the name of a built-in one "
                                  f"({', '.join(sorted(p.stem for p in TEMPLATES.glob('*.jinja')))})")
        template = found

    special = {t["content"]: t["id"] for t in json.loads(tokenizer.hf.to_str()).get("added_tokens", [])
               if isinstance(t, dict) and t.get("special")}
    bos = _token_text(tok_config.get("bos_token"))
    eos = _token_text(tok_config.get("eos_token"))
    end: list[int] = []
    for source in (gen_config, model_config, text_config):
        end.extend(_ids(source.get("eos_token_id")))
    eos_id = tokenizer.hf.token_to_id(eos) if eos is not None else None
    if eos_id is not None:
        end.append(eos_id)
    if eos is None and end:
        eos = tokenizer.hf.id_to_token(end[0])
    vocab = model_config.get("vocab_size") or text_config.get("vocab_size")
    return Checkpoint(path=str(given), model_dir=model_dir, tokenizer=tokenizer, template=template,
                      bos_token=bos, eos_token=eos, end_ids=tuple(dict.fromkeys(end)),
                      vocab_size=int(vocab) if isinstance(vocab, int) else None, special_tokens=special,
                      gguf_file=gguf_file)


# --- GGUF: a Hugging Face copy beside the file -------------------------------------------------------


def _stamp(gguf: Path) -> dict[str, Any]:
    st = gguf.stat()
    return {"gguf": gguf.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def converted_dir(gguf: Path, out_dir: Path | None = None) -> Path:
    """The Hugging Face copy of `gguf` (`<stem>-hf/` beside it unless `out_dir`), made now if it is
    missing or was made from another file."""
    out = out_dir or gguf.with_name(f"{gguf.stem}-hf")
    stamp = _read_json(out / CONVERTED)
    if stamp.get("source") == _stamp(gguf) and (out / "tokenizer.json").is_file():
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CheckpointError(f"cannot write the Hugging Face copy of {gguf.name} at {out} ({error}); make it "
                              f"elsewhere with `python -m harnesscheck.reference_server.checkpoint {gguf} OUT_DIR` and pass "
                              "--model-path OUT_DIR") from error
    convert_gguf(gguf, out)
    return out


def convert_gguf(gguf: Path, out: Path) -> dict[str, Any]:
    """Write the Hugging Face layout of a GGUF checkpoint into `out` (transformers, torch and gguf
    needed): dequantised weights (safetensors), tokenizer files, the GGUF's chat template if any."""
    try:
        import torch  # noqa: F401 - transformers needs it to load weights
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise CheckpointError(f"{gguf.name}: converting a GGUF file needs torch, transformers and gguf "
                              f"({error}); pip install torch transformers gguf accelerate") from error
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise CheckpointError(f"{gguf.name}: transformers reads GGUF files only with the `gguf` package "
                              "(pip install gguf); it is not installed")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    log.warning("converting %s to Hugging Face layout in %s (once; minutes on a CPU)", gguf, out)
    t0 = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    t1 = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    t2 = time.monotonic()
    tokenizer.save_pretrained(out)
    # The weights were dequantised on load; the GGUF marker would refuse the save ("not serializable").
    model.hf_quantizer = None
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    template = _gguf_chat_template(gguf)
    if template:
        (out / "chat_template.jinja").write_text(template, encoding="utf-8")
    record = {"source": _stamp(gguf), "created_by": "harnesscheck.reference_server.checkpoint",
              "seconds": {"tokenizer": round(t1 - t0, 1), "model": round(t2 - t1, 1),
                          "total": round(time.monotonic() - t0, 1)},
              "chat_template": "from the GGUF" if template else "none in the GGUF"}
    (out / CONVERTED).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def _gguf_chat_template(gguf: Path) -> str | None:
    from gguf import GGUFReader

    field_ = GGUFReader(str(gguf)).fields.get("tokenizer.chat_template")
    if field_ is None:
        return None
    value = field_.contents()
    return value if isinstance(value, str) and value.strip() else None


if __name__ == "__main__":  # python -m harnesscheck.reference_server.checkpoint FILE.gguf [OUT_DIR]
    import sys

    logging.basicConfig(level=logging.INFO)
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m harnesscheck.reference_server.checkpoint FILE.gguf [OUT_DIR]")
    source = Path(sys.argv[1])
    target = converted_dir(source, Path(sys.argv[2]) if len(sys.argv) == 3 else None)
    print(f"{source} -> {target}")
