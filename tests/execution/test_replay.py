"""The log is the source of truth: folding it rebuilds exactly the state the live engine had.

Random sessions mix orders, cancels, modifications, venue reports (legal, illegal and resent),
marks, kill switches, trading-state changes and the passing of days. After every step an error
has changed nothing but, at most, the opening of a trading day; at the end an engine rebuilt
from the log equals the live one field for field.
"""

from __future__ import annotations

import random
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.errors import FoxhuntError
from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.orders import OrderRequest, OrderType, Side, TimeInForce
from foxhunt.risk import TradingState

from .helpers import CONTRACTS, SEC, T0, RecordingVenue, engine, rebuilt

SYMBOLS = ["ES", "CL"]
BASE = {"ES": 18000, "CL": 8000}
LIMITS = {
    "max_order_qty": 3, "max_position": 4, "max_order_rate": 4, "price_collar_pct": Decimal(1),
    "daily_loss_limit": Decimal(3000), "max_drawdown": Decimal(4000),
}  # fmt: skip
REPORTS = ["accepted", "rejected", "triggered", "filled", "filled", "filled", "canceled",
           "expired", "updated", "cancel_rejected", "modify_rejected"]  # fmt: skip

submit = st.tuples(
    st.just("submit"), st.integers(0, 1), st.sampled_from(list(Side)), st.integers(1, 4),
    st.sampled_from(list(OrderType)), st.sampled_from([TimeInForce.GTC, TimeInForce.DAY]),
    st.integers(-100, 100), st.sampled_from([False, False, False, True]),
    st.sampled_from([None, None, None, "a", "b"]),
)
report = st.tuples(
    st.just("report"), st.sampled_from(REPORTS), st.integers(0, 50), st.integers(1, 4),
    st.sampled_from(["x", "y", "z"]), st.integers(-5, 5),
)
rare = st.one_of(
    st.tuples(st.just("kill")),
    st.tuples(st.just("state"), st.sampled_from(list(TradingState))),
    st.tuples(st.just("reset_drawdown")),
    st.tuples(st.just("wait"), st.integers(0, 40_000)),
)
op = st.one_of(
    submit, submit, submit, report, report, report, report,
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("modify"), st.integers(0, 50), st.integers(1, 4), st.integers(-20, 20)),
    st.tuples(st.just("mark"), st.integers(0, 1), st.integers(-80, 80)),
    rare,
)  # fmt: skip


class Session:
    def __init__(self, eng: TradingEngine):
        self.eng = eng
        self.ts = T0 + SEC
        self.marks = dict(BASE)
        for sym, ticks in BASE.items():
            eng.mark(sym, CONTRACTS[sym].price(ticks), self.ts)

    def pick(self, n: int):
        """Mostly a working order (so reports meet live orders), sometimes any order."""
        working = self.eng.book.working()
        orders = working if working and n % 5 else list(self.eng.book)
        return orders[n % len(orders)] if orders else None

    def run(self, step: tuple) -> None:
        eng, kind = self.eng, step[0]
        self.ts += SEC // 3
        if kind == "submit":
            _, s, side, qty, otype, tif, off, reduce_only, cid = step
            sym = SYMBOLS[s]
            price = CONTRACTS[sym].price(self.marks[sym] + off)
            eng.submit(OrderRequest(
                sym, side, qty, otype, tif,
                limit_price=price if otype is OrderType.LIMIT else None,
                stop_price=price if otype is OrderType.STOP else None,
                reduce_only=reduce_only, client_order_id=cid,
            ), self.ts)  # fmt: skip
        elif kind == "report":
            _, what, n, qty, fid, off = step
            order = self.pick(n)
            if order is None:
                return
            base = {"client_order_id": order.client_order_id, "ts_ns": self.ts}
            price = order.limit_ticks if order.limit_ticks is not None else self.marks[order.symbol] + off
            report = {
                "accepted": lambda: v.Accepted(**base, venue_order_id="V"),
                "rejected": lambda: v.Rejected(**base, reason="no"),
                "triggered": lambda: v.Triggered(**base),
                "filled": lambda: v.Filled(**base, fill_id=fid, quantity=qty, price_ticks=price),
                "canceled": lambda: v.Canceled(**base),
                "expired": lambda: v.Expired(**base),
                "updated": lambda: v.Updated(**base, update_id=fid, quantity=order.quantity),
                "cancel_rejected": lambda: v.CancelRejected(**base, reason="late"),
                "modify_rejected": lambda: v.ModifyRejected(**base, reason="late"),
            }[what]()
            eng.on_report(report)
        elif kind == "cancel":
            order = self.pick(step[1])
            if order is not None:
                eng.cancel(order.client_order_id, self.ts)
        elif kind == "modify":
            _, n, qty, off = step
            order = self.pick(n)
            if order is not None:
                eng.modify(order.client_order_id, self.ts, quantity=qty)
        elif kind == "mark":
            _, s, move = step
            sym = SYMBOLS[s]
            self.marks[sym] += move
            eng.mark(sym, CONTRACTS[sym].price(self.marks[sym]), self.ts)
        elif kind == "kill":
            eng.kill(self.ts, "test")
        elif kind == "state":
            eng.set_trading_state(step[1], self.ts, "test")
        elif kind == "reset_drawdown":
            eng.reset_drawdown(self.ts, "test")
        elif kind == "wait":
            self.ts += step[1] * SEC


