"""Real-client tests are opt-in: ``@pytest.mark.e2e`` runs only with HARNESSCHECK_E2E=1.

Then each client is installed (once, into the cache folder) within HARNESSCHECK_E2E_INSTALL_BUDGET
seconds (default 300); a client that cannot be installed in time (registry slow or unreachable,
no npm) is skipped with the reason, so CI never hangs or fails on the registry.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("HARNESSCHECK_E2E") == "1":
        return
    skip = pytest.mark.skip(reason="real-client e2e test: set HARNESSCHECK_E2E=1 to run (installs from npm)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def e2e_install():
    from conformance.clients import install

    budget = float(os.environ.get("HARNESSCHECK_E2E_INSTALL_BUDGET", "300"))
    cache: dict[str, install.Install] = {}

    def get(name: str) -> install.Install:
        if name not in cache:
            cache[name] = install.ensure(name, timeout=budget)
        if not cache[name].ok:
            pytest.skip(f"{name} not installed: {cache[name].skip}")
        return cache[name]

    return get
