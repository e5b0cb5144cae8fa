"""One table of position-book cases, held against every book that keeps positions: the env's
vectorised fills (float64 tensors), the backtest (its direct path and lock-step), the paper
loop's mirror of the env (`EnvMirror`, the same functions on Python floats) and the paper
account (event-sourced, FIFO lots, Decimal).

Each case is a few ES bars (tick 0.25, $50 a point, $2.25 a side, one tick of slippage), the
decisions taken at their closes, and, hand-computed, every fill (bar, kind, contracts, price)
and the book after each bar with a fill: position, the env's average price (average cost),
cash (the env's flows: what fills paid and received, less commissions) and the account's
realised PnL (FIFO, before commission). The last bar's fills include the final flatten at its
close. Average cost and FIFO split PnL differently between realised and open (after a partial
reduce the env's average keeps both entries, the account's open lot is the later one); cash,
position and equity at every close are the same in all books. Every case also runs off the
grid, its prices moved by less than half a tick: kept off-grid bars trade at the nearest tick
in every book, so the table's answers stand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pytest
import torch

from foxhunt.backtest.engine import Backtester, Job
from foxhunt.backtest.strategies import ActionReplay
from foxhunt.data.grid import tradable
from foxhunt.data.instruments import Session
from foxhunt.env import EnvConfig, MarketTensors, TradingVecEnv
from foxhunt.env.fills import Book, CostModel, execute
from foxhunt.env.market import average_true_range
from foxhunt.paper.mirror import EnvMirror
from foxhunt.paper.policy import RuleDecider

from ..paper.helpers import paper_trader
from .env_builders import MINUTE, SIZES_AND_STOPS, T0, bars_from_rows, es

FLAT, LONG1, LONG2, LONG3 = (0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0)
SHORT1, SHORT2 = (2, 0, 0), (2, 1, 0)
LONG1_TIGHT, LONG2_TIGHT, SHORT1_TIGHT = (1, 0, 1), (1, 1, 1), (2, 0, 1)
"""(direction, size, stop): sizes 1, 2, 3 contracts; a tight stop is 1 ATR (2 points here)."""
SESSION = Session(tz="UTC", open="14:30", close="21:00")
KINDS = ("market", "stop", "close")
F64 = torch.float64


@dataclass(frozen=True)
class Case:
    bars: list[tuple[float, float, float, float]]
    actions: list[tuple[int, int, int]]  # decided at the closes of bars 0 .. n-2
    fills: dict[int, list[tuple[str, int, str]]]  # bar -> (kind, contracts, price)
    books: dict[int, tuple[int, str, str, str]]  # bar -> (position, avg price, cash, realised)
    minutes: list[int] | None = None  # bar close times from T0 (default one a minute)
    env: dict = field(default_factory=dict)


CASES = {
    "flat to long, add, partial reduce, flip through zero, close to flat, final flatten": Case(
        bars=[(100.00, 101.00, 99.00, 100.00), (100.50, 101.50, 99.50, 101.00),
              (101.00, 102.00, 100.50, 101.50), (101.25, 101.75, 100.00, 100.50),
              (100.50, 101.00, 99.50, 100.00), (99.75, 100.50, 99.00, 100.25),
              (100.25, 101.00, 99.75, 100.75)],
        actions=[LONG1, LONG3, LONG1, SHORT2, FLAT, LONG1],
        fills={1: [("market", 1, "100.75")], 2: [("market", 2, "101.25")],
               3: [("market", -2, "101.00")], 4: [("market", -3, "100.25")],
               5: [("market", 2, "100.00")],
               6: [("market", 1, "100.50"), ("close", -1, "100.50")]},
        books={1: (1, "100.75", "-5039.75", "0"), 2: (3, "303.25/3", "-15169.25", "0"),
               3: (1, "303.25/3", "-5073.75", "0"), 4: (-2, "100.25", "9957.00", "-50"),
               5: (0, "0", "-47.50", "-25"), 6: (0, "0", "-52.00", "-25")},
    ),
    "a long's stop hit inside the bar (trailed twice)": Case(
        bars=[(100.00, 101.00, 99.00, 100.00), (100.00, 101.00, 99.00, 100.50),
              (100.50, 101.50, 99.50, 101.00), (101.00, 101.50, 98.50, 99.00),
              (99.00, 100.00, 98.00, 99.50)],
        actions=[LONG1_TIGHT, LONG1_TIGHT, LONG1_TIGHT, FLAT],
        fills={1: [("market", 1, "100.25")], 3: [("stop", -1, "98.75")]},
        books={1: (1, "100.25", "-5014.75", "0"), 3: (0, "0", "-79.50", "-75")},
    ),
    "a short's stop gapped through: filled at the open": Case(
        bars=[(100.00, 101.00, 99.00, 100.00), (100.00, 101.00, 99.00, 99.50),
              (99.50, 100.50, 98.50, 99.00), (101.50, 102.00, 101.00, 101.75),
              (101.75, 102.50, 101.00, 102.00)],
        actions=[SHORT1_TIGHT, SHORT1_TIGHT, SHORT1_TIGHT, FLAT],
        fills={1: [("market", -1, "99.75")], 3: [("stop", 1, "101.75")]},
        books={1: (-1, "99.75", "4985.25", "0"), 3: (0, "0", "-104.50", "-100")},
    ),
    "the session's close flattens, the next session re-enters": Case(
        bars=[(100.00, 100.50, 99.50, 100.00), (100.25, 100.75, 99.75, 100.50),
              (100.50, 101.00, 100.00, 100.75), (101.50, 102.00, 101.00, 101.75),
              (101.75, 102.25, 101.25, 102.00)],
        minutes=[418, 419, 420, 1471, 1472],  # 20:58, 20:59, 21:00 (session end), 14:31 ...
        env={"flatten_at_session_end": True},
        actions=[LONG2, LONG2, LONG2, SHORT1],
        fills={1: [("market", 2, "100.50")], 2: [("close", -2, "100.50")],
               3: [("market", 2, "101.75")],
               4: [("market", -3, "101.50"), ("close", 1, "102.25")]},
        books={1: (2, "100.50", "-10054.50", "0"), 2: (0, "0", "-9.00", "0"),
               3: (2, "101.75", "-10188.50", "0"), 4: (0, "0", "-85.00", "-62.50")},
    ),
}
def jittered(case: Case) -> Case:
    """`case` with every price moved off the grid by less than half a tick (order kept): kept
    off-grid prices trade at the nearest tick (`data.grid.tradable`), so its fills and books
    are the case's own."""
    offsets = (0.05, 0.10, -0.10, -0.05)  # open, high, low, close; half an ES tick is 0.125
    bars = [tuple(round(p + d, 2) for p, d in zip(row, offsets, strict=True)) for row in case.bars]
    return Case(bars, case.actions, case.fills, case.books, case.minutes, case.env)


