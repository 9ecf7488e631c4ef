"""Shared fixtures: real reference-server subprocesses over loopback HTTP (no mocks); the tiers of the
run; no process left behind.

Tiers: the README's `python -m pytest -n 2` runs everything but the tests marked `slow` (real-compute
engines at CPU size, soaks, peers' fidelity, the nightly workflow's three nights, the local Ray
cluster), which it deselects and names at the end; `python -m
pytest -n 2 -m slow` runs them (CI runs both, .ci/run). A slow test named on the command line (its
file or node id) runs anyway, as does any run given its own `-m`.

Stopping: every server the fixtures here start runs in a process group of its own (tests/processes.py)
and is ended with its fixture, or at the exit of the process that started it; SIGTERM to pytest or
to an xdist worker is an interruption like Ctrl-C, so teardowns run (tests/test_no_process_left.py).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator

import pytest

import tests.fuzzing  # noqa: F401 (registers CI's hypothesis profile before `--hypothesis-profile` is read)
from tests.processes import GroupServer, end_all_groups

FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
SLOW_TIER = "python -m pytest -n 2 -m slow"


def pytest_configure(config: pytest.Config) -> None:
    _interrupt_on_sigterm()


def pytest_unconfigure(config: pytest.Config) -> None:
    end_all_groups()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """After the fixtures' teardown: end what is left, also in an xdist worker that was interrupted
    (it lingers until the controller ends, and must not keep its servers meanwhile)."""
    end_all_groups()
    if "harnesscheck.conformance.forked" in __import__("sys").modules:
        from harnesscheck.conformance.forked import close_all

        close_all()


def _interrupt_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt in this process's main thread, as Ctrl-C does, so pytest ends
    the session, tears the fixtures down (stopping their servers) and reports; a second SIGTERM ends
    the process at once. Left alone when something else handles SIGTERM already."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture(scope="session")
def reference_server() -> Iterator[str]:
    """The URL of one default-config server (no modelled delays), shared by the whole session."""
    with GroupServer(FAST) as server:
        yield server.url


@pytest.fixture(scope="module")
def server_factory() -> Iterator[Callable[..., str]]:
    """`server_factory("--no-enable-anthropic-api")` -> URL of a server with extra flags.

    Servers start fast (no modelled delays) unless the args set their own timing; they live until
    the end of the module that asked for them.
    """
    started: list[GroupServer] = []

    def start(*args: str, fast: bool = True) -> str:
        server = GroupServer([*(FAST if fast else ()), *args]).start()
        started.append(server)
        return server.url

    yield start
    for server in started:
        server.stop()


# --- Real-client tests (tests/clients, tests/agents/test_toy_codex_e2e.py) ----------------------------
# Real-client tests are opt-in: ``@pytest.mark.e2e`` runs only with HARNESSCHECK_E2E=1.
# 
# Then each client is installed (once, into the cache folder) within HARNESSCHECK_E2E_INSTALL_BUDGET
# seconds (default 300; 0: use the cache only); a client that cannot be installed in time (registry
# slow or unreachable, no npm) or whose binary is missing or does not start is skipped with the
# reason, so CI never hangs or fails on the registry. .ci/run installs the clients first
# (``python -m harnesscheck.agents.clients --budget S``) and sets HARNESSCHECK_E2E=1 when that worked.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _deselect_the_slow_tier(config, items)
    if os.environ.get("HARNESSCHECK_E2E") == "1":
        return
    why = os.environ.get("HARNESSCHECK_E2E_SKIP")  # .ci/run says why the clients are not there
    skip = pytest.mark.skip(reason=f"real-client e2e test: {why}" if why else
                            "real-client e2e test: set HARNESSCHECK_E2E=1 to run (installs from npm)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def e2e_install():
    """``get(name)``: the client's install, or a skip with the reason (not installed in the budget,
    or its binary missing / not starting). HARNESSCHECK_E2E_INSTALL_BUDGET=0 uses the cache only
    (CI installs beforehand with ``python -m harnesscheck.agents.clients``)."""
    from harnesscheck.agents.clients import install

    budget = float(os.environ.get("HARNESSCHECK_E2E_INSTALL_BUDGET", "300"))
    cache: dict[str, tuple[install.Install | None, str]] = {}

    def get(name: str) -> install.Install:
        if name not in cache:
            if budget > 0:
                inst: install.Install | None = install.ensure(name, timeout=budget)
            else:
                inst = install.installed(name)
            if inst is None:
                why = f"not in the cache {install.cache_dir()} (HARNESSCHECK_E2E_INSTALL_BUDGET=0: no install)"
            else:
                why = inst.skip or install.runnable(name, inst)
            cache[name] = (inst, why)
        inst, why = cache[name]
        if why or inst is None:
            pytest.skip(f"{name} not usable: {why}")
        return inst

    return get


def _deselect_the_slow_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without `-m`, tests marked `slow` are left out unless their file or node id was named."""
    if config.option.markexpr:
        return
    named = {(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args}
    slow = [item for item in items if "slow" in item.keywords and item.path.resolve() not in named]
    if slow:
        config.hook.pytest_deselected(items=slow)
        keep = set(map(id, slow))
        items[:] = [item for item in items if id(item) not in keep]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not config.option.markexpr and not hasattr(config, "workerinput"):
        terminalreporter.write_line(f"slow tier (real-compute engines, soaks, peers, nightly workflow, Ray): {SLOW_TIER}")
