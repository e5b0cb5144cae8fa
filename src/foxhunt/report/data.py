"""The report's input contract (docs/report.md): validation and normalisation.

`normalise(data)` checks a report data dict and returns a `ReportData` whose arrays are NumPy
(`None` and NaN become NaN) and whose optional fields are filled in. Every problem raises
`ReportDataError` with a message naming the offending key, e.g. `series[1].close`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from foxhunt.errors import FoxhuntError

SIDES = {"long": 1, "short": 2}
"""Trade side -> direction code (0 flat, 1 long, 2 short), as in `series[].direction`."""


class ReportDataError(FoxhuntError):
    """The data handed to the report writer breaks the contract in docs/report.md."""


@dataclass(frozen=True)
class Fold:
    fold: int
    windows: dict[str, list[Any]]
    best_epoch: int | None
    val: dict[str, Any]
    test: dict[str, Any]
    baselines: dict[str, dict[str, Any]]
    deployed: str | None = None
    """"agent" or "flat" (the deploy rule); None for runs from before the rule."""
    verdict: str | None = None
    deploy: dict[str, Any] = field(default_factory=dict)
    """The deploy rule's figures: rule, candidates, sharpe, sr0 (annualised), p."""
    window_times: dict[str, list[int]] = field(default_factory=dict)
    """Window name -> [first bar's ts, last bar's ts] (ns, inclusive): the tables show these."""


@dataclass(frozen=True)
class Trade:
    entry_ts: int
    exit_ts: int | None
    entry_price: float
    exit_price: float
    side: str
    contracts: float
    pnl: float
    exit_reason: str


@dataclass(frozen=True)
class Series:
    name: str
    ts: np.ndarray  # int64 ns
    close: np.ndarray
    equity: dict[str, np.ndarray]
    trades: list[Trade]
    direction: np.ndarray | None  # int8 0/1/2, -1 unknown
    components: dict[str, np.ndarray]
    fold: int | None = None
    """The fold whose test window this series is (the chained out-of-sample curve joins them)."""


KINDS = ("run", "backtest")
"""Report kinds: a walk-forward run's test windows, or a backtest of policies over a window."""


@dataclass(frozen=True)
class ReportData:
    title: str
    generated: str
    symbol: str
    bars: str
    kind: str = "backtest"
    tick_size: float | None = None
    periods_per_year: float | None = None
    folds: list[Fold] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)


def fail(message: str) -> None:
    raise ReportDataError(f"report data: {message}")