CASES.update({f"off the grid: {name}": jittered(CASES[name]) for name in (
    "flat to long, add, partial reduce, flip through zero, close to flat, final flatten",
    "a long's stop hit inside the bar (trailed twice)",
    "a short's stop gapped through: filled at the open",
    "the session's close flattens, the next session re-enters")})


def prices(bars):
    """What the fills and marks are at (ES's 0.25 grid)."""
    return tradable(bars, 0.25)


def build(case: Case):
    cfg = EnvConfig(window=1, episode_len=len(case.bars) - 1, atr_window=3,
                    **SIZES_AND_STOPS, **case.env)
    ts = None if case.minutes is None else T0 + np.array(case.minutes) * MINUTE
    bars = bars_from_rows(case.bars, ts)
    return bars, es(SESSION if case.minutes else None), cfg


def scripted(case: Case):
    bars, inst, cfg = build(case)
    feats = np.zeros((len(bars.ts), 1), dtype=np.float32)
    env = TradingVecEnv(MarketTensors.from_bars(bars, feats, inst, cfg), cfg,
                        generator=torch.Generator().manual_seed(0))
    env.reset(torch.zeros(1, dtype=torch.long))
    return env, bars, inst, cfg


def expected_books(case: Case) -> list[tuple[int, float, float, str, str]]:
    """(position, avg price, cash, realised, cash text) after each bar 1 .. n-1; a bar without a
    fill keeps the book it found."""
    book, out = (0, "0", "0", "0"), []
    for t in range(1, len(case.bars)):
        pos, avg, cash, realised = book = case.books.get(t, book)
        num, _, den = avg.partition("/")
        out.append((pos, float(num) / float(den or 1), float(cash), realised, cash))
    return out


def expected_fills(case: Case) -> list[tuple[int, str, int, str]]:
    return [(t, kind, q, price) for t, fills in sorted(case.fills.items())
            for kind, q, price in fills]


def assert_book(got: tuple[float, float, float], want: tuple, where: str) -> None:
    """Position and average price as the table says, cash to the cent."""
    assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-12), where
    assert abs(got[2] - want[2]) < 0.005, where


def table(case: Case) -> np.ndarray:
    return np.array([*case.actions, FLAT], dtype=np.uint8)


