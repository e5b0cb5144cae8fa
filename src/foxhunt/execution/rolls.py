"""Rolling a held futures position: the roll's events and its state machine, folded from the log.

A roll moves a position of `quantity` (signed) contracts from one contract month to the next
(`from_symbol` -> `to_symbol`) with two orders, each through the risk checks and in the log:
the *out* leg closes the old contract (reduce-only), and only once it has ended having closed
contracts does the *in* leg open the same signed quantity in the new one (as many as the out
leg closed). The in leg never goes out before the out leg has ended, so no failure, reject or
crash can leave the position doubled: at worst part of it is still in the old contract, or it
is flat, and the roll says so.

    STARTED --out leg sent--> CLOSING --out leg ended, filled > 0--> OPENING --RollCompleted--> COMPLETED
       |                        |                                        |
       +------ RollFailed ------+-------------------- RollFailed --------+--> FAILED

The start and the end are roll events (`RollStarted`, `RollCompleted`, `RollFailed`); the moves
between them are the legs' own order events (the out leg's `OrderSubmitted`, the order that
ended it). A pair missing from `TRANSITIONS` is illegal: the event raises
`IllegalRollTransition` and changes nothing. Folding the log therefore rebuilds every roll's
state exactly; `execution.roller.Roller` reads that state and makes the next step.

The legs' client order ids come from the roll's id (`<roll_id>-out`, `<roll_id>-in`), so a step
run twice (a restart) sends nothing twice: the OMS keeps one order per id.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foxhunt.events import Event, event
from foxhunt.orders.errors import TradingError
from foxhunt.orders.order import Order


class RollStatus(StrEnum):
    STARTED = "STARTED"  # logged; the out leg is not sent yet
    CLOSING = "CLOSING"  # the out leg is at the venue
    OPENING = "OPENING"  # the out leg closed contracts; the in leg is to send or at the venue
    COMPLETED = "COMPLETED"  # both legs filled in full: the position is in the new contract
    FAILED = "FAILED"  # ended short of that; `reason` says what is where


class RollTrigger(StrEnum):
    OUT_SENT = "OUT_SENT"  # the out leg's OrderSubmitted
    OUT_ENDED = "OUT_ENDED"  # the out leg ended (filled, canceled, ...) having closed contracts
    COMPLETE = "COMPLETE"  # RollCompleted
    FAIL = "FAIL"  # RollFailed


_S, _T = RollStatus, RollTrigger
TRANSITIONS: dict[tuple[RollStatus, RollTrigger], RollStatus] = {
    (_S.STARTED, _T.OUT_SENT): _S.CLOSING,
    (_S.STARTED, _T.FAIL): _S.FAILED,
    (_S.CLOSING, _T.OUT_ENDED): _S.OPENING,
    (_S.CLOSING, _T.FAIL): _S.FAILED,
    (_S.OPENING, _T.COMPLETE): _S.COMPLETED,
    (_S.OPENING, _T.FAIL): _S.FAILED,
}
"""Every legal move of a roll; COMPLETED and FAILED have no way out."""

TERMINAL = frozenset({RollStatus.COMPLETED, RollStatus.FAILED})
ROLL_TAG = "roll"
"""The tag of both legs' orders."""


class IllegalRollTransition(TradingError):
    """A roll event that the roll's state machine does not allow; it was not applied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RollEvent(Event):
    roll_id: str


@event("roll_started", "roll:{roll_id}:started")
class RollStarted(RollEvent):
    """A roll begins: `quantity` (signed) contracts held in `from_symbol` go to `to_symbol`.
    `reason` is the roll table's (the rule that decided it, and when)."""

    root: str
    from_symbol: str
    to_symbol: str
    quantity: int
    reason: str = ""


@event("roll_completed", "roll:{roll_id}:completed")
class RollCompleted(RollEvent):
    """Both legs filled in full: the position is `quantity` in the new contract."""

    quantity: int


@event("roll_failed", "roll:{roll_id}:failed")
class RollFailed(RollEvent):
    """The roll ended short: `reason` says which leg, why, and what each contract holds."""

    reason: str


def leg_ids(roll_id: str) -> tuple[str, str]:
    """The client order ids of a roll's out and in legs."""
    return f"{roll_id}-out", f"{roll_id}-in"


