"""The trades CSV the report writes: ISO-8601 UTC times and prices on the instrument's tick grid.

Times are `2013-09-03T14:31:00Z`; prices are rounded to the nearest tick (`tick_size`, e.g.
0.25 for ES, 0.00005 for 6E) and written with the tick's decimals, so no float noise such as
`1.0523000000000002` reaches the file. Without a tick size the decimals are those the series'
closes need (at most 8). Money (PnL, costs) is written to the cent, contracts as numbers.
The page offers the same CSV as a download under each trade list; `write_trades_csv` writes
it to a file (atomically) from report data or from backtest results.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt.fileio import write_text_atomic
from foxhunt.report.data import Series, normalise

COLUMNS = ("series", "trade", "side", "contracts", "entry_time", "entry_price", "exit_time",
           "exit_price", "pnl", "exit_reason")
MAX_DECIMALS = 8


def iso_utc(ns: int | None) -> str:
    """ns since the epoch as ISO 8601 UTC (`2013-09-03T14:31:00Z`; sub-second digits only
    where there are any); "" for None."""
    if ns is None:
        return ""
    seconds, rest = divmod(int(ns), 1_000_000_000)
    text = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if rest:
        text += f".{rest:09d}".rstrip("0")
    return text + "Z"


def decimals_of(step: float) -> int:
    """Fewest decimals that write `step` exactly (0.25 -> 2, 0.00005 -> 5, 1 -> 0)."""
    for d in range(MAX_DECIMALS + 1):
        if abs(step * 10**d - round(step * 10**d)) < 1e-6:
            return d
    return MAX_DECIMALS


def price_decimals(prices: Iterable[float]) -> int:
    """Fewest decimals (at most 8) that write every finite price to within 1e-9 of itself."""
    xs = np.asarray([p for p in prices if math.isfinite(p)], dtype=np.float64)
    for d in range(MAX_DECIMALS + 1):
        if xs.size == 0 or np.all(np.abs(xs - np.round(xs, d)) <= 1e-9 * np.maximum(1, np.abs(xs))):
            return d
    return MAX_DECIMALS


class PriceFormat:
    """Prices on the tick grid (`tick_size`), else to the decimals `fallback_prices` need."""

    def __init__(self, tick_size: float | None, fallback_prices: Iterable[float] = ()):
        self.tick = tick_size
        self.decimals = decimals_of(tick_size) if tick_size else price_decimals(fallback_prices)

    def __call__(self, price: float | None) -> str:
        if price is None or not math.isfinite(price):
            return ""
        p = round(price / self.tick) * self.tick if self.tick else price
        text = f"{p:.{self.decimals}f}"
        return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def money(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.2f}"


def count(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def csv_text(rows: Iterable[Sequence[Any]], columns: Sequence[str] = COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    return buf.getvalue()


def series_rows(s: Series, fmt: PriceFormat) -> list[list[str]]:
    return [
        [s.name, str(k + 1), t.side, count(t.contracts), iso_utc(t.entry_ts), fmt(t.entry_price),
         iso_utc(t.exit_ts), fmt(t.exit_price), money(t.pnl), t.exit_reason]
        for k, t in enumerate(s.trades)
    ]


def series_csv(s: Series, tick_size: float | None) -> str:
    """One series' trades as CSV text (`COLUMNS`)."""
    return csv_text(series_rows(s, PriceFormat(tick_size, s.close)))


def write_trades_csv(data: dict[str, Any], path: Path | str) -> Path:
    """Every series' trades of report `data` (docs/report.md) as one CSV, written atomically."""
    d = normalise(data)
    rows = [row for s in d.series for row in series_rows(s, PriceFormat(d.tick_size, s.close))]
    return write_text_atomic(csv_text(rows), path)


RESULT_COLUMNS = ("policy", "window_start", "window_stop", "side", "contracts", "entry_bar",
                  "exit_bar", "entry_time", "exit_time", "entry_price", "exit_price", "gross_pnl",
                  "costs", "pnl", "bars_held", "exit_reason")


def write_results_trades_csv(results: Sequence[Any], path: Path | str,
                             tick_size: float | None = None) -> Path:
    """The trades of backtest results (`foxhunt.backtest.BacktestResult`) as CSV: the columns of
    `foxhunt.backtest.trades_table` with ISO-8601 UTC times for the ns timestamps and prices on
    the tick grid (`tick_size`, e.g. the instrument's; else the closes' decimals)."""
    rows = []
    for r in results:
        fmt = PriceFormat(tick_size, r.close.tolist())
        for t in r.trades.records():
            rows.append([
                r.name, str(r.window[0]), str(r.window[1]), t["side"], count(t["contracts"]),
                str(t["entry_bar"]), str(t["exit_bar"]), iso_utc(t["entry_ts"]),
                iso_utc(t["exit_ts"]), fmt(t["entry_price"]), fmt(t["exit_price"]),
                money(t["gross_pnl"]), money(t["costs"]), money(t["pnl"]), str(t["bars_held"]),
                t["exit_reason"],
            ])
    return write_text_atomic(csv_text(rows, RESULT_COLUMNS), path)
