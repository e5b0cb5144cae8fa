"""ib_async's asyncio loop on a thread of its own, and connecting to TWS from it.

The OMS and the live loop are synchronous and call from the main thread; ib_async is asyncio
and must only be touched from its loop (it sends from the running loop). `LoopThread` runs that
loop on a daemon thread: callers post work to it (never waiting) or wait for an answer with a
timeout. Nothing on the loop ever calls back into the caller's objects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import ib_async

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the loop soon; its errors are logged, never raised here."""

        def guarded() -> None:
            try:
                fn(*args)
            except Exception:
                log.exception("%s failed on the IB thread", getattr(fn, "__name__", fn))

        self.loop.call_soon_threadsafe(guarded)

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(_awaited(coro), self.loop)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 10.0) -> T:
        """`fn(*args)` run on the loop; its result here (TimeoutError after `timeout`)."""

        async def run() -> T:
            return fn(*args)

        return self.submit(run()).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


def connect_error(exc: BaseException, host: str, port: int, client_id: int, timeout_s: float,
                  said: list[str]) -> str:  # fmt: skip
    """One line on why connecting to TWS failed; `said` holds what TWS answered meanwhile."""
    where = f"TWS/IB Gateway at {host}:{port} (client id {client_id})"
    if isinstance(exc, ConnectionRefusedError):
        why = ("nothing listens there: start TWS or IB Gateway and enable the API "
               "(paper: TWS 7497, Gateway 4002; live: 7496, 4001)")
    elif said:
        why = said[-1]
    elif isinstance(exc, TimeoutError | asyncio.TimeoutError | concurrent.futures.TimeoutError):
        why = (f"no API answer within {timeout_s:g}s (is the port TWS's API port, is the client "
               "id already in use, is 127.0.0.1 in TWS's trusted IPs?)")
    elif isinstance(exc, OSError):
        why = exc.strerror or str(exc) or type(exc).__name__
    else:
        why = str(exc) or type(exc).__name__
    return f"cannot connect to {where}: {why}"


def tap(wrapper: ib_async.Wrapper, name: str, handler: Callable[..., None]) -> None:
    """Call `handler` with the raw arguments of every `name` message after ib_async's own
    handling. The venue maps IB's raw messages, not ib_async's Trade events: those fire only
    on a change, skip executions of orders ib_async does not know and turn every order error
    into a cancel."""
    original = getattr(wrapper, name)

    def tapped(*args: Any) -> None:
        original(*args)
        try:
            handler(*args)
        except Exception:
            log.exception("IB %s message %r could not be mapped", name, args[:3])

    setattr(wrapper, name, tapped)
