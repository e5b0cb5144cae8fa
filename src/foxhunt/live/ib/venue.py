"""Interactive Brokers as a `LiveVenue`: TWS or IB Gateway through its socket API (ib_async).

Threads: ib_async runs on its own loop thread (`LoopThread`). `submit`, `cancel` and `modify`
copy what they need and post the work to that thread: they return at once and never call the
OMS. IB's messages are mapped there (`OrderTracker`) and every report is written to the journal
and synced before it joins the queue that `reports()` drains. Queries (`open_orders`,
`positions`) wait on the loop thread's answer up to their timeout.

Names: IB numbers orders per client id (`orderId`, our `venue_order_id`); our client order id
travels in the order's `orderRef`. The journal's `order` lines hold the pair from before the
order leaves; after a restart, TWS's open orders (their orderRef) teach it again.

Connection: `connect` logs on, checks the account, resolves every symbol's contract (one IB
contract each, else an error naming it) and replays the day's executions (already journaled
ones are skipped: a fill is reported once). When the socket drops, the venue reconnects every
`reconnect_s`, replays executions again, and then raises the `reconnected` flag (and calls
`on_reconnect` on the IB thread, which must only set a flag of its own): orders may have
changed meanwhile, so the live loop should reconcile (`request_status`, `positions`). While TWS
reports its own link to IB down (error 1100), `connected` is False.

Requests that cannot reach IB are answered at once: a submit while disconnected is Rejected, a
cancel or modify CancelRejected/ModifyRejected; nothing is sent later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ib_async
from ib_async.ib import StartupFetch

from foxhunt.errors import ConfigError
from foxhunt.execution import venue as v
from foxhunt.live.ib import mapping as m
from foxhunt.live.ib.config import IbFuture, check_endpoint, parse_futures
from foxhunt.live.ib.journal import Journal, SentOrder
from foxhunt.live.ib.loop import LoopThread, connect_error, tap
from foxhunt.live.ib.tracker import OrderTracker, Track
from foxhunt.orders.contract import Contract
from foxhunt.orders.order import Order

log = logging.getLogger(__name__)

# At connect: TWS's open orders (they teach orderId <-> orderRef) and the day's executions.
STARTUP = StartupFetch.ORDERS_OPEN | StartupFetch.EXECUTIONS


async def resolve_contracts(ib: ib_async.IB, futures: Mapping[str, IbFuture],
                            timeout_s: float) -> dict[str, Any]:  # fmt: skip
    """Each symbol's one IB contract (with its conId); ConfigError naming the first symbol IB
    does not know or finds ambiguous."""
    out = {}
    for symbol, fut in futures.items():
        want = m.ib_contract(symbol, fut)
        found = await asyncio.wait_for(ib.reqContractDetailsAsync(want), timeout_s)
        if len(found) != 1:
            what = ", ".join(f"{k}={val!r}" for k, val in fut.model_dump().items() if val)
            hint = ("no such contract" if not found else
                    f"{len(found)} contracts match; give expiry as YYYYMMDD, local_symbol or con_id")
            raise ConfigError(f"IB contract for {symbol} ({what}): {hint}")
        out[symbol] = found[0].contract
    return out


class IbVenue:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: int,
        account: str,
        contracts: Mapping[str, Contract],
        journal: Path | str,
        *,
        futures: Mapping[str, IbFuture | Mapping[str, Any]],
        outside_rth: bool = True,
        reconnect_s: float = 5.0,
        commission_wait_s: float = 1.0,
        fill_wait_s: float = 5.0,
        clock: Callable[[], int] = time.time_ns,
        on_reconnect: Callable[[], None] | None = None,
    ):
        check_endpoint(host, port, client_id)
        if not account:
            raise ConfigError("IB account is empty: give the account id orders go to "
                              "(DU... for paper)")  # fmt: skip
        self.host, self.port, self.client_id, self.account = host, port, client_id, account
        self.contracts = dict(contracts)
        self.futures = parse_futures(futures, self.contracts)
        self.outside_rth, self.reconnect_s = outside_rth, reconnect_s
        self.on_reconnect = on_reconnect
        self._journal = Journal(journal)
        self._lock = threading.Lock()
        self._queue: list[v.VenueReport] = []
        self._history = list(self._journal.reports)
        self.tracker = OrderTracker(self.contracts, self._emit, clock=clock,
                                    commission_wait_s=commission_wait_s, fill_wait_s=fill_wait_s)
        self.tracker.restore(self._journal.orders, self._journal.reports)
        self._ib_contracts: dict[str, ib_async.Contract] = {}
        self._symbol_of: dict[int, str] = {}  # conId -> our symbol
        self._ready = self._link_ok = False
        self._closing = self._reconnecting = False
        self._reconnected = threading.Event()
        self._said: list[str] = []  # TWS's errors while connecting
        self._thread = LoopThread(f"ib-venue-{client_id}")
        self._ib: ib_async.IB = self._thread.call(self._make_ib)
        self._query_lock: asyncio.Lock = self._thread.call(asyncio.Lock)
        self._thread.post(self._tick)

    def _make_ib(self) -> ib_async.IB:
        ib = ib_async.IB()
        tap(ib.wrapper, "openOrder", self._on_open_order)
        tap(ib.wrapper, "orderStatus", self._on_order_status)
        tap(ib.wrapper, "execDetails", self._on_execution)
        tap(ib.wrapper, "commissionReport", self._on_commission)
        tap(ib.wrapper, "error", self._on_error)
        ib.disconnectedEvent += self._on_disconnected
        return ib

    # --- the session -------------------------------------------------------------------------

    def connect(self, timeout_s: float) -> None:
        """Log on, resolve the contracts and replay the day's executions; VenueError (or
        ConfigError for a contract IB does not know) on failure."""
        future = self._thread.submit(self._connect(timeout_s))
        try:
            future.result(timeout_s * 2 + 1)
        except (OSError, TimeoutError) as exc:  # refused, reset, no answer (ConnectionError)
            raise v.VenueError(connect_error(exc, self.host, self.port, self.client_id,
                                             timeout_s, self._said)) from None  # fmt: skip

    async def _connect(self, timeout_s: float) -> None:
        ib = self._ib
        self._said.clear()
        if ib.isConnected():
            return
        async with self._query_lock:
            await ib.connectAsync(self.host, self.port, self.client_id, timeout=timeout_s,
                                  fetchFields=STARTUP)  # fmt: skip
            accounts = ib.client.getAccounts()
            if self.account not in accounts:
                ib.disconnect()
                raise v.VenueError(f"IB account {self.account} is not one this login manages "
                                   f"({', '.join(accounts) or 'none'})")  # fmt: skip
            if not self._ib_contracts:
                try:
                    found = await resolve_contracts(ib, self.futures, timeout_s)
                except BaseException:
                    ib.disconnect()
                    raise
                self._ib_contracts = found
                self._symbol_of = {c.conId: s for s, c in found.items()}
        self._ready = self._link_ok = True

    @property
    def connected(self) -> bool:
        return self._ready and self._link_ok and self._ib.isConnected()

    def take_reconnected(self) -> bool:
        """True once after each reconnect (socket or TWS's link to IB): time to reconcile."""
        was = self._reconnected.is_set()
        self._reconnected.clear()
        return was

    def _on_disconnected(self) -> None:
        self._ready = False
        if self._closing or self._reconnecting:
            return
        log.warning("IB: lost the connection to %s:%s; reconnecting every %gs", self.host,
                    self.port, self.reconnect_s)  # fmt: skip
        self._reconnecting = True
        asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        try:
            while not self._closing:
                await asyncio.sleep(self.reconnect_s)
                try:
                    await self._connect(max(self.reconnect_s, 2.0))
                except (OSError, TimeoutError, v.VenueError, ConfigError) as exc:
                    log.info("IB: reconnect failed: %s", connect_error(
                        exc, self.host, self.port, self.client_id, self.reconnect_s, self._said))
                    continue
                log.warning("IB: connected again to %s:%s", self.host, self.port)
                self._again()
                return
        finally:
            self._reconnecting = False

    def _again(self) -> None:
        self._reconnected.set()
        if self.on_reconnect is not None:
            self.on_reconnect()

    def close(self) -> None:
        """Report what waits (a fill whose commission did not come yet), log off, stop."""
        if self._closing:
            return
        self._closing = True
        try:
            self._thread.call(self._close_ib)
        except Exception:
            log.exception("IB: closing the session failed")
        self._thread.stop()
        self._journal.close()

    def _close_ib(self) -> None:
        self.tracker.flush()
        self._ib.disconnect()
        self._ready = False

    def _tick(self) -> None:
        if self._closing:
            return
        try:
            self.tracker.tick()
        finally:
            self._thread.loop.call_later(0.05, self._tick)

    # --- reports -----------------------------------------------------------------------------

    def _emit(self, report: v.VenueReport) -> None:
        """Journal (synced), then queue: a report the OMS reads is on disk."""
        self._journal.write_report(report)
        with self._lock:
            self._history.append(report)
            self._queue.append(report)

    def reports(self) -> list[v.VenueReport]:
        with self._lock:
            out, self._queue = self._queue, []
        return out

    @property
    def history(self) -> list[v.VenueReport]:
        with self._lock:
            return list(self._history)

    # --- orders ------------------------------------------------------------------------------

    def submit(self, order: Order) -> None:
        sent = SentOrder(
            client_order_id=order.client_order_id, order_id=0, symbol=order.symbol,
            side=order.side, quantity=order.quantity, order_type=order.order_type,
            time_in_force=order.time_in_force, limit_ticks=order.limit_ticks,
            stop_ticks=order.stop_ticks,
        )  # fmt: skip
        self._thread.post(self._submit, sent, self.clock())

    def clock(self) -> int:
        return self.tracker.clock()

    def _submit(self, sent: SentOrder, ts_ns: int) -> None:
        cid = sent.client_order_id
        if cid in self.tracker.tracks:
            log.warning("IB: order %s was already sent; not sending it again", cid)
            return
        if not self.connected:
            self.tracker.unsent(v.Rejected(client_order_id=cid, ts_ns=ts_ns,
                                           reason=self._not_connected()))  # fmt: skip
            return
        sent = dataclasses.replace(sent, order_id=self._ib.client.getReqId())
        self._journal.write_order(sent)
        self.tracker.add(sent)
        ib_order = m.ib_order(sent, self.contracts[sent.symbol], self.account, self.outside_rth)
        try:
            self._ib.placeOrder(self._ib_contracts[sent.symbol], ib_order)
        except ConnectionError:
            self.tracker.on_error(sent.order_id, 0, "the connection dropped before the order "
                                  "went out")  # fmt: skip

    def _not_connected(self) -> str:
        why = "TWS has lost its link to IB" if self._ready else "not connected"
        return f"IB: {why} ({self.host}:{self.port}, client id {self.client_id})"

    def _refusal(self, cid: str) -> tuple[Track | None, str]:
        """The order's record, and why a cancel or modify of it cannot go to IB ("" if it can)."""
        track = self.tracker.tracks.get(cid)
        if track is None:
            return None, "IB never took this order"
        return track, "" if self.connected else self._not_connected()

    def cancel(self, order: Order) -> None:
        self._thread.post(self._cancel, order.client_order_id, order.requests, self.clock())

    def _cancel(self, cid: str, request: int, ts_ns: int) -> None:
        track, why = self._refusal(cid)
        if track is None or why:
            self.tracker.unsent(v.CancelRejected(client_order_id=cid, ts_ns=ts_ns, reason=why,
                                                 request=request))  # fmt: skip
            return
        self.tracker.cancel_sent(cid, request)
        self._ib.client.cancelOrder(track.sent.order_id)

    def modify(self, order: Order, quantity: int | None, limit_ticks: int | None,
               stop_ticks: int | None) -> None:  # fmt: skip
        self._thread.post(self._modify, order.client_order_id, order.requests,
                          quantity or order.quantity, limit_ticks, stop_ticks, self.clock())

    def _modify(self, cid: str, request: int, quantity: int, limit_ticks: int | None,
                stop_ticks: int | None, ts_ns: int) -> None:  # fmt: skip
        track, why = self._refusal(cid)
        if track is None or why:
            self.tracker.unsent(v.ModifyRejected(client_order_id=cid, ts_ns=ts_ns, reason=why,
                                                 request=request))  # fmt: skip
            return
        new = dataclasses.replace(
            track.sent, quantity=quantity,
            limit_ticks=track.sent.limit_ticks if limit_ticks is None else limit_ticks,
            stop_ticks=track.sent.stop_ticks if stop_ticks is None else stop_ticks,
        )  # fmt: skip
        self.tracker.modify_sent(cid, request, quantity, limit_ticks, stop_ticks)
        ib_order = m.ib_order(new, self.contracts[new.symbol], self.account, self.outside_rth)
        self._ib.client.placeOrder(new.order_id, self._ib_contracts[new.symbol], ib_order)

    # --- IB's messages (on the IB thread) ----------------------------------------------------

    def _ours(self, client_id: int) -> bool:
        return client_id == self.client_id

    def _on_open_order(self, order_id: int, contract: ib_async.Contract, order: ib_async.Order,
                       state: ib_async.OrderState) -> None:  # fmt: skip
        if order.whatIf or not self._ours(order.clientId):
            return
        symbol = self._symbol_of.get(contract.conId)
        if (order_id not in self.tracker.by_order_id and order.orderRef and symbol
                and order.orderRef not in self.tracker.tracks):  # fmt: skip
            self._learn(order_id, order, symbol)
        self.tracker.on_open_order(order_id, order, state.status)

    def _learn(self, order_id: int, order: ib_async.Order, symbol: str) -> None:
        """An open order of ours the journal does not hold (the journal was lost): its name
        and terms from TWS, journaled from now on."""
        quantity, limit, stop = m.order_terms(order, self.contracts[symbol])
        kind, tif = m.our_kind(order)
        sent = SentOrder(client_order_id=order.orderRef, order_id=order_id, symbol=symbol,
                         side=m.side_of(order.action), quantity=quantity,
                         order_type=kind, time_in_force=tif,
                         limit_ticks=limit, stop_ticks=stop)  # fmt: skip
        log.warning("IB: learned order %s (IB order %d) from TWS's open orders", sent.client_order_id,
                    order_id)  # fmt: skip
        self._journal.write_order(sent)
        self.tracker.add(sent)

    def _on_order_status(self, order_id: int, status: str, filled: float, *rest: Any) -> None:
        client_id = rest[5]  # remaining, avgFillPrice, permId, parentId, lastFillPrice, clientId
        if self._ours(client_id):
            self.tracker.on_status(order_id, status, filled)

    def _on_execution(self, req_id: int, contract: ib_async.Contract,
                      ex: ib_async.Execution) -> None:  # fmt: skip
        if self._ours(ex.clientId):
            self.tracker.on_execution(ex.orderId, ex.orderRef, ex.execId, ex.side, ex.shares,
                                      ex.price)  # fmt: skip

    def _on_commission(self, report: ib_async.CommissionReport) -> None:
        self.tracker.on_commission(report.execId, report.commission, report.currency)

    def _on_error(self, req_id: int, code: int, message: str, advanced: str = "") -> None:
        if not self._ready:
            self._said.append(f"TWS said {code}: {message}")
        if code == m.LINK_LOST:
            log.warning("IB: TWS lost its connection to IB (%s)", message)
            self._link_ok = False
        elif code in (m.LINK_BACK, m.LINK_BACK_LOST_DATA):
            log.warning("IB: TWS is connected to IB again (%s)", message)
            self._link_ok = True
            self._again()
        elif req_id > 0:
            self.tracker.on_error(req_id, code, message)

    # --- queries -----------------------------------------------------------------------------

    def _query(self, what: str, coro: Any, timeout_s: float) -> Any:
        if not self.connected:
            coro.close()
            raise v.VenueError(f"{self._not_connected()}: cannot ask for {what}")

        async def run() -> Any:
            async with self._query_lock:
                return await asyncio.wait_for(coro, timeout_s)

        try:
            return self._thread.submit(run()).result(timeout_s + 1)
        except TimeoutError:
            raise v.VenueError(f"IB did not send {what} within {timeout_s:g}s") from None
        except ConnectionError as exc:
            raise v.VenueError(f"IB: the connection dropped while asking for {what} "
                               f"({exc})") from None  # fmt: skip

    def positions(self, timeout_s: float) -> dict[str, int]:
        """Net contracts per symbol in this account (IB's positions of contracts we do not
        map, another month say, are logged and left out)."""
        return self._query("positions", self._positions(), timeout_s)

    async def _positions(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in await self._ib.reqPositionsAsync():
            if p.account != self.account:
                continue
            symbol = self._symbol_of.get(p.contract.conId)
            if symbol is None:
                log.warning("IB position %s %s (conId %d) is in no symbol's contract",
                            p.position, p.contract.localSymbol, p.contract.conId)  # fmt: skip
                continue
            out[symbol] = out.get(symbol, 0) + m.whole(p.position, "position")
        return {s: q for s, q in out.items() if q}

    def open_orders(self, timeout_s: float) -> list[v.VenueOrder]:
        """This client id's working orders at IB (one with no orderRef is named ib:<permId>)."""
        return self._query("open orders", self._open_orders(), timeout_s)

    async def _open_orders(self) -> list[v.VenueOrder]:
        out = []
        for t in self._working(await self._ib.reqOpenOrdersAsync()):
            o = t.order
            track = self.tracker.find(o.orderId, o.orderRef)
            symbol = self._symbol_of.get(t.contract.conId) or (track.sent.symbol if track else "")
            if symbol not in self.contracts:
                log.warning("IB open order %s is in no symbol's contract (%s)", o.orderId,
                            t.contract.localSymbol)  # fmt: skip
                continue
            quantity, limit, stop = m.order_terms(o, self.contracts[symbol])
            out.append(v.VenueOrder(
                client_order_id=o.orderRef or f"ib:{o.permId}", venue_order_id=str(o.orderId),
                symbol=symbol, side=m.side_of(o.action), quantity=quantity,
                filled=m.whole(t.orderStatus.filled, "filled quantity"), limit_ticks=limit,
                stop_ticks=stop,
            ))  # fmt: skip
        return out

    @staticmethod
    def _working(trades: Iterable[ib_async.Trade]) -> list[ib_async.Trade]:
        seen: dict[int, ib_async.Trade] = {}
        for t in trades:
            if t.orderStatus.status not in ib_async.OrderStatus.DoneStates:
                seen[t.order.permId or id(t)] = t
        return list(seen.values())

    def request_status(self, client_order_ids: Sequence[str]) -> None:
        """Each order's state from TWS's open orders, then its completed orders, then its
        executions; from this venue's own record when TWS no longer lists it (a rejected
        order, one completed before TWS restarted); UnknownOrder when none has it."""
        if not self.connected:
            raise v.VenueError(f"{self._not_connected()}: cannot ask for order status")
        ids = list(client_order_ids)
        self._thread.post(lambda: asyncio.get_running_loop().create_task(self._status(ids)))

    async def _status(self, ids: list[str]) -> None:
        ib = self._ib
        try:
            async with self._query_lock:
                working = self._working(await asyncio.wait_for(ib.reqOpenOrdersAsync(), 10))
                done = await asyncio.wait_for(ib.reqCompletedOrdersAsync(True), 10)
                fills = await asyncio.wait_for(ib.reqExecutionsAsync(), 10)
        except (OSError, TimeoutError) as exc:
            log.error("IB: order status request failed (%s); ask again", exc or type(exc).__name__)
            return
        open_by = {t.order.orderRef: t for t in working if t.order.orderRef}
        done_by = {t.order.orderRef: t for t in done if t.order.orderRef}
        executed: dict[str, int] = {}
        for f in fills:
            if self._ours(f.execution.clientId) and f.execution.orderRef:
                ref = f.execution.orderRef
                executed[ref] = executed.get(ref, 0) + m.whole(f.execution.shares, "execution")
        for cid in ids:
            self.tracker.unsent(self._status_of(cid, open_by.get(cid), done_by.get(cid),
                                                executed.get(cid, 0)))  # fmt: skip

    def _status_of(self, cid: str, working: ib_async.Trade | None, done: ib_async.Trade | None,
                   executed: int) -> v.VenueReport:  # fmt: skip
        track = self.tracker.tracks.get(cid)
        base = {"client_order_id": cid, "ts_ns": self.clock()}
        oid = str(track.sent.order_id) if track else ""
        if working is not None:
            filled = m.whole(working.orderStatus.filled, "filled quantity")
            total = m.whole(working.order.totalQuantity, "order quantity")
            return v.OrderStatusReport(**base, venue_order_id=str(working.order.orderId),
                                       state="working", filled=filled, leaves=total - filled)
        if done is not None:
            state = m.status_state(done.orderStatus.status) or "canceled"
            qty = done.order.filledQuantity
            filled = m.whole(qty, "filled quantity") if m.set_price(qty) else executed
            return v.OrderStatusReport(**base, venue_order_id=oid or f"ib:{done.order.permId}",
                                       state=state, filled=filled, leaves=0)  # fmt: skip
        if track is not None and (track.ended or executed):
            filled = max(executed, track.filled)
            ended = [r for r in self.history if r.client_order_id == cid and
                     isinstance(r, v.Rejected | v.Canceled | v.Expired)]  # fmt: skip
            state = ("filled" if filled >= track.sent.quantity else
                     type(ended[-1]).__name__.lower() if ended else "canceled")  # fmt: skip
            return v.OrderStatusReport(**base, venue_order_id=oid, state=state, filled=filled,
                                       leaves=0)  # fmt: skip
        return v.UnknownOrder(**base, reason="TWS has no open, completed or executed order with "
                              "this orderRef, nor did this venue send one")  # fmt: skip
