"""The shipped client sessions (scenarios/clients, replayed by conformance/test_client_sessions.py) were
captured from the clients installed here: when a client updates, this says which fixtures to refresh
(``harnesscheck clients --refresh-fixtures``). A client not installed is skipped with the reason."""

from __future__ import annotations

import pytest

from harnesscheck.agents.clients import fixtures, get_client, install
from harnesscheck.scenarios import client_sessions


@pytest.mark.parametrize("name", [s.name for s in fixtures.SESSIONS])
def test_the_shipped_fixture_matches_the_installed_client(name: str) -> None:
    doc = client_sessions.get(name)
    client = get_client(doc["client"], None)
    inst = install.installed(client.install_name)
    if inst is None:
        pytest.skip(f"{client.install_name} is not installed in {install.cache_dir()}: nothing to compare "
                    f"(python -m harnesscheck.agents.clients {client.install_name} installs it)")
    assert inst.version == doc["client_version"], (
        f"{name}: shipped from {doc['label']} {doc['client_version']}, installed {inst.version}: run "
        f"`harnesscheck clients --refresh-fixtures --session {name}`")
    assert all(n != name for n, _, _ in fixtures.stale())


def test_every_session_the_capture_makes_ships() -> None:
    assert {s.name for s in fixtures.SESSIONS} == {d["name"] for d in client_sessions.load_all()}
