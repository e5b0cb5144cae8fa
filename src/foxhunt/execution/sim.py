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
- an ATC (at the close) market order waits for `on_close` and fills at that close, slippage
  against the trader: the env's session-end flatten and the backtest's final flatten;
- within a bar, market orders fill first (at the open), then stops and limits in the order they
  arrived: the env's step order (the order at the open, then the stop inside the bar);
- commission is the contract's, per contract per side (the OMS fills it in).
Orders fill whole (no liquidity model). Reports are queued and handed out by `reports()`, never
delivered from inside a call, as the `Venue` protocol requires.

A venue outlives the trader's process: with a `journal` file the venue appends every order it
took, every report it sent and every bar it processed, one JSON line each (flushed to the OS,
so a killed trader loses none), and a new `SimulatedVenue` on the same file rebuilds itself
from it: its working orders, its positions and every report it ever sent (`history`), which
is what a restarted OMS reconciles against. A bar or close already processed is ignored, and
an order id it already knows is not taken twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

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


REPORTS: dict[str, type[v.VenueReport]] = {
    cls.__name__: cls
    for cls in (v.Accepted, v.Rejected, v.Triggered, v.Filled, v.Canceled, v.Expired, v.Updated,
                v.CancelRejected, v.ModifyRejected)
}  # fmt: skip


class VenueJournalError(Exception):
    """The venue's journal cannot be read back."""