@pytest.mark.parametrize("name", CASES)
def test_the_envs_fills_and_book_are_the_tables(name):
    """The vectorised fill functions, stepped by the env, then the backtest's final flatten."""
    case = CASES[name]
    env, bars, _, _ = scripted(case)
    got = []
    for t, action in enumerate(case.actions, start=1):
        r = env.step(torch.tensor([action]))
        got += [(t, kind, int(q), float(p)) for kind, q, p in zip(
            KINDS, (r.order_qty, r.stop_qty, r.flatten_qty),
            (r.order_price, r.stop_price, r.flatten_price), strict=True) if float(q)]
        book = Book(env._pos, env._avg, env._cash)
        if t == len(case.bars) - 1:  # the episode's end reset the env: its book from `r`
            close = torch.tensor([prices(bars).close[t]], dtype=F64)
            cash = r.equity - r.position * close * env.cost.point_value
            end = execute(Book(r.position, cash * 0, cash), -r.position, close, env.cost)
            got += [(t, "close", int(end.qty), float(end.price))] if float(end.qty) else []
            book = end.book
        assert_book(tuple(float(x) for x in book), expected_books(case)[t - 1], f"bar {t}")
    want = expected_fills(case)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    assert [g[3] for g in got] == pytest.approx([float(w[3]) for w in want], abs=1e-9)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "lockstep"])
@pytest.mark.parametrize("name", CASES)
def test_the_backtests_positions_and_equity_are_the_tables(name, direct):
    case = CASES[name]
    bars, inst, cfg = build(case)
    [bt] = Backtester(bars, inst, cfg, device="cpu", direct=direct).run(
        [Job("table", ActionReplay(table(case)), (0, len(bars.ts)))])
    stops = any(a[2] for a in case.actions)
    assert bt.engine["mode"] == ("direct" if direct and not stops else "lockstep")
    books = expected_books(case)
    np.testing.assert_array_equal(bt.position[1:], [b[0] for b in books])
    equity = [cash + pos * c * 50.0 for (pos, _, cash, _, _), c in zip(
        books, prices(bars).close[1:], strict=True)]
    np.testing.assert_allclose(bt.equity[1:] - 100_000.0, equity, rtol=0, atol=0.005)


@pytest.mark.parametrize("name", CASES)
def test_the_paper_mirror_is_the_env_to_the_bit(name):
    """`EnvMirror` fed the table's fills keeps the env's book, stop and position features bit
    for bit (the same `env.fills` functions on floats), and the table's book."""
    case = CASES[name]
    env, stored, inst, cfg = scripted(case)
    bars = prices(stored)
    mirror = EnvMirror(cfg, CostModel.from_instrument(inst, cfg.slippage_ticks), len(bars.ts) - 1)
    atr, scale = average_true_range(bars, cfg.atr_window, inst.tick_size), env.market.reward_scale
    last = len(bars.ts) - 1
    for t, action in enumerate(case.actions, start=1):
        mirror.decide(mirror.decode(action, bars.close[t - 1], atr[t - 1]))
        r = env.step(torch.tensor([action]))
        for kind, q, _ in case.fills.get(t, []):
            mirror.fill(kind, float(q), bars.open[t], bars.high[t], bars.low[t], bars.close[t])
        mirror.close_bar(bars.close[t], atr[t])
        assert_book(tuple(mirror.book), expected_books(case)[t - 1], f"bar {t}")
        if t == last:  # the env has no final flatten
            continue
        assert tuple(mirror.book) == (env._pos.item(), env._avg.item(), env._cash.item())
        assert (mirror.level, mirror.mode, mirror.time_in_trade, mirror.peak) == (
            env._stop_level.item(), env._stop_mode.item(), env._time_in_trade.item(),
            env._peak.item())
        state = mirror.pos_state(bars.close[t], scale[t].item(), atr[t])
        assert np.array_equal(np.float32(state), r.next_pos_state[0].numpy())


@pytest.mark.parametrize("name", CASES)
def test_paper_fills_and_its_account_are_the_tables(name):
    """The paper loop (OMS, simulated venue, event log) fills as the table says; its mirror
    keeps the table's book and its account (FIFO, Decimal) the table's position, realised PnL
    and equity, to the cent."""
    case = CASES[name]
    bars, inst, cfg = build(case)
    trader = paper_trader(bars, inst, RuleDecider(ActionReplay(table(case)), bars),
                          (0, len(bars.ts)), cfg)
    seen, close_bar = [], trader.mirror.close_bar

    def spy(close: float, atr: float) -> None:
        close_bar(close, atr)
        account = trader.engine.account
        seen.append((tuple(trader.mirror.book), account.position(inst.symbol), account.realised,
                     account.equity() - account.starting_cash))

    trader.mirror.close_bar = spy
    result = trader.run()
    assert [(f.bar, f.kind, f.quantity, f.price) for f in result.fills] == [
        (t, kind, q, Decimal(price)) for t, kind, q, price in expected_fills(case)]
    books = expected_books(case)
    for t, ((book, pos, realised, equity), want) in enumerate(zip(seen, books, strict=True), 1):
        assert_book(book, want, f"bar {t}")
        assert (pos, realised) == (want[0], Decimal(want[3])), f"bar {t}"
        mark = Decimal(repr(float(prices(bars).close[t])))
        assert equity == Decimal(want[4]) + pos * mark * 50, f"bar {t}"
