"""Where each of our symbols is found at Interactive Brokers, and where TWS listens.

IB names a futures contract by its root symbol, exchange, currency and expiry (or by its
contract id, `conId`, which is unambiguous); our symbols ("ES", "CL") name a continuous market.
`IbFuture` is the one contract month a symbol trades now: rolling is a config change.

As TOML (one table per symbol):

    [ib.contracts.ES]
    exchange = "CME"
    expiry = "202406"        # lastTradeDateOrContractMonth: YYYYMM or YYYYMMDD
    [ib.contracts.CL]
    con_id = 212921504       # or the conId alone (IB's contract details show it)
    exchange = "NYMEX"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from foxhunt.configbase import StrictConfig, validate_config
from foxhunt.errors import ConfigError

PAPER_PORTS = {7497: "TWS paper", 4002: "IB Gateway paper"}
LIVE_PORTS = {7496: "TWS live", 4001: "IB Gateway live"}


class IbFuture(StrictConfig):
    """One futures contract at IB: `con_id`, or `exchange` with `expiry` or `local_symbol`."""

    root: str = ""  # IB's symbol when it differs from ours ("MES" for our "MES": leave empty)
    exchange: str = ""  # CME, CBOT, NYMEX, COMEX, EUREX, ...
    currency: str = "USD"
    expiry: str = ""  # YYYYMM (contract month) or YYYYMMDD (last trading day)
    local_symbol: str = ""  # the exchange's code ("ESM4"), an alternative to expiry
    con_id: int = Field(default=0, ge=0)
    multiplier: str = ""  # only to tell apart two contracts that differ by it alone
    trading_class: str = ""

    @field_validator("expiry")
    @classmethod
    def _expiry(cls, v: str) -> str:
        if v and not re.fullmatch(r"\d{6}|\d{8}", v):
            raise ValueError("expected YYYYMM or YYYYMMDD")
        return v

    @model_validator(mode="after")
    def _unambiguous(self) -> IbFuture:
        if not self.con_id and not (self.exchange and (self.expiry or self.local_symbol)):
            raise ValueError("give con_id, or exchange with expiry or local_symbol")
        return self


def parse_futures(
    data: Mapping[str, Any], symbols: Any, source: str = "ib contracts"
) -> dict[str, IbFuture]:
    """The IB contract of every symbol in `symbols`, from `{symbol: IbFuture or its table}`;
    ConfigError (one line) for a symbol without one, a mapping for a symbol we do not trade,
    or a bad entry."""
    wanted = sorted(symbols)
    missing = [s for s in wanted if s not in data]
    if missing:
        raise ConfigError(
            f"{source}: no IB contract for {', '.join(missing)}; add [ib.contracts.{missing[0]}] "
            "with exchange and expiry (or con_id)"
        )
    extra = sorted(set(data) - set(wanted))
    if extra:
        raise ConfigError(f"{source}: {', '.join(extra)} is not a symbol this account trades "
                          f"({', '.join(wanted)})")  # fmt: skip
    out = {}
    for symbol in wanted:
        spec = data[symbol]
        if isinstance(spec, IbFuture):
            out[symbol] = spec
        elif isinstance(spec, Mapping):
            out[symbol] = validate_config(IbFuture, dict(spec), f"{source} [{symbol}]")
        else:
            raise ConfigError(f"{source} [{symbol}]: expected a table of IB contract fields, "
                              f"got {spec!r}")  # fmt: skip
    return out


def check_endpoint(host: str, port: int, client_id: int) -> None:
    """ConfigError (one line) for an address or client id that cannot be TWS's."""
    if not host or not isinstance(host, str):
        raise ConfigError(f"IB host {host!r} is not a host name or address")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"IB port {port!r} is not a TCP port (TWS paper 7497, live 7496; "
                          "IB Gateway paper 4002, live 4001)")  # fmt: skip
    if isinstance(client_id, bool) or not isinstance(client_id, int) or client_id < 0:
        raise ConfigError(f"IB client id {client_id!r} must be a whole number >= 0 "
                          "(unique per connection to one TWS)")  # fmt: skip
