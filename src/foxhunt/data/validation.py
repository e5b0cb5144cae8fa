"""Import checks for bars and ticks (docs/domain.md#bars-and-import-checks): a bad file is
refused before anything is written.

Each rule is one vectorised mask; the error names the first offending row (1-based data row,
header excluded, as in the file) and, when several rules break on that row, the first rule in
the order listed below. Row numbers refer to the data as read, so readers never reorder rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from foxhunt.data.series import Bars, Ticks
from foxhunt.data.timestamps import format_ns
from foxhunt.errors import ValidationError

NO_ROWS = "no rows"
NOT_SORTED = "timestamps not sorted"
DUPLICATE_TS = "duplicate timestamp"
PRICE_NOT_FINITE = "NaN or infinite price"
PRICE_NOT_POSITIVE = "price not positive"
VOLUME_NAN = "volume is NaN or infinite"
VOLUME_NEGATIVE = "negative volume"
HIGH_BELOW = "high below open or close"
LOW_ABOVE = "low above open or close"
SIZE_NOT_FINITE = "NaN or infinite size"
SIZE_NOT_POSITIVE = "size not positive"
BAD_SIDE = "side not -1, 0 or +1"

Check = tuple[str, np.ndarray, int, Callable[[int], str]]


def validate_bars(bars: Bars, source: str) -> None:
    """Raise ValidationError for the first row that breaks a bar rule; return None if all hold."""
    if len(bars) == 0:
        raise ValidationError(NO_ROWS, None, source)
    o, h, lo, c = bars.open, bars.high, bars.low, bars.close
    prices = {"open": o, "high": h, "low": lo, "close": c}
    checks: list[Check] = []
    for name, p in prices.items():
        checks.append((PRICE_NOT_FINITE, ~np.isfinite(p), 0, _value(name, p)))
    for name, p in prices.items():
        checks.append((PRICE_NOT_POSITIVE, p <= 0, 0, _value(name, p)))
    for name in ("volume", "buy_volume", "sell_volume"):
        v = getattr(bars, name)
        if v is None:
            continue
        rule_nan = VOLUME_NAN if name == "volume" else f"{name} is NaN or infinite"
        rule_neg = VOLUME_NEGATIVE if name == "volume" else f"negative {name}"
        checks.append((rule_nan, ~np.isfinite(v), 0, _value(name, v)))
        checks.append((rule_neg, v < 0, 0, _value(name, v)))
    checks.append((HIGH_BELOW, h < np.maximum(o, c), 0, _ohlc(o, h, lo, c)))
    checks.append((LOW_ABOVE, lo > np.minimum(o, c), 0, _ohlc(o, h, lo, c)))
    d = np.diff(bars.ts)
    checks.append((NOT_SORTED, d < 0, 1, _ts_pair(bars.ts)))
    checks.append((DUPLICATE_TS, d == 0, 1, _ts_pair(bars.ts)))
    _raise_first(checks, source)


def validate_ticks(ticks: Ticks, source: str) -> None:
    """Like validate_bars for trades; equal timestamps are fine (trades share milliseconds)."""
    if len(ticks) == 0:
        raise ValidationError(NO_ROWS, None, source)
    p, s = ticks.price, ticks.size
    checks: list[Check] = [
        (PRICE_NOT_FINITE, ~np.isfinite(p), 0, _value("price", p)),
        (PRICE_NOT_POSITIVE, p <= 0, 0, _value("price", p)),
        (SIZE_NOT_FINITE, ~np.isfinite(s), 0, _value("size", s)),
        (SIZE_NOT_POSITIVE, s <= 0, 0, _value("size", s)),
    ]
    if ticks.side is not None:
        checks.append(
            (BAD_SIDE, np.abs(ticks.side.astype(np.int16)) > 1, 0, _value("side", ticks.side))
        )
    checks.append((NOT_SORTED, np.diff(ticks.ts) < 0, 1, _ts_pair(ticks.ts)))
    _raise_first(checks, source)


def _raise_first(checks: list[Check], source: str) -> None:
    best: tuple[int, int] | None = None
    for k, (_, mask, shift, _) in enumerate(checks):
        if mask.size == 0:
            continue
        i = int(np.argmax(mask))
        if mask[i] and (best is None or i + shift < best[0]):
            best = (i + shift, k)
    if best is not None:
        i, k = best
        rule, _, _, detail = checks[k]
        raise ValidationError(rule, i + 1, source, detail(i))


def _value(name: str, col: np.ndarray) -> Callable[[int], str]:
    return lambda i: f"{name}={col[i]}"


def _ohlc(o, h, lo, c) -> Callable[[int], str]:
    return lambda i: f"open={o[i]} high={h[i]} low={lo[i]} close={c[i]}"


def _ts_pair(ts: np.ndarray) -> Callable[[int], str]:
    return lambda i: f"ts {format_ns(ts[i])}, previous row {format_ns(ts[i - 1])}"
