"""An order's life as OpenTelemetry spans and metrics, where `foxhunt.telemetry` is on.

The engine asks `foxhunt.telemetry.enabled()` once per call and builds this only then: off, an order
costs that one check. Spans (instrumentation scope `foxhunt.execution`):
- `foxhunt.orders.submit`: one `submit` or `submit_many` call (`foxhunt.orders`,
  `foxhunt.orders.sent`, `foxhunt.orders.denied`), with children `foxhunt.order.risk_check` per
  order (its id, symbol, side, quantity; `foxhunt.risk.check` where denied),
  `foxhunt.orders.log_append` (the durable append) and `foxhunt.order.send` per order sent;
- `foxhunt.order.report`: a venue report applied (`foxhunt.report`: Accepted, Filled, ...;
  for a fill its quantity, price in ticks and `foxhunt.order.fill_latency_ms`).
Metrics: counters `foxhunt.orders.submitted` and `foxhunt.orders.risk_rejects` (by symbol,
and check), histogram `foxhunt.orders.fill_latency` (ms of wall time from the order's send to
its fill applied, this process's clock; each fill of an order counts).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

from foxhunt.telemetry import meter, tracer

SCOPE = "foxhunt.execution"


class OrderTelemetry:
    """The engine's instruments, from the providers configured when it first reported."""

    def __init__(self) -> None:
        self.tracer = tracer(SCOPE)
        m = meter(SCOPE)
        self.submitted = m.create_counter(
            "foxhunt.orders.submitted", unit="{order}",
            description="orders that passed risk, were logged and sent to the venue")
        self.rejects = m.create_counter(
            "foxhunt.orders.risk_rejects", unit="{order}",
            description="orders the risk engine denied (foxhunt.risk.check says which limit)")
        self.fill_latency = m.create_histogram(
            "foxhunt.orders.fill_latency", unit="ms",
            description="wall time from an order's send to a fill of it applied")
        self._sent_ns: dict[str, int] = {}

    def span(self, name: str, attributes: dict[str, Any] | None = None
             ) -> AbstractContextManager[Any]:  # fmt: skip
        return self.tracer.start_as_current_span(name, attributes=attributes)

    def risk_checked(self, span: Any, init: Any, denial: Any) -> None:
        span.set_attributes({"foxhunt.order.id": init.client_order_id,
                             "foxhunt.symbol": init.symbol, "foxhunt.side": init.side.value,
                             "foxhunt.quantity": init.quantity})  # fmt: skip
        if denial is not None:
            span.set_attribute("foxhunt.risk.check", str(denial.check))
            if not denial.closing:
                self.rejects.add(1, {"foxhunt.symbol": init.symbol,
                                     "foxhunt.risk.check": str(denial.check)})

    def submitted_call(self, sent: int, denied: int) -> None:
        """The counts of the current `foxhunt.orders.submit` span."""
        from opentelemetry import trace

        trace.get_current_span().set_attributes({"foxhunt.orders.sent": sent,
                                                 "foxhunt.orders.denied": denied})

    def sent(self, order: Any) -> None:
        self._sent_ns[order.client_order_id] = time.perf_counter_ns()
        self.submitted.add(1, {"foxhunt.symbol": order.symbol})

    def report(self, report: Any, event: Any, span: Any) -> None:
        """What a report applied says (`event` None: a resend, or a late cancel reject)."""
        kind = type(report).__name__
        span.set_attributes({"foxhunt.order.id": report.client_order_id, "foxhunt.report": kind,
                             "foxhunt.applied": event is not None})  # fmt: skip
        if event is None or kind != "Filled":
            return
        span.set_attributes({"foxhunt.quantity": report.quantity,
                             "foxhunt.price_ticks": report.price_ticks})
        sent = self._sent_ns.get(report.client_order_id)
        if sent is not None:
            ms = (time.perf_counter_ns() - sent) / 1e6
            span.set_attribute("foxhunt.order.fill_latency_ms", ms)
            self.fill_latency.record(ms, {"foxhunt.symbol": event.symbol})
