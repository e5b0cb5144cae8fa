"""What one backtest (one policy over one window) produced, and how it is written out.

Bar layout: index 0 is the first decision bar, T-1 the window's last bar. `pnl[t]` is the money
(mark-to-market minus costs) earned during bar t, so `pnl[0] = 0`; `position[t]` is held at the
close of bar t, after any stop, session flatten or the final flatten (so `position[T-1] = 0`);
`actions[t]` is decided at the close of bar t and fills from bar t+1 (`actions[T-1]` is flat:
the final flatten). `equity = capital + cumsum(pnl)`.

Tables are written as CSV, Parquet or JSON (a list of row objects) by file suffix, to a
temporary file renamed into place, so a failed write leaves nothing behind.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from foxhunt import metrics as fm
from foxhunt.backtest.trades import EXIT_REASONS, TRADE_COLUMNS, Trades, extract_trades
from foxhunt.data.instruments import Instrument, Session
from foxhunt.data.series import Bars
from foxhunt.env import fills
from foxhunt.env.fills import Book, CostModel
from foxhunt.env.vector_env import REWARD_COMPONENTS
from foxhunt.errors import ConfigError, DataError

RECORD = (
    *REWARD_COMPONENTS,
    "order_qty", "order_price", "stop_qty", "stop_price", "flatten_qty", "flatten_price",
    "position", "direction", "size", "stop_choice",
)  # fmt: skip
"""Columns of the engine's per-step record (one row per decision)."""
Record = dict[str, np.ndarray]
TABLE_SUFFIXES = (".csv", ".parquet", ".json")
ACTION_BRANCHES = ("direction", "size", "stop")


@dataclass
class BacktestResult:
    """One policy over one window; arrays follow the bar layout in the module docstring."""

    name: str
    symbol: str
    window: tuple[int, int]  # (first decision bar, stop): bars [window[0], window[1])
    capital: float
    costs: bool
    ts: np.ndarray  # [T] int64 ns, bar close times
    close: np.ndarray  # [T]
    pnl: np.ndarray  # [T] money per bar after costs
    equity: np.ndarray  # [T]
    position: np.ndarray  # [T] signed contracts
    actions: np.ndarray  # [T, 3] int8
    components: dict[str, np.ndarray]  # REWARD_COMPONENTS -> [T] money, unscaled
    trades: Trades
    metrics: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)

    @property
    def total_pnl(self) -> float:
        return float(self.pnl.sum())

    def bar_table(self) -> dict[str, np.ndarray]:
        """Per-bar columns: bar, ts, close, position, pnl, equity, actions, components."""
        bars = np.arange(*self.window)
        cols = {"bar": bars, "ts": self.ts, "close": self.close, "position": self.position,
                "pnl": self.pnl, "equity": self.equity}
        cols.update({b: self.actions[:, i] for i, b in enumerate(ACTION_BRANCHES)})
        cols.update(self.components)
        return cols

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: lists of numbers (NaN/inf -> None), trades as row objects."""
        return {
            "name": self.name,
            "symbol": self.symbol,
            "window": [int(self.window[0]), int(self.window[1])],
            "capital": self.capital,
            "costs": self.costs,
            "ts": self.ts.tolist(),
            "close": _floats(self.close),
            "pnl": _floats(self.pnl),
            "equity": _floats(self.equity),
            "position": _floats(self.position),
            "direction": self.actions[:, 0].tolist(),
            "actions": self.actions.tolist(),
            "components": {k: _floats(v) for k, v in self.components.items()},
            "trades": [_json_row(r) for r in self.trades.records()],
            "metrics": {k: _json_value(v) for k, v in self.metrics.items()},
            "engine": self.engine,
        }


def assemble(
    name: str,
    bars: Bars,
    instrument: Instrument,
    first: int,
    stop: int,
    record: Record,
    end: dict[str, float],
    cost: CostModel,
    capital: float,
    costs: bool,
    engine: dict[str, Any],
    periods_per_year: float | None = None,
) -> BacktestResult:
    """A result from the engine's per-step record (T-1 decisions) and the final flatten fill."""
    T = stop - first
    fill_bar = np.arange(first + 1, stop)
    components = {}
    for c in REWARD_COMPONENTS:
        components[c] = np.zeros(T)
        components[c][1:] = record[c]
    components["cost"][-1] += end["cost"]
    pnl = components["pnl"] - components["cost"]
    position = np.zeros(T)
    position[1:] = record["position"]
    position[-1] += end["qty"]
    actions = np.zeros((T, 3), dtype=np.int8)
    actions[:-1] = np.stack([record["direction"], record["size"], record["stop_choice"]], 1)

    trades = _trades(bars, fill_bar, record, end, stop, cost)
    ts = bars.ts[first:stop]
    result = BacktestResult(
        name=name, symbol=instrument.symbol, window=(first, stop), capital=capital, costs=costs,
        ts=ts, close=bars.close[first:stop].copy(), pnl=pnl, equity=capital + np.cumsum(pnl),
        position=position, actions=actions, components=components, trades=trades,
        engine=engine,
    )  # fmt: skip
    result.metrics = compute_metrics(result, periods_per_year, instrument.session)
    return result


