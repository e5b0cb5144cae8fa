"""Column containers for bars and ticks, and the bar-series spec (`1min`, `ticks:500`, ...).

Timestamps are int64 nanoseconds UTC; a bar's `ts` is its close time (docs/domain.md#time).
Columns are numpy arrays so the hot path never goes through pandas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

import numpy as np

from foxhunt.errors import DataError

if TYPE_CHECKING:  # pyarrow is only needed to convert; the GPU machine's env code runs without it
    import pyarrow as pa

NS = {"s": 1_000_000_000, "min": 60_000_000_000, "h": 3_600_000_000_000, "d": 86_400_000_000_000}
_TIME_SPEC = re.compile(r"^(\d+)(s|min|h|d)$")

BarKind = Literal["time", "ticks", "volume", "dollar"]


@dataclass(frozen=True)
class BarSpec:
    """How a bar series was sampled. `size` is ns for time bars, else a tick/volume/dollar count."""

    kind: BarKind
    size: float

    @classmethod
    def parse(cls, text: str) -> BarSpec:
        t = text.strip()
        m = _TIME_SPEC.match(t)
        if m:
            ns = int(m.group(1)) * NS[m.group(2)]
            if not NS["s"] <= ns <= NS["d"]:
                raise DataError(f"bar spec {text!r}: time bars must be between 1s and 1d")
            return cls("time", float(ns))
        kind, _, value = t.partition(":")
        if kind in ("ticks", "volume", "dollar") and value:
            try:
                size = float(value)
            except ValueError:
                size = float("nan")
            if not size > 0 or (kind == "ticks" and size != int(size)):
                raise DataError(f"bar spec {text!r}: {kind} size must be a positive number")
            return cls(kind, size)  # type: ignore[arg-type]
        raise DataError(
            f"bar spec {text!r} not understood; use e.g. 1s, 5min, 1h, 1d, ticks:500, "
            "volume:10000, dollar:5e7"
        )

    @property
    def ns(self) -> int:
        if self.kind != "time":
            raise DataError(f"bar spec {self} has no fixed duration")
        return int(self.size)

    def __str__(self) -> str:
        if self.kind == "time":
            ns = int(self.size)
            for unit in ("d", "h", "min", "s"):
                if ns % NS[unit] == 0:
                    return f"{ns // NS[unit]}{unit}"
        size = int(self.size) if self.size == int(self.size) else self.size
        if size >= 1_000_000:
            return f"{self.kind}:{self.size:g}".replace("e+0", "e").replace("e+", "e")
        return f"{self.kind}:{size}"


def _col(a, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=dtype))


@dataclass(frozen=True)
class Bars:
    """OHLCV bars. `buy_volume`/`sell_volume` are aggressor volumes (or tick-rule signed)."""

    ts: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    buy_volume: np.ndarray | None = None
    sell_volume: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ts", _col(self.ts, np.int64))
        n = len(self.ts)
        for f in fields(self)[1:]:
            v = getattr(self, f.name)
            if v is None:
                continue
            v = _col(v, np.float64)
            if len(v) != n:
                raise DataError(f"bars: column {f.name} has {len(v)} rows, ts has {n}")
            object.__setattr__(self, f.name, v)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def has_flow(self) -> bool:
        return self.buy_volume is not None and self.sell_volume is not None

    @property
    def has_volume(self) -> bool:
        """False when the bars carry no volume: 0 on every bar, as a bar file without a volume
        column imports (`data.readers`); features then leave out the volume group."""
        return self.has_flow or bool(np.any(self.volume))

    def slice(self, start: int, stop: int) -> Bars:
        return Bars(**{k: (None if v is None else v[start:stop]) for k, v in self.columns().items()})

    def columns(self) -> dict[str, np.ndarray | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_arrow(self) -> pa.Table:
        import pyarrow as pa

        return pa.table({k: v for k, v in self.columns().items() if v is not None})

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Bars:
        cols = {name: table.column(name).to_numpy() for name in table.column_names}
        return cls(**{f.name: cols.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Ticks:
    """Trades. `side` is +1 buyer-initiated, -1 seller-initiated, 0 unknown (tick rule fills in)."""

    ts: np.ndarray
    price: np.ndarray
    size: np.ndarray
    side: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ts", _col(self.ts, np.int64))
        object.__setattr__(self, "price", _col(self.price, np.float64))
        object.__setattr__(self, "size", _col(self.size, np.float64))
        if self.side is not None:
            object.__setattr__(self, "side", _col(self.side, np.int8))
        n = len(self.ts)
        for name in ("price", "size", "side"):
            v = getattr(self, name)
            if v is not None and len(v) != n:
                raise DataError(f"ticks: column {name} has {len(v)} rows, ts has {n}")

    def __len__(self) -> int:
        return len(self.ts)

    def to_arrow(self) -> pa.Table:
        import pyarrow as pa

        cols = {"ts": self.ts, "price": self.price, "size": self.size}
        if self.side is not None:
            cols["side"] = self.side
        return pa.table(cols)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Ticks:
        side = table.column("side").to_numpy() if "side" in table.column_names else None
        return cls(
            table.column("ts").to_numpy(),
            table.column("price").to_numpy(),
            table.column("size").to_numpy(),
            side,
        )