def play(eng: TradingEngine, steps: list[tuple]) -> int:
    """Run `steps`; returns how many raised. Checks the no-partial-change rule after each."""
    session, errors = Session(eng), 0
    for step in steps:
        seq = eng.store.last_seq()
        try:
            session.run(step)
        except FoxhuntError:
            errors += 1
            new = [s.event.KIND for s in eng.store.read(seq)]
            assert set(new) <= {"trading_day_started"}, (step, new)
        for order in eng.book:
            assert 0 <= order.filled_qty <= order.quantity
        for sym in SYMBOLS:
            fills = sum(o.filled_qty * o.side.sign for o in eng.book if o.symbol == sym)
            assert eng.account.position(sym) == fills
    return errors


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=5, max_size=80))
def test_a_rebuilt_engine_equals_the_live_one_after_a_random_session(steps):
    live = engine(venue=RecordingVenue(), **LIMITS)
    play(live, steps)
    again = rebuilt(live)
    assert again.snapshot() == live.snapshot()
    assert again.account.equity() == live.account.equity()


def random_steps(rng: random.Random, n: int) -> list[tuple]:
    """A session weighted like real trading: mostly orders and reports, a few kills."""
    steps: list[tuple] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.30:
            steps.append(("submit", rng.randint(0, 1), rng.choice(list(Side)), rng.randint(1, 4),
                          rng.choice(list(OrderType)), rng.choice([TimeInForce.GTC, TimeInForce.DAY]),
                          rng.randint(-60, 60), rng.random() < 0.1,
                          rng.choice([None] * 6 + ["a", "b"])))  # fmt: skip
        elif r < 0.75:
            steps.append(("report", rng.choice(REPORTS), rng.randint(0, 400), rng.randint(1, 3),
                          rng.choice("xyz"), rng.randint(-5, 5)))  # fmt: skip
        elif r < 0.82:
            steps.append(("cancel", rng.randint(0, 400)))
        elif r < 0.86:
            steps.append(("modify", rng.randint(0, 400), rng.randint(1, 4), rng.randint(-20, 20)))
        elif r < 0.96:
            steps.append(("mark", rng.randint(0, 1), rng.randint(-30, 30)))
        elif r < 0.97:
            steps.append(("kill",))
        elif r < 0.985:
            steps.append(("state", rng.choice([TradingState.ACTIVE, TradingState.REDUCING])))
        elif r < 0.99:
            steps.append(("reset_drawdown",))
        else:
            steps.append(("wait", rng.randint(0, 40_000)))
    return steps


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(20, 200))
def test_a_rebuilt_engine_equals_the_live_one_after_a_weighted_random_session(seed, n):
    live = engine(venue=RecordingVenue(), **LIMITS)
    play(live, random_steps(random.Random(seed), n))
    assert rebuilt(live).snapshot() == live.snapshot()


def test_a_long_session_on_a_durable_log_rebuilds_exactly_in_a_new_process(log_url):
    """On a SQLite file and on PostgreSQL."""
    steps = random_steps(random.Random(7), 600)
    url = log_url
    live = engine(url, venue=RecordingVenue(), **LIMITS)
    errors = play(live, steps)
    kinds = {s.event.KIND for s in live.store.read()}
    assert 0 < errors < len(steps)  # the session did exercise illegal reports
    assert {"order_filled", "order_canceled", "order_denied", "order_updated",
            "kill_switch_activated", "trading_state_changed"} <= kinds  # fmt: skip
    live.store.close()
    again = TradingEngine(SqlEventStore(url), CONTRACTS, live.risk_config)
    assert again.snapshot() == live.snapshot()
