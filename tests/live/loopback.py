"""An in-process exchange for testing the live loop: a `SimulatedVenue` behind the `LiveVenue`
interface and a feed that plays stored bars, one per `next_bar` call.

It keeps the local exchange's rules (`foxhunt venue`): before bar k is published its open,
high and low meet the working orders (fills stamped with bar k's close time), and a session's
last bar opens the venue's closing auction (an at-the-close order sent before the next bar
fills at that close). Not a test of FIX: tests/live/fix runs the real acceptor and initiator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.env.market import session_ends
from foxhunt.execution import venue as v
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.live.feed import FeedEnded, LiveBar
from foxhunt.orders import Contract
from foxhunt.orders.order import Order


class LoopbackExchange:
    def __init__(self, bars: Bars, inst: Instrument, start: int, stop: int, slippage: float,
                 journal: Path | None = None):  # fmt: skip
        self.bars, self.inst, self.symbol = bars, inst, inst.symbol
        self.prices = tradable(bars, inst.tick_size)
        self.ends = session_ends(bars.ts, inst.session)
        self.sim = SimulatedVenue({inst.symbol: Contract.from_instrument(inst)}, slippage,
                                  journal=journal)
        self.k, self.stop = start, stop  # the next bar to play
        self.answers: list[v.VenueReport] = []
        self.connected = False
        self.reconnected = False  # a test sets it: the session dropped and came back
        self.refuse_status = False

    # --- the feed ----------------------------------------------------------------------------

    def subscribe(self, symbol: str) -> None:
        assert symbol == self.symbol

    def next_bar(self, timeout_s: float) -> LiveBar | None:
        if self.k >= self.stop:
            raise FeedEnded("the exchange's data ended")
        k, p = self.k, self.prices
        ts = int(self.bars.ts[k])
        self.sim.on_bar(self.symbol, ts, float(p.open[k]), float(p.high[k]), float(p.low[k]))
        self.k += 1
        if self.ends[k]:
            self.sim.on_close(self.symbol, ts, float(p.close[k]))
        b = self.bars
        return LiveBar(self.symbol, ts, float(b.open[k]), float(b.high[k]), float(b.low[k]),
                       float(b.close[k]), float(b.volume[k]))

    def close(self) -> None:
        self.sim.close()

    # --- the venue -------------------------------------------------------------------------

    def connect(self, timeout_s: float) -> None:
        self.connected = True

    def take_reconnected(self) -> bool:
        was, self.reconnected = self.reconnected, False
        return was

    def submit(self, order: Order) -> None:
        self.sim.submit(order)

    def cancel(self, order: Order) -> None:
        self.sim.cancel(order)

    def modify(self, order: Order, quantity, limit_ticks, stop_ticks) -> None:
        self.sim.modify(order, quantity, limit_ticks, stop_ticks)

    def reports(self) -> list[v.VenueReport]:
        out, self.answers = [*self.answers, *self.sim.reports()], []
        return out

    @property
    def history(self) -> list[v.VenueReport]:
        return self.sim.history

    def request_status(self, client_order_ids: Sequence[str]) -> None:
        if self.refuse_status:
            return
        ts = int(self.bars.ts[max(self.k - 1, 0)])
        self.answers.extend(self.sim.status(cid, ts) for cid in client_order_ids)

    def open_orders(self, timeout_s: float) -> list[v.VenueOrder]:
        return self.sim.open_orders()

    def positions(self, timeout_s: float) -> dict[str, int]:
        return dict(self.sim.positions)

