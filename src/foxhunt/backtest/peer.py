"""The SMA-cross baseline in other backtesters, for cross-checks and speed comparisons:
backtesting.py (the optional `peers` extra; an event loop in Python) and vectorbt (the `bench`
extra; vectorised, compiled with Numba, or its Rust engine where `vectorbt-rust` is installed).

Same data and rules as `SmaCross`: decide at the close of bar t from closes <= t, long while
SMA(fast) > SMA(slow), short while below (flat with `long_flat`), an exact tie keeps the side,
market orders fill at the next open (backtesting.py's default, `trade_on_close=False`; in
vectorbt the signals are shifted one bar and filled at that bar's open), no commission or
spread. Their means come from the peers' own rolling means, not from foxhunt's code.

Only trades closed by a signal are returned: at the end of the data each engine closes the open
position by its own convention (foxhunt at the last bar's close through the fill model,
backtesting.py's `finalize_trades` at the last bar's open, vectorbt leaves it open), so that
last trade is not compared.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from foxhunt.backtest.strategies import SMA_TIE_TOLERANCE
from foxhunt.backtest.trades import Trades
from foxhunt.data.series import Bars
from foxhunt.errors import ConfigError


def backtesting_available() -> bool:
    try:
        import backtesting  # noqa: F401
    except ImportError:
        return False
    return True


def sma_cross_trades(
    bars: Bars, fast: int, slow: int, contracts: int, long_flat: bool = False
) -> tuple[dict[str, np.ndarray], float]:
    """(trades, seconds): backtesting.py's closed trades (side +1/-1, contracts, entry/exit bar
    and price) and the wall time of its run."""
    try:
        import pandas as pd
        from backtesting import Backtest, Strategy
    except ImportError:
        raise ConfigError(
            "backtesting.py is not installed; install the peers extra (pip install -e '.[peers]')"
        ) from None

    def sma(values: np.ndarray, n: int) -> np.ndarray:
        return pd.Series(values).rolling(n).mean().to_numpy()

    class SmaCrossPeer(Strategy):
        def init(self) -> None:
            self.fast = self.I(sma, self.data.Close, fast)
            self.slow = self.I(sma, self.data.Close, slow)
            self.side = 0

        def next(self) -> None:
            diff = self.fast[-1] - self.slow[-1]
            tol = SMA_TIE_TOLERANCE * max(abs(self.data.Close[-1]), 1.0)
            if diff > tol:
                want = 1
            elif diff < -tol:
                want = -1
            else:
                want = self.side
            self.side = want
            if long_flat:
                want = max(want, 0)
            held = int(np.sign(self.position.size))
            if want == held:
                return
            if held:
                self.position.close()
            if want > 0:
                self.buy(size=contracts)
            elif want < 0:
                self.sell(size=contracts)

    frame = pd.DataFrame(
        {"Open": bars.open, "High": bars.high, "Low": bars.low, "Close": bars.close,
         "Volume": bars.volume},
        index=pd.to_datetime(bars.ts),
    )  # fmt: skip
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = Backtest(frame, SmaCrossPeer, cash=1e12).run()
    seconds = time.perf_counter() - start
    t = stats["_trades"]
    size = t["Size"].to_numpy()
    return {
        "side": np.sign(size).astype(np.int64),
        "contracts": np.abs(size).astype(np.float64),
        "entry_bar": t["EntryBar"].to_numpy().astype(np.int64),
        "exit_bar": t["ExitBar"].to_numpy().astype(np.int64),
        "entry_price": t["EntryPrice"].to_numpy().astype(np.float64),
        "exit_price": t["ExitPrice"].to_numpy().astype(np.float64),
    }, seconds


def vectorbt_available() -> bool:
    try:
        import vectorbt  # noqa: F401
    except ImportError:
        return False
    return True


def vectorbt_engines() -> list[str]:
    """vectorbt's simulation engines installed here: "numba" always, "rust" with vectorbt-rust."""
    from vectorbt._engine import is_rust_available

    return ["numba", "rust"] if is_rust_available() else ["numba"]


@dataclass
class VectorbtRun:
    """vectorbt's closed trades (as `sma_cross_trades` returns them), its outputs and timings.

    `seconds` is the whole run, what `foxhunt`'s own figure covers too: the bars into pandas,
    both moving averages (`vbt.MA`), the signals, the simulation (`Portfolio.from_signals`),
    and the outputs (trade records, equity curve, total return, Sharpe, max drawdown);
    `simulate_seconds` is `from_signals` alone."""

    trades: dict[str, np.ndarray]
    seconds: float
    simulate_seconds: float
    engine: str
    outputs: dict[str, float] = field(default_factory=dict)