def _trades(bars: Bars, fill_bar: np.ndarray, record: Record, end: dict[str, float],
            stop: int, cost: CostModel) -> Trades:
    """Fills in time order (within a bar: market order, stop, session flatten), then the final
    flatten. Per-fill costs come from the fill model: market orders against the bar's open,
    session flattens against its close; a stop's cost is the step's cost minus those two."""
    kinds = ("order", "stop", "flatten")
    hits = [np.flatnonzero(record[f"{k}_qty"]) for k in kinds]
    step = np.concatenate(hits)
    kind = np.repeat(np.arange(len(kinds)), [h.size for h in hits])
    q = np.concatenate([record[f"{k}_qty"][h] for k, h in zip(kinds, hits, strict=True)])
    price = np.concatenate([record[f"{k}_price"][h] for k, h in zip(kinds, hits, strict=True)])
    if sum(h.size > 0 for h in hits) > 1:  # time order: by step, then kind within a step
        order = np.argsort(step * len(kinds) + kind, kind="stable")
        step, kind, q, price = step[order], kind[order], q[order], price[order]
    bar = fill_bar[step]
    ref = np.where(kind == 0, bars.open[bar], bars.close[bar])
    zero = torch.zeros(len(q), dtype=torch.float64)
    own = fills.execute(Book(zero, zero, zero), torch.as_tensor(q), torch.as_tensor(ref), cost)
    fee = own.cost.numpy()
    is_stop = kind == 1
    if is_stop.any():
        others = np.bincount(step[~is_stop], weights=fee[~is_stop], minlength=len(fill_bar))
        fee = np.where(is_stop, record["cost"][step] - others[step], fee)
    return extract_trades(
        np.append(bar, stop - 1), np.append(kind, EXIT_REASONS.index("end")),
        np.append(q, end["qty"]), np.append(price, end["price"]), np.append(fee, end["cost"]),
        ts=bars.ts, commission=cost.commission, point_value=cost.point_value,
    )


def compute_metrics(result: BacktestResult, periods_per_year: float | None = None,
                    session: Session | None = None) -> dict[str, Any]:
    """`foxhunt.metrics.summary` on the per-bar PnL; trade statistics on the trades' PnL after
    costs. `periods_per_year` (docs/metrics.md: from the bar spec and session) annualises the
    per-bar figures; None uses the rate observed in the window's timestamps. The headline
    Sharpe, Sortino and volatility are those of the daily returns in the instrument's `session`
    where the window spans enough sessions (`sharpe_basis` says which; `sharpe_per_bar` is
    always there).

    The return series is the T-1 bar-to-bar periods: `pnl[0]` (the first decision bar, before
    anything can fill) is not a period of the strategy, and counting it as a zero return would
    pull the Sharpe towards 0. The equity curve keeps its T points, starting at the capital."""
    ppy = periods_per_year or fm.periods_per_year_from_ts(result.ts)
    out = fm.summary(result.pnl[1:], result.capital, ppy, positions=result.position[1:],
                     trade_pnls=result.trades["pnl"], ts=result.ts[1:], session=session)
    out["costs_paid"] = float(result.components["cost"].sum())
    return out


# -- tables --------------------------------------------------------------------------------


def trades_table(results: BacktestResult | Sequence[BacktestResult]) -> dict[str, np.ndarray]:
    """All trades of `results`, each row tagged with its policy and window."""
    results = [results] if isinstance(results, BacktestResult) else list(results)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("policy", "window_start", "window_stop",
                                                          *TRADE_COLUMNS)}
    for r in results:
        n = len(r.trades)
        cols["policy"].append(np.full(n, r.name, dtype=object).astype(str))
        cols["window_start"].append(np.full(n, r.window[0], dtype=np.int64))
        cols["window_stop"].append(np.full(n, r.window[1], dtype=np.int64))
        for k in TRADE_COLUMNS:
            cols[k].append(r.trades[k])
    return {k: _concat(v, k) for k, v in cols.items()}


