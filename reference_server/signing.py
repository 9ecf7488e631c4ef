"""Opaque tokens for reasoning the client must send back unchanged.

Anthropic thinking blocks carry a `signature`; Responses reasoning items carry
`encrypted_content` when `include: ["reasoning.encrypted_content"]` is asked. Both are produced
here: a keyed MAC of the text (opaque, as a real signature is; nothing here checks it when it
comes back) and a reversible packing of the reasoning text
(so a stateless client that sends the item back gets the reasoning into the next prompt).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import zlib

_KEY = b"harnesscheck-reference-server"


def sign(text: str) -> str:
    mac = hmac.new(_KEY, text.encode(), hashlib.sha256).digest()
    return base64.b64encode(b"hc1" + mac).decode()


def pack_reasoning(text: str) -> str:
    blob = zlib.compress(json.dumps({"v": 1, "r": text}, ensure_ascii=False).encode())
    return "hc1." + base64.urlsafe_b64encode(blob).decode() + "." + sign(text)[4:20]


def unpack_reasoning(token: str) -> str | None:
    """The reasoning text, or None when the token is not ours or was tampered with."""
    try:
        _, blob, _ = token.split(".", 2)
        data = json.loads(zlib.decompress(base64.urlsafe_b64decode(blob.encode())))
        text = data["r"]
    except Exception:
        return None
    return text if pack_reasoning(text) == token else None
