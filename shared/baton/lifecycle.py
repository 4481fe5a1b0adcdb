"""What a process runs when its execution environment shuts down, before the services it uses
stop.

Lambda discards an execution environment without calling anything, so in AWS nothing runs these.
``baton dev`` runs every function in its own process: at its stop it calls them after the last
request has been answered and before it stops the database, so the functions' connections
(pools, the LISTEN connection of long-polls) close cleanly instead of breaking under them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_hooks: list[Callable[[], None]] = []
_lock = threading.Lock()


def on_shutdown(hook: Callable[[], None]) -> None:
    """Have ``hook`` called at the environment's shutdown (once, however often registered)."""
    with _lock:
        if hook not in _hooks:
            _hooks.append(hook)


def shutdown() -> None:
    """Call the hooks, the last registered first; a failure is logged and the rest still run."""
    with _lock:
        hooks = list(reversed(_hooks))
        _hooks.clear()
    for hook in hooks:
        try:
            hook()
        except Exception:
            name = getattr(hook, "__qualname__", repr(hook))
            log.exception("a shutdown hook failed", extra={"hook": name})