def bars_table(results: BacktestResult | Sequence[BacktestResult]) -> dict[str, np.ndarray]:
    """Equity curves, positions, actions and reward components of `results`, one row per bar."""
    results = [results] if isinstance(results, BacktestResult) else list(results)
    tables = [r.bar_table() for r in results]
    out: dict[str, list[np.ndarray]] = {"policy": [], "window_start": []}
    for r, t in zip(results, tables, strict=True):
        n = len(r.pnl)
        out["policy"].append(np.full(n, r.name, dtype=object).astype(str))
        out["window_start"].append(np.full(n, r.window[0], dtype=np.int64))
        for k, v in t.items():
            out.setdefault(k, []).append(v)
    return {k: _concat(v, k) for k, v in out.items()}


def write_trades(results: BacktestResult | Sequence[BacktestResult], path: Path | str) -> Path:
    return write_table(trades_table(results), path)


def write_bars(results: BacktestResult | Sequence[BacktestResult], path: Path | str) -> Path:
    return write_table(bars_table(results), path)


def _concat(parts: list[np.ndarray], name: str) -> np.ndarray:
    if parts:
        return np.concatenate(parts)
    return np.zeros(0, dtype=str if name in ("policy", "side", "exit_reason") else np.float64)


def _check_suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ConfigError(
            f"{path}: unknown file type {path.suffix or '(no suffix)'!r}; "
            f"use one of {', '.join(TABLE_SUFFIXES)}"
        )
    return suffix


def write_table(columns: dict[str, np.ndarray], path: Path | str) -> Path:
    """Write equal-length columns by suffix (.csv, .parquet, .json); atomic."""
    path = Path(path)
    suffix = _check_suffix(path)
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) > 1:
        raise DataError(f"{path}: columns differ in length {lengths}; nothing written")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({k: np.asarray(v) for k, v in columns.items()}), tmp)
        elif suffix == ".csv":
            with open(tmp, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(columns)
                w.writerows(zip(*(np.asarray(v).tolist() for v in columns.values())))
        else:
            rows = zip(*(np.asarray(v).tolist() for v in columns.values()))
            doc = [_json_row(dict(zip(columns, r, strict=True))) for r in rows]
            tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_table(path: Path | str) -> dict[str, np.ndarray]:
    """Read a table written by `write_table` back into columns (CSV values are parsed as
    integers, then floats, else kept as text)."""
    path = Path(path)
    suffix = _check_suffix(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}
    if suffix == ".csv":
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
        header, body = rows[0], rows[1:]
        return {k: _parse_column([r[i] for r in body]) for i, k in enumerate(header)}
    rows = json.loads(path.read_text())
    keys = list(rows[0]) if rows else []
    return {k: np.asarray([math.nan if r[k] is None else r[k] for r in rows]) for k in keys}


def _parse_column(values: list[str]) -> np.ndarray:
    for kind in (np.int64, np.float64):
        try:
            return np.asarray(values, dtype=kind) if values else np.zeros(0, kind)
        except ValueError:
            continue
    return np.asarray(values, dtype=str)


def _json_value(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_value(v) for k, v in row.items()}


def _floats(a: np.ndarray) -> list[float | None]:
    a = np.asarray(a, dtype=np.float64)
    if np.isfinite(a).all():
        return a.tolist()
    return [float(x) if math.isfinite(x) else None for x in a.tolist()]


def report_series(results: Sequence[BacktestResult], name: str,
                  primary: str | None = None) -> dict[str, Any]:
    """One `series` entry of the HTML report's input (docs/report.md) from results of the same
    window: every policy's equity; trades, actions and reward components of `primary` (default:
    the first result)."""
    if not results:
        raise ConfigError("report_series: no results")
    windows = {r.window for r in results}
    if len(windows) != 1:
        raise ConfigError(f"report_series: results cover different windows {sorted(windows)}")
    main = next((r for r in results if r.name == primary), None) if primary else results[0]
    if main is None:
        raise ConfigError(f"report_series: no result named {primary!r}")
    d = main.to_dict()
    return {
        "name": name,
        "ts": d["ts"],
        "close": d["close"],
        "equity": {r.name: _floats(r.equity) for r in results},
        "trades": d["trades"],
        "direction": d["direction"],
        "components": d["components"],
    }
