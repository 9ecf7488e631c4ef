"""The reference server's preamble strip takes every real form of Claude Code's billing header (issue
36): the forms written out from the installed Claude Code 2.1.197's binary and the article, not from the
strip's own pattern."""

from __future__ import annotations

import pytest

from harnesscheck.reference_server.pipeline.preamble import strip_billing_header

FORMS = [
    "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=sdk-cli;",  # claude -p, measured
    "x-anthropic-billing-header: cc_version=2.1.197.3b9; cc_entrypoint=cli;",
    "x-anthropic-billing-header: cc_version=2.1.197.fa0; cc_entrypoint=sdk-cli; cch=00000;",  # some providers
    "x-anthropic-billing-header: cc_version=2.1.197.0c1; cc_entrypoint=cli; cc_workload=cron;",
    "x-anthropic-billing-header: cc_version=2.1.197.0c1; cc_entrypoint=cli; cc_is_subagent=true;",
    "x-anthropic-billing-header: cc_version=0.2.93; cch=abc123def456==;",  # the article's (older clients)
]
STABLE = "You are Claude Code, a coding agent.\nRule 1: keep changes small."


@pytest.mark.parametrize("header", FORMS)
def test_every_real_form_is_stripped_as_its_own_block(header: str) -> None:
    assert strip_billing_header([header, STABLE]) == [STABLE]
    assert strip_billing_header([header]) == []  # the header as the only system block


@pytest.mark.parametrize("header", FORMS)
def test_every_real_form_is_stripped_as_a_first_line(header: str) -> None:
    assert strip_billing_header([f"{header}\n{STABLE}"]) == [STABLE]


def test_text_that_is_not_the_header_stays() -> None:
    assert strip_billing_header([STABLE, FORMS[0]]) == [STABLE, FORMS[0]]  # not at position 0
