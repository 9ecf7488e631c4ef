"""SSE parsing of one recorded stream (the three adapters' output for a long tool-calling turn,
~600 KB, read in 512-byte network chunks): the kit's spec decoder
(``protocol.wire.sse.SSEDecoder``) and the timed client's fast path (``replay.client.FastSSE``)
against httpx-sse's decoder (lines split the way ``EventSource.iter_sse`` does) and the anthropic
SDK's ``SSEDecoder.iter_bytes``."""

from __future__ import annotations

import pytest

CHUNK = 512


@pytest.fixture(scope="module")
def stream(corpus):
    data = b"".join(corpus.sse.values())
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
    n = data.count(b"\n\n")
    return chunks, n


def _kit(chunks):
    from harnesscheck.protocol.wire.sse import SSEDecoder

    d = SSEDecoder()
    out = []
    for c in chunks:
        out += d.feed(c)
    out += d.flush()
    return sum(1 for f in out if f.kind == "event")


def _fast(chunks):
    from harnesscheck.replay.client import FastSSE

    d = FastSSE()
    n = 0
    for c in chunks:
        n += len(d.feed(c))
    return n + len(d.flush())


def _httpx_sse(chunks):
    from httpx_sse._decoders import SSEDecoder

    d = SSEDecoder()
    n = 0
    pending = ""
    for c in chunks:  # httpx's line splitting (aiter_lines), then the decoder per line
        pending += c.decode("utf-8")
        lines = pending.split("\n")
        pending = lines.pop()
        for line in lines:
            if d.decode(line) is not None:
                n += 1
    if pending and d.decode(pending) is not None:
        n += 1
    return n


def _anthropic(chunks):
    from anthropic._streaming import SSEDecoder

    return sum(1 for _ in SSEDecoder().iter_bytes(iter(chunks)))


#: benchmark id -> the decoder it times (ids named in conftest.RATIOS)
DECODERS = {
    "kit_sse_decoder": _kit,
    "kit_fast_sse": _fast,
    "httpx_sse": _httpx_sse,
    "anthropic_sdk": _anthropic,
}


@pytest.mark.benchmark(group="sse")
@pytest.mark.parametrize("decoder", DECODERS)
def test_sse(benchmark, stream, decoder):
    chunks, n = stream
    assert benchmark(DECODERS[decoder], chunks) == n
