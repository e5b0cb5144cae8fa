"""An engine over an in-memory or file log, and a venue that records what it was asked."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.orders import Contract, Order
from foxhunt.risk import RiskConfig

ES = Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25"))
CL = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
CONTRACTS = {"ES": ES, "CL": CL}
SEC = 1_000_000_000
T0 = 1_709_647_200 * SEC  # 2024-03-05 14:00 UTC (08:00 Chicago)


class RecordingVenue:
    """Records calls, and what the log held at the moment of each call."""

    def __init__(self, store: SqlEventStore | None = None):
        self.calls: list[tuple[str, str]] = []
        self.store = store
        self.logged_before_call: list[bool] = []

    def _record(self, what: str, order: Order) -> None:
        self.calls.append((what, order.client_order_id))
        if self.store is not None:
            kind = {"submit": "order_submitted", "cancel": "order_pending_cancel",
                    "modify": "order_pending_update"}[what]  # fmt: skip
            suffix = f":{order.requests}" if what != "submit" else ""
            self.logged_before_call.append(
                self.store.contains(f"{order.client_order_id}:{kind}{suffix}")
            )

    def submit(self, order: Order) -> None:
        self._record("submit", order)

    def cancel(self, order: Order) -> None:
        self._record("cancel", order)

    def modify(self, order, quantity, limit_ticks, stop_ticks) -> None:
        self._record("modify", order)


def engine(url: str = "sqlite://", venue=None, **limits) -> TradingEngine:
    store = SqlEventStore(url)
    return TradingEngine.open(store, CONTRACTS, RiskConfig(**limits), venue=venue,
                              starting_cash=Decimal(100_000), ts_ns=T0)  # fmt: skip


def rebuilt(live: TradingEngine) -> TradingEngine:
    return TradingEngine(live.store, live.contracts, live.risk_config)
