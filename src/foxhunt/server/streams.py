"""WebSocket fan-out: one follower per account reads what the trader appends to the account's
event log and hands each batch to every subscriber's queue.

A trader writes its log from another process, so the server cannot be told of an append; it
looks for new events every `poll_s` (one `SELECT max(seq)`), in one task per followed account
however many clients watch it, and stops looking when the last one leaves. Clients never poll:
they get each batch, with the account's positions and risk after it, as it is found.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foxhunt.errors import FoxhuntError

log = logging.getLogger("foxhunt.server")

QUEUE_BATCHES = 256
"""A subscriber this many batches behind is cut off (it reconnects and reads the REST views)."""


def _codec():
    from foxhunt.execution.codec import EventCodec

    return EventCodec.shared()


def event_json(seq: int, event, contracts: dict[str, Any] | None = None) -> dict[str, Any]:
    """An event as the log stores it: its kind and fields (decimals as strings), and its seq;
    with `contracts`, a `price` beside any `price_ticks` (the chart's unit)."""
    kind, payload = _codec().encode(event)
    doc = {**json.loads(payload), "seq": seq, "kind": kind, "ts_ns": event.ts_ns}
    ticks = doc.get("price_ticks")
    contract = (contracts or {}).get(doc.get("symbol"))
    if ticks is not None and contract is not None:
        doc["price"] = str(contract.price(ticks))
    return doc


class Batch(dict):
    """A stream message and its JSON `text`, made once (on the follower's thread) for every
    subscriber: a socket sends `text` rather than serialising the same dict once a client."""

    __slots__ = ("text",)

    def __init__(self, doc: dict[str, Any]):
        super().__init__(doc)
        self.text = json.dumps(doc)


class AccountFollower:
    """Follows one account's log for its subscribers."""

    def __init__(self, account: str, open_engine: Callable[[], tuple[Any, str]], poll_s: float,
                 bar_journal: Path | None = None):
        self.account, self.open_engine, self.poll_s = account, open_engine, poll_s
        self.subscribers: set[asyncio.Queue] = set()
        self.task: asyncio.Task | None = None
        self.engine = None
        self.url = ""
        self.bars = BarTail(bar_journal) if bar_journal is not None else None

    def snapshot(self) -> dict[str, Any]:
        from foxhunt.paper.accounts import positions_doc, risk_doc

        return {"positions": positions_doc(self.engine, self.account, self.url).document(),
                "risk": risk_doc(self.engine, self.account, self.url).document()}

    async def start(self) -> None:
        self.engine, self.url = await asyncio.to_thread(self.open_engine)
        if self.bars is not None:
            self.bars.skip_to_end()
        self.task = asyncio.create_task(self._run(), name=f"follow {self.account}")

    def _poll(self) -> Batch | None:
        bars = self.bars.read_new() if self.bars is not None else []
        new = [] if self.engine.store.latest_seq() == self.engine.seq else self.engine.follow()
        if not new and not bars:
            return None
        doc = {"type": "events", "account": self.account,
               "events": [event_json(seq, e, self.engine.contracts) for seq, e in new],
               **self.snapshot()}
        if bars:
            doc["bars"] = bars
        return Batch(doc)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        try:
            while self.subscribers:
                due += self.poll_s
                batch = await asyncio.to_thread(self._poll)
                if batch is not None:
                    for q in list(self.subscribers):
                        if q.qsize() >= QUEUE_BATCHES:
                            self.subscribers.discard(q)
                            q.put_nowait(None)
                        else:
                            q.put_nowait(batch)
                due = max(due, loop.time())  # a slow poll is not made up in a burst
                await asyncio.sleep(due - loop.time())
        except (FoxhuntError, OSError) as exc:  # the log went away or broke: tell them, end
            log.warning("account %s: stream stopped: %s", self.account, exc)
            for q in list(self.subscribers):
                q.put_nowait({"type": "error", "error": str(exc).splitlines()[0][:300]})
                q.put_nowait(None)
            self.subscribers.clear()
        finally:
            if self.engine is not None:
                self.engine.store.close()


class BarTail:
    """The new whole lines of a live trader's bar journal (`ACCOUNT.bars.jsonl`: symbol, ts,
    ohlcv), read from where the last read stopped; a line still being written waits."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def skip_to_end(self) -> None:
        try:
            self.offset = self.path.stat().st_size
        except OSError:
            self.offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        out = []
        for line in chunk[:end].splitlines():
            try:
                rec = json.loads(line)
                o, h, lo, c, v = rec["ohlcv"]
                out.append({"symbol": rec["symbol"], "ts_ns": int(rec["ts"]), "open": o,
                            "high": h, "low": lo, "close": c, "volume": v})
            except (ValueError, KeyError, TypeError):
                continue  # a damaged line is the journal reader's to report, not the stream's
        return out


class StreamHub:
    """The followers of one app; each subscriber gets a queue of batches (None: the end)."""

    def __init__(self, poll_s: float):
        self.poll_s = poll_s
        self.followers: dict[str, AccountFollower] = {}
        self._lock = asyncio.Lock()

    async def subscribe(self, account: str, open_engine, bar_journal: Path | None = None
                        ) -> tuple[asyncio.Queue, dict[str, Any]]:
        """A queue of the account's new batches (with the live bars its trader journaled, when
        it has a bar journal) and its state now (the first message)."""
        async with self._lock:
            f = self.followers.get(account)
            if f is None or f.task is None or f.task.done():
                f = AccountFollower(account, open_engine, self.poll_s, bar_journal)
                await f.start()
                self.followers[account] = f
            q: asyncio.Queue = asyncio.Queue()
            f.subscribers.add(q)
            first = {"type": "snapshot", "account": account, "seq": f.engine.seq, **f.snapshot()}
        return q, first

    def unsubscribe(self, account: str, q: asyncio.Queue) -> None:
        f = self.followers.get(account)
        if f is not None:
            f.subscribers.discard(q)

    async def close(self) -> None:
        for f in self.followers.values():
            f.subscribers.clear()
            if f.task is not None:
                f.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await f.task
        self.followers.clear()
