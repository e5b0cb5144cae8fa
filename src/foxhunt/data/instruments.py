"""Contract specifications: shipped in `resources/instruments.toml`, extended by the user's file."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

from pydantic import field_validator

from foxhunt.configbase import ClockTime, StrictConfig, TimeZoneName, read_toml, validate_config
from foxhunt.data.expiry import ExpiryRule
from foxhunt.errors import ConfigError, UnknownSymbolError


class Session(StrictConfig):
    """Daily trading session in `tz`; `open > close` means it runs overnight."""

    tz: TimeZoneName = "UTC"
    open: ClockTime = "00:00"
    close: ClockTime = "00:00"

    def minutes(self, which: str) -> int:
        h, m = getattr(self, which).split(":")
        return int(h) * 60 + int(m)


class Instrument(StrictConfig):
    symbol: str
    description: str = ""
    exchange: str = ""
    tick_size: float
    point_value: float
    commission: float
    currency: str = "USD"
    session: Session = Session()
    expiry: ExpiryRule | None = None
    months: str | None = None
    """The month codes the exchange lists (ES: "HMUZ"); None: any month. An import of a
    contract month outside them is refused: ESX4 is a typo, not a contract."""
    """The root's last-trading-day rule, for contract months imported without the exchange's
    definitions (`data.expiry`); None: such imports must carry an expiration column."""

    @field_validator("tick_size", "point_value")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not (v > 0 and math.isfinite(v)):
            raise ValueError("must be a positive number")
        return v

    @field_validator("months")
    @classmethod
    def _month_codes(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c not in "FGHJKMNQUVXZ" for c in v)):
            raise ValueError("must be month codes from F G H J K M N Q U V X Z, e.g. \"HMUZ\"")
        return v

    @field_validator("commission")
    @classmethod
    def _non_negative(cls, v: float) -> float:
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError("must be >= 0")
        return v

    def round_price(self, price: float) -> float:
        """Round to the nearest tick; what any price that reaches an order goes through."""
        return round(price / self.tick_size) * self.tick_size

    @property
    def tick_value(self) -> float:
        return self.tick_size * self.point_value


class InstrumentRegistry:
    """Known instruments by symbol. Immutable once built; build a new one to add files."""

    def __init__(self, instruments: dict[str, Instrument]):
        self._by_symbol = dict(instruments)

    @classmethod
    def load(cls, *extra_files: Path) -> InstrumentRegistry:
        shipped = resources.files("foxhunt.resources").joinpath("instruments.toml")
        with resources.as_file(shipped) as path:
            items = cls._parse(path)
        for file in extra_files:
            if file.exists():
                items.update(cls._parse(file))
        return cls(items)

    @staticmethod
    def _parse(path: Path) -> dict[str, Instrument]:
        out = {}
        for symbol, spec in read_toml(path).items():
            if not isinstance(spec, dict):
                raise ConfigError(f"{path}: [{symbol}] must be a table of instrument fields")
            out[symbol] = validate_config(Instrument, {"symbol": symbol, **spec}, f"{path} [{symbol}]")
        return out

    def get(self, symbol: str) -> Instrument:
        try:
            return self._by_symbol[symbol]
        except KeyError:
            raise UnknownSymbolError(
                f"unknown symbol {symbol!r}; known: {', '.join(self.symbols)} "
                "(add it to instruments.toml in FOXHUNT_HOME)"
            ) from None

    @property
    def symbols(self) -> list[str]:
        return sorted(self._by_symbol)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._by_symbol

    def __iter__(self):
        return iter(self._by_symbol[s] for s in self.symbols)
