"""run.server comes from the endpoint's own /v1/models metadata, or says it does not know."""

from __future__ import annotations

import socket
from collections.abc import Callable

from harnesscheck.protocol.wire.server_info import server_info


def test_reference_server_describes_its_engine(server_factory: Callable[..., str]) -> None:
    url = server_factory()
    info = server_info(url, "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", kind="embedded", faults=["x"])
    assert info["kind"] == "embedded" and info["faults"] == ["x"]
    assert info["engine"] == "scripted" and info["timing"] == "scripted-model"
    assert info["engine_settings"]["engine"] == "scripted"


def test_unreachable_or_silent_endpoint_is_unknown() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    info = server_info(f"http://127.0.0.1:{port}", "m", kind="external", timeout=2)
    assert info == {"kind": "external", "engine": None, "faults": [], "timing": "unknown"}
