"""Joining Ray: the one place the kit connects to a Ray cluster or starts a local one.

Ray is an optional extra (``pip install 'harnesscheck[ray]'``) and is imported only when called:
``import_ray()`` gives the module or raises ``RayUnavailable`` with ``INSTALL_HINT``;
``ray_session(address, num_cpus=...)`` is a connected ``ray`` for a ``with`` block. Used by
``replay --ray`` (``harnesscheck.replay.distributed``) and ``swebench run --ray``
(``harnesscheck.agents.distributed``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

__all__ = ["INSTALL_HINT", "RayUnavailable", "import_ray", "ray_session"]

INSTALL_HINT = "--ray needs Ray: pip install 'harnesscheck[ray]' (or: pip install 'ray>=2.40')"


class RayUnavailable(RuntimeError):
    """Ray is not installed; the message says how to install it."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or RayUnavailable with ``INSTALL_HINT``."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(INSTALL_HINT) from exc
    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[ModuleType]:
    """A connected ``ray``: the session already open in this process, else ``ray.init(address)``
    (``None``: RAY_ADDRESS, or a cluster started on this machine, or a new local instance with
    ``num_cpus``), shut down on the way out only when it was opened here. The SIGTERM handler in
    place before is put back after ``ray.init``, which replaces it."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": "warning"}
    if address:
        kwargs["address"] = address
    else:
        kwargs.update(num_cpus=num_cpus, include_dashboard=False)
    main_thread = threading.current_thread() is threading.main_thread()
    on_term = signal.getsignal(signal.SIGTERM) if main_thread else None
    ray.init(**kwargs)
    if main_thread:  # ray.init sets its own SIGTERM handler; the CLI's stops the run cleanly (exit 130)
        signal.signal(signal.SIGTERM, on_term)
    try:
        yield ray
    finally:
        ray.shutdown()
