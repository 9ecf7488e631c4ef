"""Forwarder to conformance/session.py (the test session `hc` was named `Harness` here): kept only until
conformance/plugin.py and tests/conformance/test_coverage.py import `session`; then delete it."""

from harnesscheck.conformance.session import Endpoint, Session, api_key_from_env, discover_model, paths_in

Harness = Session

__all__ = ["Endpoint", "Harness", "Session", "api_key_from_env", "discover_model", "paths_in"]
