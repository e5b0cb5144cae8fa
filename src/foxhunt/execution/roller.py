"""The driver of rolls: starts a roll when the roll table says so, and makes each next step.

`Roller.start` logs `RollStarted` for the position held in the old contract; `Roller.advance`,
called after each batch of venue reports (and once after a restart's reconciliation), reads
each open roll's state (`execution.rolls`, folded from the log) and does what that state asks:

- STARTED: send the out leg (reduce-only market order closing the old contract);
- CLOSING: wait while the out leg works; if it ended having closed nothing (denied, rejected,
  canceled, expired), log `RollFailed`;
- OPENING: send the in leg (a market order for as many contracts as the out leg closed, the
  position's sign, in the new contract) unless it is in the log already; when it has ended, log
  `RollCompleted` (all contracts moved) or `RollFailed` (what each contract holds).

Every step is idempotent (the legs' ids come from the roll's), so `advance` after a crash sends
the missing leg once, or ends the roll with one clear line, and never doubles a position. The
same code runs in paper and live trading: it needs only the engine, whose venue is whichever
the trader attached.
"""

from __future__ import annotations

from dataclasses import dataclass

from foxhunt.data.timestamps import format_ns
from foxhunt.execution.engine import TradingEngine
from foxhunt.execution.rolls import (
    ROLL_TAG,
    Roll,
    RollCompleted,
    RollFailed,
    RollStarted,
    RollStatus,
)
from foxhunt.orders.enums import Side
from foxhunt.orders.errors import TradingError
from foxhunt.orders.order import Order, OrderRequest
from foxhunt.orders.state import OrderStatus


@dataclass(frozen=True, slots=True)
class ScheduledRoll:
    """One row of a roll table as a trader acts on it: from the close stamped `start_ts` on (in
    paper, the bar before the roll bar: at or after the close of the day that decided it), a
    position held in `from_symbol` starts its roll to `to_symbol`."""

    root: str
    from_symbol: str
    to_symbol: str
    start_ts: int
    reason: str = ""

    @property
    def roll_id(self) -> str:
        return f"R-{self.from_symbol}-{self.to_symbol}"


class Roller:
    """Starts and advances the rolls of one engine (no state of its own: all of it is in the
    engine's `rolls`, folded from the log)."""

    def __init__(self, engine: TradingEngine):
        self.engine = engine

    def start(self, roll: ScheduledRoll, ts_ns: int) -> Roll | None:
        """Start `roll` for the position held in its old contract now, and send its out leg;
        None when nothing is held there. A roll already in the log is returned as it is (a
        step run again after a restart starts nothing)."""
        eng = self.engine
        if roll.roll_id in eng.rolls:
            return eng.rolls.get(roll.roll_id)
        if ts_ns < roll.start_ts:
            raise TradingError(f"roll {roll.roll_id}: starts at {format_ns(roll.start_ts)}, "
                               f"not at {format_ns(ts_ns)}: a roll acts after its decision")
        qty = eng.account.position(roll.from_symbol)
        if qty == 0:
            return None
        eng._contract(roll.to_symbol)  # an unknown contract is refused before anything is logged
        eng.record_roll(RollStarted(
            ts_ns=ts_ns, roll_id=roll.roll_id, root=roll.root, from_symbol=roll.from_symbol,
            to_symbol=roll.to_symbol, quantity=qty, reason=roll.reason))  # fmt: skip
        self.advance(ts_ns)
        return eng.rolls.get(roll.roll_id)

    def advance(self, ts_ns: int) -> list[Roll]:
        """Make every open roll's next step; the rolls that ended in this call."""
        ended = []
        for roll in self.engine.rolls.open():
            self._step(roll, ts_ns)
            if roll.is_terminal:
                ended.append(roll)
        return ended

    def _step(self, roll: Roll, ts_ns: int) -> None:
        if roll.status is RollStatus.STARTED:
            out = self._send(roll, roll.out_id, roll.started.from_symbol, -roll.quantity, ts_ns,
                             reduce_only=True)
            if out.status is OrderStatus.DENIED:
                self._fail(roll, ts_ns, f"out leg {out.client_order_id} denied: {out.reason}")
            elif out.is_terminal and out.filled_qty == 0:
                self._fail(roll, ts_ns, self._out_short(roll, out))
            # a leg filled at once has moved the roll on already: OPENING goes on below
        if roll.status is RollStatus.CLOSING:
            out = self.engine.book.get(roll.out_id)
            if out.is_terminal and out.filled_qty == 0:
                self._fail(roll, ts_ns, self._out_short(roll, out))
        if roll.status is RollStatus.OPENING:
            self._opening(roll, ts_ns)

    def _opening(self, roll: Roll, ts_ns: int) -> None:
        eng, s = self.engine, roll.started
        closed = roll.out_filled
        if roll.in_id not in eng.book:
            leg = self._send(roll, roll.in_id, s.to_symbol, roll.sign * closed, ts_ns)
            if leg.status is OrderStatus.DENIED:
                self._fail(roll, ts_ns, f"in leg {leg.client_order_id} denied: {leg.reason}; "
                           f"{self._holds(roll)}")
                return
        leg = eng.book.get(roll.in_id)
        if not leg.is_terminal:
            return
        if closed == leg.filled_qty == abs(roll.quantity):
            eng.record_roll(RollCompleted(ts_ns=ts_ns, roll_id=roll.roll_id,
                                          quantity=roll.quantity))
            return
        parts = []
        if closed != abs(roll.quantity):
            parts.append(f"out leg {roll.out_id} closed {closed} of {abs(roll.quantity)}")
        if leg.filled_qty != closed:
            parts.append(f"in leg {roll.in_id} {leg.status} after opening {leg.filled_qty} of "
                         f"{closed}" + (f" ({leg.reason})" if leg.reason else ""))
        self._fail(roll, ts_ns, f"{'; '.join(parts)}; {self._holds(roll)}")

    def _send(self, roll: Roll, cid: str, symbol: str, signed: int, ts_ns: int, *,
              reduce_only: bool = False) -> Order:
        return self.engine.submit(OrderRequest(symbol, Side.of(signed), abs(signed),
                                               reduce_only=reduce_only, client_order_id=cid,
                                               tag=ROLL_TAG), ts_ns)  # fmt: skip

    def _out_short(self, roll: Roll, out: Order) -> str:
        why = f" ({out.reason})" if out.reason else ""
        return f"out leg {out.client_order_id} {out.status} with nothing closed{why}; " + \
            self._holds(roll)

    def _holds(self, roll: Roll) -> str:
        s, acct = roll.started, self.engine.account
        return (f"{s.from_symbol} holds {acct.position(s.from_symbol):+d}, {s.to_symbol} "
                f"{acct.position(s.to_symbol):+d}")

    def _fail(self, roll: Roll, ts_ns: int, reason: str) -> None:
        self.engine.record_roll(RollFailed(ts_ns=ts_ns, roll_id=roll.roll_id, reason=reason))