def _require(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        fail(f"{where} is missing key {key!r}")
    return d[key]


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        fail(f"{where} must be an object (dict), got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        fail(f"{where} must be a list, got {type(value).__name__}")
    return list(value)


def _text(value: Any, where: str) -> str:
    if isinstance(value, (Mapping, list, tuple)) or value is None:
        fail(f"{where} must be a string, got {type(value).__name__}")
    return str(value)


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        fail(f"{where} must be an integer, got {value!r}")
    return int(value)


def number(value: Any, where: str) -> float:
    """A float; None and NaN give NaN; anything that is not a number raises."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        fail(f"{where} must be a number or null, got {value!r}")
    return float(value)


def _floats(value: Any, where: str, n: int | None = None) -> np.ndarray:
    seq = _list(value, where) if not isinstance(value, np.ndarray) else value
    try:
        raw = np.asarray(seq) if len(seq) else np.zeros(0)
    except (TypeError, ValueError):
        fail(f"{where} must be a flat list of numbers")
    if raw.dtype.kind not in "iuf" or raw.ndim != 1:
        bad = next((i for i, v in enumerate(seq) if not _is_num(v)), None)
        if bad is not None:
            fail(f"{where}[{bad}] must be a number or null, got {seq[bad]!r}")
    arr = raw.astype(np.float64) if raw.dtype.kind in "iuf" else np.asarray(seq, dtype=np.float64)
    if arr.ndim != 1:
        fail(f"{where} must be a flat list of numbers")
    if n is not None and arr.size != n:
        fail(f"{where} has {arr.size} values, expected {n} (one per ts)")
    return arr


def _is_num(v: Any) -> bool:
    return v is None or (
        not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))
    )


def _metric_dict(value: Any, where: str) -> dict[str, Any]:
    """Metric name -> float (None/NaN -> NaN) or text; lists and objects are left out."""
    out: dict[str, Any] = {}
    for k, v in _mapping(value, where).items():
        if isinstance(v, (Mapping, list, tuple)):
            continue
        out[str(k)] = _scalar(v, f"{where}.{k}")
    return out


def _scalar(v: Any, where: str) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    return number(v, where)


def _fold(raw: Any, where: str) -> Fold:
    d = _mapping(raw, where)
    windows: dict[str, list[Any]] = {}
    for name, w in _mapping(d.get("windows") or {}, f"{where}.windows").items():
        pair = _list(w, f"{where}.windows.{name}")
        if len(pair) != 2:
            fail(f"{where}.windows.{name} must be [start, stop], got {pair!r}")
        windows[str(name)] = pair
    best = d.get("best_epoch")
    baselines = {
        str(k): _metric_dict(v, f"{where}.baselines.{k}")
        for k, v in _mapping(d.get("baselines") or {}, f"{where}.baselines").items()
    }
    times: dict[str, list[int]] = {}
    for name, w in _mapping(d.get("window_times") or {}, f"{where}.window_times").items():
        pair = _list(w, f"{where}.window_times.{name}")
        if len(pair) != 2:
            fail(f"{where}.window_times.{name} must be [first ts, last ts], got {pair!r}")
        times[str(name)] = [_int(v, f"{where}.window_times.{name}") for v in pair]
    return Fold(
        fold=_int(_require(d, "fold", where), f"{where}.fold"),
        windows=windows,
        best_epoch=None if best is None else _int(best, f"{where}.best_epoch"),
        val=_metric_dict(d.get("val") or {}, f"{where}.val"),
        test=_metric_dict(_require(d, "test", where), f"{where}.test"),
        baselines=baselines,
        deployed=_optional_text(d, "deployed", where),
        verdict=_optional_text(d, "verdict", where),
        deploy=_metric_dict(d.get("deploy") or {}, f"{where}.deploy"),
        window_times=times,
    )


def _optional_text(d: dict[str, Any], key: str, where: str) -> str | None:
    value = d.get(key)
    return None if value is None else _text(value, f"{where}.{key}")


def _trade(raw: Any, where: str) -> Trade:
    d = _mapping(raw, where)
    side = _text(_require(d, "side", where), f"{where}.side").lower()
    if side not in SIDES:
        fail(f"{where}.side must be 'long' or 'short', got {side!r}")
    exit_ts = d.get("exit_ts")
    return Trade(
        entry_ts=_int(_require(d, "entry_ts", where), f"{where}.entry_ts"),
        exit_ts=None if exit_ts is None else _int(exit_ts, f"{where}.exit_ts"),
        entry_price=number(_require(d, "entry_price", where), f"{where}.entry_price"),
        exit_price=number(d.get("exit_price"), f"{where}.exit_price"),
        side=side,
        contracts=number(d.get("contracts"), f"{where}.contracts"),
        pnl=number(d.get("pnl"), f"{where}.pnl"),
        exit_reason="" if d.get("exit_reason") is None else str(d["exit_reason"]),
    )


def _series(raw: Any, where: str) -> Series:
    d = _mapping(raw, where)
    name = _text(_require(d, "name", where), f"{where}.name")
    ts_list = _require(d, "ts", where)
    try:
        ts = np.asarray(
            _list(ts_list, f"{where}.ts") if not isinstance(ts_list, np.ndarray) else ts_list
        )
        if ts.size and not (
            np.issubdtype(ts.dtype, np.integer) or np.issubdtype(ts.dtype, np.floating)
        ):
            raise TypeError
        ts = ts.astype(np.int64)
    except (TypeError, ValueError):
        fail(f"{where}.ts must be a list of integer ns timestamps")
    if ts.ndim != 1 or ts.size == 0:
        fail(f"{where}.ts must be a non-empty flat list of integer ns timestamps")
    if ts.size > 1 and np.any(np.diff(ts) < 0):
        fail(f"{where}.ts must be in time order (non-decreasing)")
    n = int(ts.size)
    close = _floats(_require(d, "close", where), f"{where}.close", n)
    equity_raw = _mapping(_require(d, "equity", where), f"{where}.equity")
    if not equity_raw:
        fail(f"{where}.equity needs at least one policy")
    equity = {str(k): _floats(v, f"{where}.equity[{k!r}]", n) for k, v in equity_raw.items()}
    trades = [
        _trade(t, f"{where}.trades[{i}]")
        for i, t in enumerate(_list(d.get("trades") or [], f"{where}.trades"))
    ]
    direction = None
    if d.get("direction") is not None:
        dirs = _floats(d["direction"], f"{where}.direction", n)
        ok = np.isnan(dirs) | np.isin(dirs, (0.0, 1.0, 2.0))
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            fail(f"{where}.direction[{i}] must be 0 (flat), 1 (long) or 2 (short), got {dirs[i]!r}")
        direction = np.where(np.isnan(dirs), -1, dirs).astype(np.int8)
    components = {
        str(k): _floats(v, f"{where}.components[{k!r}]", n)
        for k, v in _mapping(d.get("components") or {}, f"{where}.components").items()
    }
    fold = d.get("fold")
    fold = None if fold is None else _int(fold, f"{where}.fold")
    return Series(name, ts, close, equity, trades, direction, components, fold)


def _training_line(raw: Any, where: str) -> dict[str, Any]:
    d = dict(_mapping(raw, where))
    d["fold"] = _int(_require(d, "fold", where), f"{where}.fold")
    d["epoch"] = _int(_require(d, "epoch", where), f"{where}.epoch")
    for key in ("loss", "mean_q", "td_p99", "grad_norm", "flat"):
        if key in d:
            d[key] = number(d[key], f"{where}.{key}")
    if d.get("val") is not None:
        d["val"] = _metric_dict(d["val"], f"{where}.val")
    return d


def _metrics_row(raw: Any, where: str) -> dict[str, Any]:
    d = _mapping(raw, where)
    out = {
        "policy": _text(_require(d, "policy", where), f"{where}.policy"),
        "window": _text(_require(d, "window", where), f"{where}.window"),
    }
    for k, v in d.items():
        if k not in out and not isinstance(v, (Mapping, list, tuple)):
            out[str(k)] = _scalar(v, f"{where}.{k}")
    return out


def _positive(value: Any, where: str) -> float | None:
    """An optional positive number (None where absent)."""
    if value is None:
        return None
    v = number(value, where)
    if not (math.isfinite(v) and v > 0):
        fail(f"{where} must be a positive number, got {value!r}")
    return v


def normalise(data: Any) -> ReportData:
    """Validate `data` against the contract and return it normalised; raises ReportDataError."""
    d = _mapping(data, "the top level")
    for key in ("title", "symbol", "bars"):
        _require(d, key, "the top level")
    generated = d.get("generated")
    if generated is None:
        generated = datetime.now(UTC).replace(microsecond=0).isoformat()
    folds = [_fold(f, f"folds[{i}]") for i, f in enumerate(_list(d.get("folds") or [], "folds"))]
    kind = d.get("kind") or ("run" if folds else "backtest")
    if kind not in KINDS:
        fail(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return ReportData(
        title=_text(d["title"], "title"),
        generated=_text(generated, "generated"),
        symbol=_text(d["symbol"], "symbol"),
        bars=_text(d["bars"], "bars"),
        kind=kind,
        tick_size=_positive(d.get("tick_size"), "tick_size"),
        periods_per_year=_positive(d.get("periods_per_year"), "periods_per_year"),
        folds=folds,
        training=[
            _training_line(t, f"training[{i}]")
            for i, t in enumerate(_list(d.get("training") or [], "training"))
        ],
        series=[
            _series(s, f"series[{i}]") for i, s in enumerate(_list(d.get("series") or [], "series"))
        ],
        metrics=[
            _metrics_row(m, f"metrics[{i}]")
            for i, m in enumerate(_list(d.get("metrics") or [], "metrics"))
        ],
    )
