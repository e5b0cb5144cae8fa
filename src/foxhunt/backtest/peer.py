"""The SMA-cross baseline in backtesting.py (the optional `peers` extra), for cross-checks.

Same data and rules as `SmaCross`: decide at the close of bar t from closes <= t, long while
SMA(fast) > SMA(slow), short while below (flat with `long_flat`), an exact tie keeps the side,
market orders fill at the next open (backtesting.py's default, `trade_on_close=False`), no
commission or spread. Its means come from pandas' rolling mean, not from foxhunt's code.

Only trades closed by a signal are returned: at the end of the data each engine closes the open
position by its own convention (foxhunt at the last bar's close through the fill model,
backtesting.py's `finalize_trades` at the last bar's open), so that last trade is not compared.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from foxhunt.backtest.strategies import SMA_TIE_TOLERANCE
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
