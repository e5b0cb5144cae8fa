"""A synthetic market on the ES tick grid, risk limits that never bind, and a paper run over an
in-memory or file log."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from foxhunt.env import EnvConfig
from foxhunt.execution import SqlEventStore
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.orders import Contract
from foxhunt.paper import PaperTrader
from foxhunt.risk import RiskConfig

OPEN_LIMITS = RiskConfig(
    max_order_qty=1000, max_position=1000, max_gross_notional=0, max_order_rate=1000,
    max_orders_per_day=1_000_000, price_collar_pct=1000, daily_loss_limit=0, max_drawdown=0,
)  # fmt: skip
"""Limits that never bind: paper trading must then equal the backtest."""


def paper_trader(bars, inst, decider, window, env: EnvConfig, *, url: str = "sqlite://",
                 journal: Path | None = None, risk: RiskConfig = OPEN_LIMITS) -> PaperTrader:
    venue = SimulatedVenue({inst.symbol: Contract.from_instrument(inst)}, env.slippage_ticks,
                           journal=journal)
    return PaperTrader(bars, inst, decider, window, store=SqlEventStore(url), venue=venue,
                       env=env, risk=risk, starting_cash=Decimal(100_000))
