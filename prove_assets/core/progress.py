"""Progress of long steps, for whoever listens in this process (the CLI's progress bar).

Assets report `(what, done, total, detail)` through the Dagster layer's progress logger; a
listener registered with `listening` receives every report of the runs executed in this
process (headless `execute_in_process` runs). Runs launched from the UI have no listener: their
progress is in the run log only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str, int, int, str], None]

_listeners: list[Listener] = []
_lock = threading.Lock()


def report(what: str, done: int, total: int, detail: str = "") -> None:
    """Tell every listener that `done` of `total` `what` are done (detail: free text)."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(what, done, total, detail)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Receive every progress report made while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
