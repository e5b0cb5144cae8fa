"""Accounts the server reads often, each folded once and kept current.

Opening an account folds its whole log, which grows with every bar a trader writes; a server
answering a dashboard several times a second cannot pay that per request. `OpenAccounts` keeps
each account's engine (no venue: it only reads) and brings it up to date with `follow()` (the
events appended since) before answering. An account whose trader's arguments file changed (a
new run, other risk limits) is folded afresh; the least recently used beyond `limit` is closed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class _Entry:
    def __init__(self, engine, url: str, stamp: float | None):
        self.engine, self.url, self.stamp = engine, url, stamp
        self.lock = threading.Lock()


class OpenAccounts:
    def __init__(self, open_engine: Callable[[str], tuple[Any, str]],
                 meta_file: Callable[[str], Path], limit: int = 64):
        self.open_engine, self.meta_file, self.limit = open_engine, meta_file, limit
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def _stamp(self, account: str) -> float | None:
        try:
            return self.meta_file(account).stat().st_mtime_ns
        except OSError:
            return None

    def use(self, account: str, fn: Callable[[Any, str], T]) -> T:
        """`fn(engine, url)` on the account as its log stands now."""
        stamp = self._stamp(account)
        with self._lock:
            entry = self._entries.get(account)
            if entry is not None:
                self._entries.move_to_end(account)
        if entry is not None and entry.stamp == stamp:
            with entry.lock:
                entry.engine.follow()
                return fn(entry.engine, entry.url)
        engine, url = self.open_engine(account)
        fresh = _Entry(engine, url, stamp)
        with self._lock:
            old = self._entries.pop(account, None)
            self._entries[account] = fresh
            evicted = [self._entries.popitem(last=False)[1]
                       for _ in range(max(0, len(self._entries) - self.limit))]
        for e in [x for x in (old, *evicted) if x is not None]:
            with e.lock:
                e.engine.store.close()
        with fresh.lock:
            return fn(fresh.engine, fresh.url)

    def close(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), OrderedDict()
        for e in entries:
            with e.lock:
                e.engine.store.close()
