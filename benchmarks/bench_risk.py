"""Trading-core latency: the pre-trade risk check per order, and a whole submit through the OMS.

1. check: `RiskEngine.check_order` on an order that passes every check (the longest path: all
   limits read, gross notional summed over two instruments with positions and working orders).
   Target: p99 <= 50 us per order in Python.
2. submit: `TradingEngine.submit` end to end (request -> ticks -> risk -> events applied ->
   appended in one transaction -> venue call), on an in-memory SQLite log and on a SQLite file
   in WAL mode with synchronous=FULL (each submit is one durable transaction: the figure is
   mostly the disk's fsync).

Prints one JSON document on stdout (percentiles in microseconds); targets are reported as
`target_met` and never change the exit status. `--quick` (CI runs it, in seconds): 2,000 checks
and 50 submits per log.

    .venv/bin/python benchmarks/bench_risk.py
    .venv/bin/python benchmarks/bench_risk.py --orders 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal

from _run import run_main

from foxhunt.execution import SqlEventStore, TradingEngine
from foxhunt.execution import venue as v
from foxhunt.orders import Contract, OrderInitialized, OrderRequest, OrderType, Side, TimeInForce
from foxhunt.risk import RiskConfig

SEC = 1_000_000_000
T0 = 1_709_647_200 * SEC
CONTRACTS = {
    "ES": Contract("ES", Decimal("0.25"), Decimal(50), Decimal("2.25")),
    "CL": Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50")),
}
FULL = {"orders": 20_000, "submits": 500}
QUICK = {"orders": 2_000, "submits": 50}
LOOSE = RiskConfig(max_order_rate=10**9, max_orders_per_day=10**9, max_position=10**6,
                   max_order_qty=10, max_gross_notional=Decimal(10**12))  # fmt: skip


def percentiles(ns: list[int]) -> dict[str, float]:
    ns = sorted(ns)
    pick = lambda q: ns[min(len(ns) - 1, int(q * len(ns)))] / 1000
    return {"p50_us": pick(0.5), "p90_us": pick(0.9), "p99_us": pick(0.99), "max_us": ns[-1] / 1000}


def engine(url: str) -> TradingEngine:
    eng = TradingEngine.open(SqlEventStore(url), CONTRACTS, LOOSE, ts_ns=T0)
    eng.mark("ES", "4500.00", T0)
    eng.mark("CL", "80.00", T0)
    for sym, side, cid in (("ES", Side.BUY, "p1"), ("CL", Side.SELL, "p2")):
        eng.submit(OrderRequest(sym, side, 2, client_order_id=cid), T0 + 1)
        eng.on_report(v.Filled(client_order_id=cid, ts_ns=T0 + 2, fill_id="f", quantity=2,
                               price_ticks=eng.account.marks[sym]))  # fmt: skip
    for i in range(5):
        eng.submit(OrderRequest("ES", Side.BUY, 1, OrderType.LIMIT, limit_price="4490",
                                client_order_id=f"w{i}"), T0 + 3)  # fmt: skip
    return eng


def bench_check(n: int) -> dict:
    eng = engine("sqlite://")
    order = OrderInitialized(
        ts_ns=T0 + 10, client_order_id="x", symbol="ES", side=Side.BUY, quantity=2,
        order_type=OrderType.LIMIT, time_in_force=TimeInForce.GTC, limit_ticks=18001,
    )  # fmt: skip
    assert eng.risk.check_order(order, T0 + 10) is None
    check, out = eng.risk.check_order, []
    for _ in range(n):
        t = time.perf_counter_ns()
        check(order, T0 + 10)
        out.append(time.perf_counter_ns() - t)
    result = percentiles(out)
    result["target_met"] = result["p99_us"] <= 50
    return result


def bench_submit(url: str, n: int) -> dict:
    eng, out = engine(url), []
    for i in range(n):
        req = OrderRequest("ES", Side.BUY if i % 2 else Side.SELL, 1, OrderType.LIMIT,
                           limit_price="4495", client_order_id=f"b{i}")  # fmt: skip
        t = time.perf_counter_ns()
        eng.submit(req, T0 + 20 + i)
        out.append(time.perf_counter_ns() - t)
    return percentiles(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, help="risk checks to time (default 20,000; quick "
                    f"{QUICK['orders']:,})")
    ap.add_argument("--submits", type=int, help="OMS submits to time per log (default 500; "
                    f"quick {QUICK['submits']})")
    ap.add_argument("--quick", action="store_true", help="few checks and submits (CI)")
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.orders < 1 or args.submits < 1:
        ap.error("--orders and --submits must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        doc = {
            "benchmark": "risk",
            "quick": args.quick,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "loadavg_1m": os.getloadavg()[0],
            "check_order": bench_check(args.orders),
            "submit_memory_log": bench_submit("sqlite://", args.submits),
            "submit_sqlite_wal_file": bench_submit(f"sqlite:///{tmp}/log.sqlite", args.submits),
        }
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    run_main(main, "bench_risk")