class Roll:
    """One roll's state, changed only through `TRANSITIONS`."""

    def __init__(self, started: RollStarted):
        if started.quantity == 0:
            raise IllegalRollTransition(f"roll {started.roll_id}: a roll of 0 contracts")
        if started.from_symbol == started.to_symbol:
            raise IllegalRollTransition(
                f"roll {started.roll_id}: from and to are both {started.from_symbol}")
        self.started = started
        self.out_id, self.in_id = leg_ids(started.roll_id)
        self.status = RollStatus.STARTED
        self.out_filled = 0  # contracts the out leg closed
        self.in_filled = 0  # contracts the in leg opened
        self.reason = ""
        self.ts_last = started.ts_ns

    @property
    def roll_id(self) -> str:
        return self.started.roll_id

    @property
    def quantity(self) -> int:
        return self.started.quantity

    @property
    def sign(self) -> int:
        return 1 if self.quantity > 0 else -1

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    def _next(self, trigger: RollTrigger, what: str) -> RollStatus:
        nxt = TRANSITIONS.get((self.status, trigger))
        if nxt is None:
            raise IllegalRollTransition(
                f"roll {self.roll_id}: {what} is illegal in state {self.status}")
        return nxt

    def apply(self, event: RollCompleted | RollFailed) -> None:
        """A roll's end; checked completely before it changes anything."""
        if isinstance(event, RollCompleted):
            nxt = self._next(RollTrigger.COMPLETE, event.KIND)
            if event.quantity != self.quantity or self.in_filled != abs(self.quantity):
                raise IllegalRollTransition(
                    f"roll {self.roll_id}: completed with {event.quantity:+d} but the in leg "
                    f"opened {self.in_filled} of {abs(self.quantity)}")
        else:
            nxt = self._next(RollTrigger.FAIL, event.KIND)
            self.reason = event.reason
        self.status = nxt
        self.ts_last = event.ts_ns

    def on_leg(self, order: Order) -> None:
        """A leg's order changed (the book applied one of its events)."""
        self.ts_last = max(self.ts_last, order.ts_last)
        if order.client_order_id == self.in_id:
            self.in_filled = order.filled_qty
            return
        self.out_filled = order.filled_qty
        if self.status is RollStatus.STARTED and order.is_working:
            self.status = self._next(RollTrigger.OUT_SENT, "the out leg's submission")
        if self.status is RollStatus.CLOSING and order.is_terminal and order.filled_qty > 0:
            self.status = self._next(RollTrigger.OUT_ENDED, "the out leg's end")

    def line(self) -> str:
        """One line: the roll, its state and, for a failed one, why."""
        s = self.started
        head = (f"roll {s.roll_id}: {s.quantity:+d} {s.from_symbol} -> {s.to_symbol} "
                f"{self.status}")
        if self.status is RollStatus.FAILED:
            return f"{head}: {self.reason}"
        if self.status is RollStatus.COMPLETED:
            return head
        return (f"{head} (out leg {self.out_id} closed {self.out_filled}, in leg {self.in_id} "
                f"opened {self.in_filled} of {abs(s.quantity)})")

    def snapshot(self) -> dict[str, Any]:
        return {"status": str(self.status), "from": self.started.from_symbol,
                "to": self.started.to_symbol, "quantity": self.quantity,
                "out_filled": self.out_filled, "in_filled": self.in_filled,
                "reason": self.reason}


class RollBook:
    """Every roll of an account, by id, with the client order ids of their legs."""

    def __init__(self) -> None:
        self._rolls: dict[str, Roll] = {}
        self.legs: dict[str, Roll] = {}  # leg client order id -> its roll

    def __contains__(self, roll_id: str) -> bool:
        return roll_id in self._rolls

    def __iter__(self):
        return iter(self._rolls.values())

    def __len__(self) -> int:
        return len(self._rolls)

    def get(self, roll_id: str) -> Roll:
        try:
            return self._rolls[roll_id]
        except KeyError:
            raise TradingError(f"unknown roll {roll_id!r}") from None

    def open(self) -> list[Roll]:
        """The rolls not yet completed or failed, in the order they started."""
        return [r for r in self._rolls.values() if not r.is_terminal]

    def apply(self, event: RollEvent) -> None:
        if isinstance(event, RollStarted):
            if event.roll_id in self._rolls:
                raise IllegalRollTransition(f"roll {event.roll_id} has already started")
            roll = Roll(event)
            taken = [cid for cid in (roll.out_id, roll.in_id) if cid in self.legs]
            if taken:
                raise IllegalRollTransition(
                    f"roll {event.roll_id}: leg id {taken[0]} is another roll's")
            self._rolls[roll.roll_id] = roll
            self.legs[roll.out_id] = self.legs[roll.in_id] = roll
            return
        if isinstance(event, RollCompleted | RollFailed):
            self.get(event.roll_id).apply(event)
            return
        raise TradingError(f"unknown roll event {type(event).__name__}")

    def on_order(self, order: Order) -> None:
        roll = self.legs.get(order.client_order_id)
        if roll is not None:
            roll.on_leg(order)

    def snapshot(self) -> dict[str, Any]:
        return {rid: r.snapshot() for rid, r in self._rolls.items()}
