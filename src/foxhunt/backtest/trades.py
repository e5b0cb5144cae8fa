"""Round-trip trades from a time-ordered list of fills, vectorised (no Python loop per fill).

A trade opens when the position leaves flat (or flips through zero) and closes when it is flat
again; adding to or reducing a position inside a trade belongs to that trade. A fill that flips
the position is split: the part that closes the old trade and the part that opens the new one,
its costs shared in proportion to contracts (commission and slippage are both per contract).

Money per trade: `gross_pnl` is valued at market prices before costs, `costs` is commission plus
slippage, `pnl = gross_pnl - costs` is what the account made. Prices are average fill prices
(slippage included), so for one fill in and one fill out
`pnl = (exit - entry) * side * contracts * point_value - commission`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXIT_REASONS = ("signal", "stop", "session", "end")
"""Fill kinds in the order the env applies them within a bar, then the backtest's final flatten."""

TRADE_COLUMNS = (
    "side", "contracts", "entry_bar", "exit_bar", "entry_ts", "exit_ts", "entry_price",
    "exit_price", "gross_pnl", "costs", "pnl", "bars_held", "exit_reason",
)  # fmt: skip


@dataclass(frozen=True)
class Trades:
    """Column arrays, one row per trade, in entry order. `side` is "long"/"short"; bars are
    absolute indices into the series and `*_ts` those bars' timestamps (close times: a market
    order fills at the open of its bar, a stop inside it, a flatten at its close)."""

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["side"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def records(self) -> list[dict[str, object]]:
        """JSON-safe rows."""
        cols = {k: self.columns[k].tolist() for k in TRADE_COLUMNS}
        return [dict(zip(TRADE_COLUMNS, row, strict=True)) for row in zip(*cols.values())]


def extract_trades(
    bar: np.ndarray,
    kind: np.ndarray,
    qty: np.ndarray,
    price: np.ndarray,
    cost: np.ndarray,
    *,
    ts: np.ndarray,
    commission: float,
    point_value: float,
) -> Trades:
    """Trades of fills given in time order (zero-quantity rows are ignored); the fills must end
    flat. `kind` indexes `EXIT_REASONS`, `cost` is each fill's commission + slippage in money,
    `ts` the series' timestamps indexed by `bar`."""
    keep = np.asarray(qty) != 0
    bar, kind = np.asarray(bar)[keep].astype(np.int64), np.asarray(kind)[keep].astype(np.int64)
    qty, price, cost = (np.asarray(a, dtype=np.float64)[keep] for a in (qty, price, cost))
    after = np.cumsum(qty)
    if after.size and after[-1] != 0:
        raise ValueError(f"fills end with an open position of {after[-1]:g} contracts")
    before = after - qty
    flips = before * after < 0
    reps = np.where(flips, 2, 1)
    src = np.repeat(np.arange(qty.size), reps)
    part = qty[src].copy()
    first_copy = np.cumsum(reps) - reps
    part[first_copy[flips]] = -before[flips]
    part[first_copy[flips] + 1] = after[flips]
    part_cost = cost[src] * np.abs(part) / np.abs(qty[src])
    p_after = np.cumsum(part)
    p_before = p_after - part
    p_price = price[src]

    opens = np.flatnonzero(p_before == 0)
    n = opens.size
    trade = np.cumsum(p_before == 0) - 1
    closes = np.append(opens[1:], part.size)[:n] - 1
    adding = np.abs(p_after) > np.abs(p_before)
    size = np.abs(part)

    def total(weights: np.ndarray) -> np.ndarray:
        return np.bincount(trade, weights=weights, minlength=n)

    with np.errstate(invalid="ignore", divide="ignore"):
        entry = total(size * p_price * adding) / total(size * adding)
        exit_ = total(size * p_price * ~adding) / total(size * ~adding)
    costs = total(part_cost)
    gross = total(-part * p_price * point_value + part_cost - size * commission)
    contracts = np.maximum.reduceat(np.abs(p_after), opens) if n else np.zeros(0)
    entry_bar, exit_bar = bar[src][opens], bar[src][closes]
    ts = np.asarray(ts, dtype=np.int64)
    return Trades({
        "side": np.where(p_after[opens] > 0, "long", "short").astype(str),
        "contracts": contracts,
        "entry_bar": entry_bar,
        "exit_bar": exit_bar,
        "entry_ts": ts[entry_bar],
        "exit_ts": ts[exit_bar],
        "entry_price": entry,
        "exit_price": exit_,
        "gross_pnl": gross,
        "costs": costs,
        "pnl": gross - costs,
        "bars_held": exit_bar - entry_bar,
        "exit_reason": np.asarray(EXIT_REASONS, dtype=str)[kind[src][closes]],
    })