class SimulatedVenue:
    def __init__(self, contracts: Mapping[str, Contract], slippage_ticks: float = 1.0,
                 journal: Path | str | None = None):
        self.contracts = dict(contracts)
        self.costs = {
            s: CostModel(float(c.tick_size), float(c.point_value), float(c.commission),
                         slippage_ticks)
            for s, c in contracts.items()
        }  # fmt: skip
        self._resting: dict[str, _Resting] = {}
        self._queue: list[v.VenueReport] = []
        self._n = 0
        self.history: list[v.VenueReport] = []  # every report sent, in order
        self.known: set[str] = set()  # every client order id taken
        self.positions: dict[str, int] = {}  # net contracts filled per symbol
        self.last_bar: dict[str, int] = {}  # ts of the last bar processed per symbol
        self.last_close: dict[str, int] = {}
        self._journal = None
        if journal is not None:
            path = Path(journal)
            if path.exists():
                self._restore(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._journal = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for life

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _write(self, op: str, **fields) -> None:
        if self._journal is not None:
            self._journal.write(json.dumps({"op": op, "n": self._n, **fields}) + "\n")
            self._journal.flush()

    def _restore(self, path: Path) -> None:
        """Apply the journal's lines in order; a torn last line (the process died writing it)
        never happened."""
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:  # the last line, cut short: drop it from the file
                    with open(path, "r+", encoding="utf-8") as fh:
                        fh.truncate(len("\n".join(lines[:i]).encode()) + (1 if i else 0))
                    break
                raise VenueJournalError(f"{path}: line {i + 1} is not JSON") from None
            self._n = rec["n"]
            op = rec["op"]
            if op == "order":
                r = _Resting(**{**rec["order"], "side": Side(rec["order"]["side"]),
                                "order_type": OrderType(rec["order"]["order_type"]),
                                "time_in_force": TimeInForce(rec["order"]["time_in_force"])})
                self._resting[r.client_order_id] = r
                self.known.add(r.client_order_id)
                self.history.append(v.Accepted(**rec["report"]))
            elif op == "report":
                report = REPORTS[rec["kind"]](**rec["report"])
                self._effect(report)
                self.history.append(report)
            elif op == "bar":
                self.last_bar[rec["symbol"]] = rec["ts"]
                for r in self._resting.values():
                    if r.symbol == rec["symbol"] and r.time_in_force is not TimeInForce.ATC:
                        r.bars_seen += 1
            elif op == "close":
                self.last_close[rec["symbol"]] = rec["ts"]
            else:
                raise VenueJournalError(f"{path}: line {i + 1} has an unknown op {op!r}")

    def _effect(self, report: v.VenueReport) -> None:
        """What a report says happened, applied to the venue's own record."""
        rest = self._resting.get(report.client_order_id)
        if isinstance(report, v.Filled) and rest is not None:
            self.positions[rest.symbol] = (self.positions.get(rest.symbol, 0)
                                           + report.quantity * rest.side.sign)
            del self._resting[report.client_order_id]
        elif isinstance(report, v.Canceled | v.Expired | v.Rejected):
            self._resting.pop(report.client_order_id, None)
        elif isinstance(report, v.Triggered) and rest is not None:
            rest.triggered = True
        elif isinstance(report, v.Updated) and rest is not None:
            rest.leaves = report.quantity  # orders fill whole: nothing of a resting one filled
            if report.limit_ticks is not None:
                rest.limit_ticks = report.limit_ticks
            if report.stop_ticks is not None:
                rest.stop_ticks = report.stop_ticks

    def _report(self, report: v.VenueReport) -> None:
        """Journal a report, apply it to the venue's record, queue it for the OMS."""
        if self._journal is not None:
            self._write("report", kind=type(report).__name__, report=asdict(report))
        self._effect(report)
        self.history.append(report)
        self._queue.append(report)

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
        """Take an order; an id taken before is ignored (a resend after a restart)."""
        if order.client_order_id in self.known:
            return
        vid = self._next("SIM-")
        rest = _Resting(
            order.client_order_id, vid, order.symbol, order.side, order.leaves_qty,
            order.order_type, order.time_in_force, order.limit_ticks, order.stop_ticks,
        )  # fmt: skip
        accepted = v.Accepted(client_order_id=order.client_order_id, ts_ns=order.ts_last,
                              venue_order_id=vid)
        # the order and its acceptance in one line: a crash keeps both or neither
        if self._journal is not None:
            self._write("order", order={**asdict(rest), "side": rest.side.value,
                                        "order_type": rest.order_type.value,
                                        "time_in_force": rest.time_in_force.value},
                        report=asdict(accepted))
        self._resting[order.client_order_id] = rest
        self.known.add(order.client_order_id)
        self.history.append(accepted)
        self._queue.append(accepted)

    def cancel(self, order: Order) -> None:
        cid = order.client_order_id
        if cid not in self._resting:
            self._report(v.CancelRejected(client_order_id=cid, ts_ns=order.ts_last,
                                          reason="not working at the venue",
                                          request=order.requests))  # fmt: skip
        else:
            self._report(v.Canceled(client_order_id=cid, ts_ns=order.ts_last,
                                    reason="canceled on request"))  # fmt: skip

    def modify(
        self, order: Order, quantity: int | None, limit_ticks: int | None, stop_ticks: int | None
    ) -> None:
        cid = order.client_order_id
        rest = self._resting.get(cid)
        if rest is None:
            self._report(v.ModifyRejected(client_order_id=cid, ts_ns=order.ts_last,
                                          reason="not working at the venue",
                                          request=order.requests))  # fmt: skip
            return
        leaves = rest.leaves if quantity is None else quantity - order.filled_qty
        self._report(v.Updated(
            client_order_id=cid, ts_ns=order.ts_last, update_id=self._next("U-"),
            quantity=order.filled_qty + leaves, limit_ticks=limit_ticks,
            stop_ticks=stop_ticks,
        ))  # fmt: skip

    # --- market data --------------------------------------------------------------------------

    def on_bar(self, symbol: str, ts_ns: int, open_: Price, high: Price, low: Price) -> None:
        """One bar of `symbol` (stamped at its close): every order working before it meets it,
        market orders first. A bar at or before the last one processed is ignored."""
        if ts_ns <= self.last_bar.get(symbol, -1):
            return
        meets = [r for r in self._resting.values()
                 if r.symbol == symbol and r.time_in_force is not TimeInForce.ATC]
        if meets:
            self._meet(meets, symbol, ts_ns, open_, high, low)
        self.last_bar[symbol] = ts_ns
        if self._journal is not None:
            self._write("bar", symbol=symbol, ts=ts_ns)

    def _meet(self, meets: list[_Resting], symbol: str, ts_ns: int, open_: Price, high: Price,
              low: Price) -> None:
        """The working orders `meets` meet one bar, market orders first."""
        contract = self.contracts[symbol]
        o, h, lo = (contract.to_ticks(p) for p in (open_, high, low))
        meets.sort(key=lambda r: r.order_type is not OrderType.MARKET)  # stable: arrival order
        for rest in meets:
            if rest.client_order_id not in self._resting:
                continue
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
                self._report(v.Filled(
                    client_order_id=rest.client_order_id, ts_ns=ts_ns,
                    fill_id=self._next(f"{rest.venue_order_id}-F"), quantity=rest.leaves,
                    price_ticks=price,
                ))  # fmt: skip
            elif rest.time_in_force is TimeInForce.IOC:
                self._report(v.Canceled(client_order_id=rest.client_order_id, ts_ns=ts_ns,
                                        reason="IOC: nothing filled at once"))  # fmt: skip

    def on_close(self, symbol: str, ts_ns: int, close: Price) -> None:
        """The close of the bar just processed: ATC orders fill at it, slippage against the
        trader. A close at or before the last one processed is ignored."""
        if ts_ns <= self.last_close.get(symbol, -1):
            return
        contract = self.contracts[symbol]
        for rest in [r for r in self._resting.values()
                     if r.symbol == symbol and r.time_in_force is TimeInForce.ATC]:
            signed = rest.leaves * rest.side.sign
            price = contract.to_ticks(float(fill_price(_t(float(close)), _t(signed),
                                                      self.costs[symbol])))
            self._report(v.Filled(
                client_order_id=rest.client_order_id, ts_ns=ts_ns,
                fill_id=self._next(f"{rest.venue_order_id}-F"), quantity=rest.leaves,
                price_ticks=price,
            ))  # fmt: skip
        self.last_close[symbol] = ts_ns
        self._write("close", symbol=symbol, ts=ts_ns)

    def _reference(
        self, rest: _Resting, o: int, h: int, lo: int, contract: Contract, ts_ns: int
    ) -> tuple[int, bool] | None:
        """(reference price in ticks, whether slippage applies), or None when it does not fill."""
        if rest.order_type is OrderType.MARKET:
            return o, True
        if rest.order_type is OrderType.STOP:
            cost = self.costs[rest.symbol]
            protects = -rest.side.sign  # a sell stop protects a long, a buy stop a short
            level = contract.price_float(rest.stop_ticks)
            # most bars do not reach the stop: `stop_trigger`'s own test, on the same float64
            # values, answers that without building tensors
            eps = cost.touch_eps
            if protects > 0 and not contract.price_float(lo) <= level + eps:
                return None
            if protects < 0 and not contract.price_float(h) >= level - eps:
                return None
            hit, ref = stop_trigger(
                _t(protects), _t(level), _t(contract.price_float(o)), _t(contract.price_float(h)),
                _t(contract.price_float(lo)), cost,
            )  # fmt: skip
            if not bool(hit):
                return None
            if not rest.triggered:
                rest.triggered = True
                self._report(v.Triggered(client_order_id=rest.client_order_id, ts_ns=ts_ns))
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
            self._report(v.Expired(client_order_id=rest.client_order_id, ts_ns=ts_ns))
