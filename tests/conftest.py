"""Shared fixtures: real reference-server subprocesses over loopback HTTP (no mocks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from reference_server.launch import ServerProcess

FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")


@pytest.fixture(scope="session")
def reference_server() -> Iterator[str]:
    """The URL of one default-config server (no modelled delays), shared by the whole session."""
    with ServerProcess(FAST) as server:
        yield server.url


@pytest.fixture(scope="module")
def server_factory() -> Iterator[Callable[..., str]]:
    """`server_factory("--no-enable-anthropic-api")` -> URL of a server with extra flags.

    Servers start fast (no modelled delays) unless the args set their own timing; they live until
    the end of the module that asked for them.
    """
    started: list[ServerProcess] = []

    def start(*args: str, fast: bool = True) -> str:
        server = ServerProcess([*(FAST if fast else ()), *args]).start()
        started.append(server)
        return server.url

    yield start
    for server in started:
        server.stop()