def vectorbt_sma_cross(bars: Bars, fast: int, slow: int, contracts: int,
                       long_flat: bool = False, engine: str = "numba") -> VectorbtRun:
    """The SMA cross in vectorbt (see the module docstring), timed."""
    try:
        import pandas as pd
        import vectorbt as vbt
    except ImportError:
        raise ConfigError(
            "vectorbt is not installed; install the bench extra (pip install -e '.[bench]')"
        ) from None
    start = time.perf_counter()
    # UTC times, tz-naive: vectorbt 1.2 converts a tz-aware index to Timestamp objects under
    # pandas 3 on every wrap (3 s per 100,000 bars), which would time pandas, not vectorbt
    index = pd.DatetimeIndex(pd.to_datetime(bars.ts, unit="ns"))
    close = pd.Series(bars.close, index=index)
    price = pd.Series(bars.open, index=index)
    diff = (vbt.MA.run(close, fast).ma - vbt.MA.run(close, slow).ma).to_numpy()
    tol = SMA_TIE_TOLERANCE * np.maximum(np.abs(bars.close), 1.0)
    with np.errstate(invalid="ignore"):
        up, down = diff > tol, diff < -tol
    up[:slow] = down[:slow] = False  # foxhunt's first decision is at bar `slow`
    # decided at the close of bar t, filled at the open of t + 1
    go_long = np.concatenate(([False], up[:-1]))
    go_short = np.concatenate(([False], down[:-1]))
    signals = ({"entries": go_long, "exits": go_short, "direction": "longonly"} if long_flat
               else {"entries": go_long, "short_entries": go_short})
    simulate = time.perf_counter()
    pf = vbt.Portfolio.from_signals(close, price=price, size=float(contracts),
                                    size_type="amount", init_cash=1e12, fees=0.0,
                                    slippage=0.0, freq="1min", engine=engine, **signals)
    simulate_s = time.perf_counter() - simulate
    records = pf.trades.records
    equity = pf.value()
    outputs = {"total_return": float(pf.total_return()), "sharpe": float(pf.sharpe_ratio()),
               "max_drawdown": float(pf.max_drawdown()), "final_value": float(equity.iloc[-1])}
    seconds = time.perf_counter() - start
    closed = records[records["status"] == 1]
    return VectorbtRun(
        trades={
            "side": np.where(closed["direction"] == 0, 1, -1).astype(np.int64),
            "contracts": closed["size"].astype(np.float64),
            "entry_bar": closed["entry_idx"].astype(np.int64),
            "exit_bar": closed["exit_idx"].astype(np.int64),
            "entry_price": closed["entry_price"].astype(np.float64),
            "exit_price": closed["exit_price"].astype(np.float64),
        },
        seconds=seconds, simulate_seconds=simulate_s, engine=engine, outputs=outputs,
    )  # fmt: skip


TRADE_KEYS = ("side", "contracts", "entry_bar", "exit_bar", "entry_price", "exit_price")
"""The columns a peer's trades are compared on."""


def signal_trades(trades: Trades) -> dict[str, np.ndarray]:
    """foxhunt's trades closed by a signal, in a peer's layout (side +1/-1)."""
    closed = trades["exit_reason"] == "signal"
    out = {k: trades[k][closed] for k in TRADE_KEYS}
    out["side"] = np.where(out["side"] == "long", 1, -1).astype(np.int64)
    return out


def compare_trades(ours: dict[str, np.ndarray], peer: dict[str, np.ndarray]) -> dict[str, Any]:
    """Whether two trade lists (`TRADE_KEYS` columns) are equal, exactly; otherwise where they
    part: both counts, per column the number of differing rows over the common length, and the
    first differing row of each side."""
    n_ours, n_peer = len(ours["side"]), len(peer["side"])
    common = min(n_ours, n_peer)
    differ = {k: np.flatnonzero(np.asarray(ours[k][:common]) != np.asarray(peer[k][:common]))
              for k in TRADE_KEYS}
    out: dict[str, Any] = {"equal": n_ours == n_peer and not any(d.size for d in differ.values()),
                           "foxhunt_trades": n_ours, "peer_trades": n_peer}
    if out["equal"]:
        return out
    out["rows_differing"] = {k: int(d.size) for k, d in differ.items() if d.size}
    first = min([int(d[0]) for d in differ.values() if d.size], default=common)
    out["first_difference"] = {"row": first} | {
        name: ({k: _plain(t[k][first]) for k in TRADE_KEYS} if first < len(t["side"]) else None)
        for name, t in (("foxhunt", ours), ("peer", peer))}
    return out


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
