"""With limits that never bind, paper trading is the backtest: the same fills (bar, kind,
contracts, price) and the same PnL to the cent, for rule strategies with and without stops,
with session flattens, and for a checkpoint's agent on incrementally computed features."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from foxhunt.backtest import checkpoint_policy, parse_strategy, run_backtest
from foxhunt.env import EnvConfig
from foxhunt.errors import ConfigError
from foxhunt.paper import load_agent, load_rule

from ..backtest.builders import instrument, synth, write_checkpoint
from .helpers import OPEN_LIMITS, paper_trader

N = 1200


@pytest.fixture(scope="module")
def market():
    return synth(N, signal=0.3).bars, instrument()


SAME = ("side", "contracts", "entry_bar", "exit_bar", "entry_ts", "exit_ts", "entry_price",
        "exit_price", "bars_held", "exit_reason")


def same_trades(paper_trades, backtest_trades) -> None:
    assert len(paper_trades) == len(backtest_trades)
    for name in SAME:
        np.testing.assert_array_equal(paper_trades[name], backtest_trades[name], err_msg=name)
    for name in ("gross_pnl", "costs", "pnl"):
        np.testing.assert_allclose(paper_trades[name], backtest_trades[name], atol=1e-6,
                                   err_msg=name)


def same_pnl(paper, backtest) -> None:
    assert abs(paper.pnl - Decimal(repr(backtest.total_pnl))) < Decimal("0.005"), (
        f"paper {paper.pnl} vs backtest {backtest.total_pnl:.2f}")


def compare(bars, inst, decider, env, window, backtest_policy):
    trader = paper_trader(bars, inst, decider, window, env)
    paper = trader.run()
    bt = run_backtest(bars, inst, policies={"p": backtest_policy}, windows=[window],
                      env_config=env, device="cpu")[0]
    assert paper.window == bt.window
    assert len(bt.trades) > 3, "the case must trade"
    same_trades(trader.trades(paper), bt.trades)
    same_pnl(paper, bt)
    assert paper.position == 0 and paper.denied == 0
    return paper, bt


@pytest.mark.parametrize("strategy", ["sma:10,30", "zfade:40,1.5", "random:3"])
def test_a_rule_strategy_on_paper_is_its_backtest(market, strategy):
    bars, inst = market
    compare(bars, inst, load_rule(strategy, bars).decider, EnvConfig(), (100, 900),
            parse_strategy(strategy))


def test_stops_and_session_flattens_on_paper_are_the_backtests(market):
    """Random actions choose trailing stops (placed, trailed, triggered at the venue) and the
    session ends flatten at the close through at-the-close orders."""
    bars, inst = market
    env = EnvConfig(flatten_at_session_end=True, stop_atr_multiples=(0.5, 1.5))
    paper, _ = compare(bars, inst, load_rule("random:11", bars).decider, env, (50, 1100),
                       parse_strategy("random:11"))
    kinds = {f.kind for f in paper.fills}
    assert kinds == {"market", "stop", "close"}


def test_a_checkpoints_agent_on_paper_is_its_backtest(market, tmp_path):
    bars, inst = market
    path = write_checkpoint(tmp_path / "fold0.pt", bars, inst, fit_until=600)
    loaded = load_agent(path, inst)
    policy = checkpoint_policy(path, bars, inst, "cpu")
    paper, _ = compare(bars, inst, loaded.decider, loaded.env, (300, N), policy)
    # the numpy forward decided (torch only near ties), and decided as the backtest did
    decisions = paper.window[1] - 1 - paper.window[0]
    assert loaded.decider.fast is not None and loaded.decider.torch_calls < decisions // 20


def test_a_window_with_no_decision_is_refused(market):
    bars, inst = market
    with pytest.raises(ConfigError, match="leaves no decision"):
        paper_trader(bars, inst, load_rule("sma:10,30", bars).decider, (5, 6), EnvConfig())


def test_binding_limits_deny_orders_and_say_so(market):
    """The same run with max_position 1: bigger targets are denied, never sent."""
    bars, inst = market
    tight = OPEN_LIMITS.model_copy(update={"max_position": 1, "max_order_qty": 1})
    paper = paper_trader(bars, inst, load_rule("sma:10,30", bars).decider, (100, 900),
                         EnvConfig(), risk=tight).run()
    assert paper.denied > 0
    assert all(abs(f.quantity) <= 1 for f in paper.fills)


def _breach_run(market, **limits):
    bars, inst = market
    tight = OPEN_LIMITS.model_copy(update={"max_drawdown": Decimal(1), **limits})
    trader = paper_trader(bars, inst, load_rule("sma:10,30", bars).decider, (100, 900),
                          EnvConfig(), risk=tight)
    return bars, trader, trader.run()


def test_a_breach_flattens_at_the_next_bar_and_the_run_ends_flat(market):
    """A $1 drawdown limit trips in the first trade: the account halts, the kill switch's
    flatten fills at the next bar's open (one bar's move past the limit, no more), and the
    position is closed as a round trip."""
    bars, trader, paper = _breach_run(market)
    assert str(trader.engine.trading_state) == "HALTED" and paper.position == 0
    [halt] = [e for _, e in trader.store.read() if type(e).__name__ == "TradingStateChanged"]
    kills = [f for f in paper.fills if f.client_order_id.startswith("K")]
    next_bar = int(np.searchsorted(bars.ts, halt.ts_ns)) + 1
    assert kills and all(f.bar == next_bar for f in kills)
    assert sum(f.quantity for f in paper.fills) == 0 and len(trader.trades(paper)) == 1


def test_a_breach_with_on_breach_reduce_lets_the_strategy_exit_and_the_run_ends_flat(market):
    """With on_breach = "reduce" the account goes REDUCING: the strategy's own exit (or the
    window's last flatten) passes, its entries are denied."""
    _, trader, paper = _breach_run(market, on_breach="reduce")
    assert str(trader.engine.trading_state) == "REDUCING" and paper.position == 0
    assert paper.denied > 0
    assert len(trader.trades(paper)) >= 1
