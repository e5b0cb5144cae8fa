"""Paper runs across rolls: the synthetic ES contract set (tests/data/contract_set.py) stitched
by the volume rule, and a rolling paper trader over it with limits that never bind."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from foxhunt.backtest import BuyAndHold
from foxhunt.backtest.strategies import TablePolicy
from foxhunt.data.continuous import ContinuousSeries, RollRule, build_continuous
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.env import EnvConfig
from foxhunt.execution import SqlEventStore
from foxhunt.execution.sim import SimulatedVenue
from foxhunt.orders import Contract
from foxhunt.paper.policy import RuleDecider
from foxhunt.paper.rolling import RollingPaperTrader, RollPlan
from foxhunt.risk import RiskConfig

from ..data.contract_set import es_contract_set
from .helpers import OPEN_LIMITS

ES = InstrumentRegistry.load().get("ES")
ROLLS = (("ESH24", "ESM24"), ("ESM24", "ESU24"), ("ESU24", "ESZ24"))
"""The volume rule's rolls of the synthetic set."""

Market = tuple[ContinuousSeries, RollPlan]


def es_market() -> Market:
    months = es_contract_set()
    series = build_continuous(months, RollRule(roll="volume", adjust="difference"), ES)
    return series, RollPlan.of(series, months)


def months_of(market: Market) -> dict[str, Contract]:
    return market[1].contracts(Contract.from_instrument(ES))


def trader(market: Market, url: str = "sqlite://", journal: Path | None = None,
           risk: RiskConfig = OPEN_LIMITS, stop: int | None = None,
           policy: TablePolicy | None = None) -> RollingPaperTrader:
    """Buy-and-hold (or `policy`) over bars [0, stop) of the market, on a log at `url`."""
    series, plan = market
    venue = SimulatedVenue(months_of(market), EnvConfig().slippage_ticks, journal=journal)
    return RollingPaperTrader(series.bars, ES, RuleDecider(policy or BuyAndHold(), series.bars),
                              (0, stop or len(series.bars)), store=SqlEventStore(url), venue=venue,
                              env=EnvConfig(), risk=risk, starting_cash=Decimal(100_000),
                              plan=plan)


def cents(x: float | Decimal) -> Decimal:
    return Decimal(repr(float(x))).quantize(Decimal("0.01"))
