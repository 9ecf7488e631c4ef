"""A check is one catalog entry (issue 44, part 3): how the kit runs a check (whether it holds the
endpoint alone, which levers may bend its requests, whether it judges a refused history itself, whose
request shape it sends) is a keyword field of its `catalog.Check`, and plugin.py and levers.py name no
check: they read the entry. The fields say what the tables keyed by check id said before them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harnesscheck.conformance import catalog, levers
from harnesscheck.protocol import apis

CONFORMANCE = Path(catalog.__file__).resolve().parent
READERS = ("plugin.py", "levers.py")

# The tables as they were (main at f5d09c9: plugin.py TIMING_SENSITIVE, _WITNESS_CHECKS,
# _JUDGES_REFUSED_HISTORY; levers.py UNFORCED, UNLEVERED, OWN_FORCING; catalog.CLIENT_SHAPES; the
# "-CLIENT-" in check.id tests of impact.py and results.py).
OLD_TIMING = {"AN-HIST-001": "timing witness", "RS-HIST-001": "timing witness", "AN-HIST-002": "timing witness",
              "CH-HIST-002": "timing witness", "RS-HIST-002": "timing witness",
              "AN-PREAMBLE-001": "prefix-cache timing", "AN-PREAMBLE-002": "prefix-cache timing"}
OLD_WITNESS = {"AN-HIST-001", "RS-HIST-001", "AN-HIST-002", "CH-HIST-002", "RS-HIST-002"}
OLD_JUDGES_REFUSED = {f"{apis.get(name).PREFIX}-TURN-001" for name in apis.NAMES}
OLD_UNFORCED = {f"{p}-TOOLS-{n}" for p in apis.PREFIXES for n in ("002", "003")}
OLD_UNLEVERED = {"AN-HIST-003"}
OLD_OWN_FORCING = {f"{p}-TOOLS-{n}" for p in apis.PREFIXES for n in ("001", "005", "006")}
OLD_CLIENT_SHAPES = {"AN-REQ-003": "claude-code", "RS-REQ-001": "codex", "AN-CLIENT-001": "claude-code",
                     "AN-CLIENT-002": "openclaw", "RS-CLIENT-001": "codex", "RS-CLIENT-002": "codex",
                     "RS-CLIENT-003": "openclaw:responses", "CH-CLIENT-001": "openclaw:chat"}


def _old_allowed(names: list[str], check_id: str) -> bool:
    names = [n for n in names if n in levers.BY_NAME]
    if check_id in OLD_UNLEVERED:
        return not names
    if check_id in OLD_OWN_FORCING:
        return all(n in levers.THINKING_OFF for n in names)
    return not (check_id in OLD_UNFORCED and any(levers.BY_NAME[n].forcing for n in names))


def check_ids_in(source: str) -> list[str]:
    """Every check id a module's source names: an id written out (`AN-HIST-003`), one built from a prefix
    (`f"{p}-TOOLS-001"`, `PREFIX}-TURN-`), or a check's contract between dashes (`"-CLIENT-" in ...`)."""
    found = re.findall(r"\b[A-Z]{2}-[A-Z]+-\d{3}\b", source)
    found += re.findall(r"\}-[A-Z]+-", source)
    contracts = {c.contract for c in catalog.CHECKS}
    found += [m for m in re.findall(r"-([A-Z]+)-", source) if m in contracts]
    return found


@pytest.mark.parametrize("name", READERS)
def test_plugin_and_levers_name_no_check(name: str) -> None:
    source = (CONFORMANCE / name).read_text(encoding="utf-8")
    assert check_ids_in(source) == [], f"{name} names checks: read the catalog entry's fields instead"


def test_the_scan_finds_an_id_in_every_form() -> None:
    """The scan above is no blind one: each way a check id was written in these modules is found."""
    for written in ('UNLEVERED = frozenset({"AN-HIST-003"})', 'frozenset(f"{p}-TOOLS-{n}" for p in PREFIXES)',
                    'f"{apis.get(name).PREFIX}-TURN-001"', 'if "-CLIENT-" in check.id:'):
        assert check_ids_in(written), written
    assert check_ids_in("CH-GRAMMAR-FINISH-TOOL-CALLS, a rule; --hc-endpoint; budget-x4") == []


def test_timing_fields_hold_the_endpoint_as_the_old_table_did() -> None:
    assert {c.id: c.timing for c in catalog.CHECKS if c.timing} == OLD_TIMING
    for check in catalog.CHECKS:
        for witness in ("auto", "timing", "tokenize", "cache"):
            old = check.id in OLD_TIMING and not (check.id in OLD_WITNESS and witness in ("tokenize", "cache"))
            assert check.holds_endpoint_alone(witness) is old, (check.id, witness)


def test_lever_policies_allow_what_the_old_tables_allowed() -> None:
    names = [lever.name for lever in levers.LADDER]
    for check in catalog.CHECKS:
        for name in names:
            assert levers.allowed([name], check.id) is _old_allowed([name], check.id), (check.id, name)
        assert levers.allowed(names, check.id) is _old_allowed(names, check.id), check.id
        for api in apis.NAMES:
            ladder = [lever.name for lever in levers.ladder(api, catalog.PATHS, check_id=check.id)]
            old = [] if check.id in OLD_UNLEVERED else [
                lever.name for lever in levers.LADDER if lever.applies(api)
                and not (lever.forcing and check.id in OLD_UNFORCED) and _old_allowed([lever.name], check.id)]
            assert ladder == old, (check.id, api)
    assert {c.id for c in catalog.CHECKS if c.levers == catalog.LEVERS_NONE} == OLD_UNLEVERED
    assert {c.id for c in catalog.CHECKS if c.levers == catalog.LEVERS_UNFORCED} == OLD_UNFORCED
    assert {c.id for c in catalog.CHECKS if c.levers == catalog.LEVERS_OWN_FORCING} == OLD_OWN_FORCING


def test_refused_history_and_client_fields_match_the_old_tables() -> None:
    assert {c.id for c in catalog.CHECKS if c.judges_refused_history} == OLD_JUDGES_REFUSED
    assert {c.id: c.client_shape for c in catalog.CHECKS if c.client_shape} == OLD_CLIENT_SHAPES
    assert {c.id for c in catalog.CHECKS if c.replays_client} == {c.id for c in catalog.CHECKS if "-CLIENT-" in c.id}


def test_an_unknown_policy_or_timing_is_refused() -> None:
    with pytest.raises(ValueError, match="lever policy"):
        catalog.Check("XX-NEW-001", catalog.ANY, "t", catalog.SHOULD, "s", "r", (), levers="some")
    with pytest.raises(ValueError, match="timing"):
        catalog.Check("XX-NEW-001", catalog.ANY, "t", catalog.SHOULD, "s", "r", (), timing="slow")
