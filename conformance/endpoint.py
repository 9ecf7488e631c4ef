"""The endpoint a session of the suite talks to, from the plugin's options (plugin.py's `hc_endpoint`
fixture calls `open_endpoint`): the options validated, the embedded reference server started when no
endpoint is named (or the xdist controller's one taken), an external endpoint's preflight (an unusable
endpoint is one line, not a verdict per check), the model discovered, and the run's Collector started
with the run's header (server, settings; secrets redacted).
"""

from __future__ import annotations

from typing import Any

import pytest

from harnesscheck.conformance.options import (PYTEST_PREFIX, QUICK_LEAVES_OUT, embedded_features, split_apis,
                                              validate_options)
from harnesscheck.conformance.preflight import preflight
from harnesscheck.conformance.results import Collector
from harnesscheck.conformance.session import Endpoint, api_key_from_env, discover_model
from harnesscheck.conformance.sharing import from_controller, start_embedded
from harnesscheck.protocol.wire.redact import redact_args, redact_url
from harnesscheck.protocol.wire.server_info import server_info

__all__ = ["open_endpoint"]


def open_endpoint(config: pytest.Config) -> tuple[Endpoint, Collector, Any]:
    """The session's Endpoint, its Collector, and the embedded server it started itself (None when it
    started none: an external endpoint, or the xdist controller's server); exits pytest (status 2) on
    options that cannot run or an endpoint that cannot be used."""
    url = config.getoption("hc_endpoint")
    server = None
    api_key = api_key_from_env(config.getoption("hc_api_key"))
    timeout = float(config.getoption("hc_timeout"))
    problem = validate_options(endpoint=url, apis=config.getoption("hc_apis"),
                               expect=config.getoption("hc_expect"), tries=int(config.getoption("hc_tries")),
                               timeout=timeout, prefix=PYTEST_PREFIX)
    if problem:
        pytest.exit(f"harnesscheck: {problem}", returncode=2)
    shared_url = from_controller(config).get("embedded_url")
    embedded = not url
    if not url:
        url = shared_url
        if not url:
            server = start_embedded(config)
            url = server.url
    elif not config.getoption("hc_no_preflight"):  # an unusable endpoint: one line, not a verdict per check
        checked = preflight(url, api_key=api_key, model=config.getoption("hc_model"),
                            apis=split_apis(config.getoption("hc_apis")), timeout=timeout, generate=True)
        if not checked.ok:
            pytest.exit(f"harnesscheck: {checked.problem}", returncode=2)
    model = config.getoption("hc_model") or discover_model(url, api_key, timeout)
    expect = set(config.getoption("hc_expect"))
    if embedded:  # the embedded server offers every optional feature
        expect |= embedded_features(config.getoption("hc_server_arg"))
    quick = bool(config.getoption("hc_quick"))
    endpoint = Endpoint(url=url, model=model, api_key=api_key, apis=tuple(split_apis(config.getoption("hc_apis"))),
                        tries=1 if quick else int(config.getoption("hc_tries")), timeout=timeout,
                        expect=frozenset(expect), embedded=embedded,
                        server_args=tuple(config.getoption("hc_server_arg")), witness=config.getoption("hc_witness"),
                        quick=quick, peer=config.getoption("hc_peer") or "",
                        context_window=config.getoption("hc_context_window"))
    collector = Collector.start(
        endpoint="embedded reference server" if embedded else redact_url(url), model=model, apis=list(endpoint.apis),
        server=server_info(url, model, kind="embedded" if embedded else "external", api_key=api_key, timeout=timeout,
                           faults=[a.split("=", 1)[1] for a in endpoint.server_args if a.startswith("--fault=")]),
        settings={"tries": endpoint.tries, "timeout": timeout, "expect": sorted(expect), "witness": endpoint.witness,
                  "server_args": redact_args(endpoint.server_args),
                  **({"quick": list(QUICK_LEAVES_OUT)} if quick else {}),
                  **({"peer": endpoint.peer} if endpoint.peer else {})},
        secrets=endpoint.secrets)
    return endpoint, collector, server
