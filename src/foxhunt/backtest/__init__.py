"""Backtests on the training env's fill model: checkpoints and baselines over any bar range,
many policies x windows batched on the device, trades, equity curves and metrics.

    results = run_backtest(bars, instrument, policies={"sma": parse_strategy("sma:10,30")},
                           windows=[(0, len(bars))], env_config=EnvConfig())
    write_trades(results, "trades.parquet")

A signal of one's own is a table of decisions, one (direction, size, stop) row per bar, as
`ActionReplay(actions)`: direction 0 flat, 1 long, 2 short; size and stop index `[env]`'s
contract sizes and stop multiples.
"""

from foxhunt.backtest.engine import Backtester, Job, run_backtest
from foxhunt.backtest.results import (
    BacktestResult,
    read_table,
    report_series,
    write_bars,
    write_table,
    write_trades,
)
from foxhunt.backtest.strategies import (
    STRATEGY_FORMS,
    ActionReplay,
    BuyAndHold,
    Flat,
    PolicySpec,
    SmaCross,
    TablePolicy,
    checkpoint_policy,
    parse_strategy,
)
from foxhunt.backtest.trades import EXIT_REASONS, TRADE_COLUMNS, Trades, extract_trades

__all__ = [
    "EXIT_REASONS",
    "STRATEGY_FORMS",
    "TRADE_COLUMNS",
    "ActionReplay",
    "BacktestResult",
    "Backtester",
    "BuyAndHold",
    "Flat",
    "Job",
    "PolicySpec",
    "SmaCross",
    "TablePolicy",
    "Trades",
    "checkpoint_policy",
    "extract_trades",
    "parse_strategy",
    "read_table",
    "report_series",
    "run_backtest",
    "write_bars",
    "write_table",
    "write_trades",
]
