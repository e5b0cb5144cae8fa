"""A simulated venue: working orders fill against bars through the one fill model.

Prices follow `env/fills.py`, the model the training env and the backtester fill with:
- a MARKET order fills at the open of the first bar after it was sent, `slippage_ticks` against
  the trader (fractional slippage rounds up to whole ticks);
- a STOP order triggers when the bar trades through its price (a sell stop on the low, a buy stop
  on the high) and fills at the stop price, or at the open when the bar gapped through it,
  slippage against the trader (`fills.stop_trigger`, `fills.fill_price`);
- a LIMIT order (not in the env's action set) fills at the open when the bar opens at or better
  than the limit, else at the limit when the bar trades through it by at least one tick (a touch
  is not a fill: the queue ahead is unknown); no slippage, never worse than the limit;
- an IOC order that does not fill on its first bar is canceled; `end_session` expires DAY orders;
- commission is the contract's, per contract per side (the OMS fills it in).
Orders fill whole (no liquidity model). Reports are queued and handed out by `reports()`, never
delivered from inside a call, as the `Venue` protocol requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from foxhunt.env.fills import CostModel, fill_price, stop_trigger
from foxhunt.execution import venue as v
from foxhunt.orders.contract import Contract, Price
from foxhunt.orders.enums import OrderType, Side, TimeInForce
from foxhunt.orders.order import Order


@dataclass(slots=True)
class _Resting:
    client_order_id: str
    venue_order_id: str
    symbol: str
    side: Side
    leaves: int
    order_type: OrderType
    time_in_force: TimeInForce
    limit_ticks: int | None
    stop_ticks: int | None
    triggered: bool = False
    bars_seen: int = 0


def _t(x: float) -> torch.Tensor:
    return torch.tensor(float(x), dtype=torch.float64)


class SimulatedVenue:
    def __init__(self, contracts: Mapping[str, Contract], slippage_ticks: float = 1.0):
        self.contracts = dict(contracts)
        self.costs = {
            s: CostModel(float(c.tick_size), float(c.point_value), float(c.commission),
                         slippage_ticks)
            for s, c in contracts.items()
        }  # fmt: skip
        self._resting: dict[str, _Resting] = {}
        self._queue: list[v.VenueReport] = []
        self._n = 0

    def _next(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def reports(self) -> list[v.VenueReport]:
        """The reports queued since the last call, in the order they happened."""
        out, self._queue = self._queue, []
        return out

    @property
    def working(self) -> list[str]:
        return list(self._resting)

    # --- the Venue protocol -----------------------------------------------------------------

    def submit(self, order: Order) -> None:
        vid = self._next("SIM-")
        self._resting[order.client_order_id] = _Resting(
            order.client_order_id, vid, order.symbol, order.side, order.leaves_qty,
            order.order_type, order.time_in_force, order.limit_ticks, order.stop_ticks,
        )  # fmt: skip
        self._queue.append(v.Accepted(client_order_id=order.client_order_id,
                                      ts_ns=order.ts_last, venue_order_id=vid))  # fmt: skip

    def cancel(self, order: Order) -> None:
        cid = order.client_order_id
        if self._resting.pop(cid, None) is None:
            self._queue.append(v.CancelRejected(client_order_id=cid, ts_ns=order.ts_last,
                                                reason="not working at the venue"))  # fmt: skip
        else:
            self._queue.append(v.Canceled(client_order_id=cid, ts_ns=order.ts_last,
                                          reason="canceled on request"))  # fmt: skip

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None:
        cid = order.client_order_id
        rest = self._resting.get(cid)
        if rest is None:
            self._queue.append(v.ModifyRejected(client_order_id=cid, ts_ns=order.ts_last,
                                                reason="not working at the venue"))  # fmt: skip
            return
        if quantity is not None:
            rest.leaves = quantity - order.filled_qty
        rest.limit_ticks = limit_ticks if limit_ticks is not None else rest.limit_ticks
        rest.stop_ticks = stop_ticks if stop_ticks is not None else rest.stop_ticks
        self._queue.append(v.Updated(
            client_order_id=cid, ts_ns=order.ts_last, update_id=self._next("U-"),
            quantity=order.filled_qty + rest.leaves, limit_ticks=limit_ticks,
            stop_ticks=stop_ticks,
        ))  # fmt: skip

    # --- market data --------------------------------------------------------------------------

    def on_bar(self, symbol: str, ts_ns: int, open_: Price, high: Price, low: Price) -> None:
        """One bar of `symbol` (stamped at its close): every order working before it meets it."""
        contract = self.contracts[symbol]
        o, h, lo = (contract.to_ticks(p) for p in (open_, high, low))
        for rest in [r for r in self._resting.values() if r.symbol == symbol]:
            rest.bars_seen += 1
            ref = self._reference(rest, o, h, lo, contract, ts_ns)
            if ref is not None:
                price, slipped = ref
                signed = rest.leaves * rest.side.sign
                if slipped:
                    cost = self.costs[symbol]
                    price = contract.to_ticks(
                        float(fill_price(_t(contract.price(price)), _t(signed), cost))
                    )
                del self._resting[rest.client_order_id]
                self._queue.append(v.Filled(
                    client_order_id=rest.client_order_id, ts_ns=ts_ns,
                    fill_id=self._next(f"{rest.venue_order_id}-F"), quantity=rest.leaves,
                    price_ticks=price,
                ))  # fmt: skip
            elif rest.time_in_force is TimeInForce.IOC:
                del self._resting[rest.client_order_id]
                self._queue.append(v.Canceled(client_order_id=rest.client_order_id, ts_ns=ts_ns,
                                              reason="IOC: nothing filled at once"))  # fmt: skip

    def _reference(
        self, rest: _Resting, o: int, h: int, lo: int, contract: Contract, ts_ns: int
    ) -> tuple[int, bool] | None:
        """(reference price in ticks, whether slippage applies), or None when it does not fill."""
        if rest.order_type is OrderType.MARKET:
            return o, True
        if rest.order_type is OrderType.STOP:
            cost = self.costs[rest.symbol]
            protects = -rest.side.sign  # a sell stop protects a long, a buy stop a short
            level = float(contract.price(rest.stop_ticks))
            hit, ref = stop_trigger(
                _t(protects), _t(level), _t(float(contract.price(o))), _t(float(contract.price(h))),
                _t(float(contract.price(lo))), cost,
            )  # fmt: skip
            if not bool(hit):
                return None
            if not rest.triggered:
                rest.triggered = True
                self._queue.append(v.Triggered(client_order_id=rest.client_order_id, ts_ns=ts_ns))
            return contract.to_ticks(float(ref)), True
        limit, sign = rest.limit_ticks, rest.side.sign
        if (o - limit) * sign <= 0:
            return o, False
        through = lo if sign > 0 else h
        if (limit - through) * sign >= 1:
            return limit, False
        return None

    def end_session(self, ts_ns: int) -> None:
        """The session closed: DAY orders expire."""
        for rest in [r for r in self._resting.values() if r.time_in_force is TimeInForce.DAY]:
            del self._resting[rest.client_order_id]
            self._queue.append(v.Expired(client_order_id=rest.client_order_id, ts_ns=ts_ns))
