"""A small synthetic set of ES contract months with known expiries, volumes and open interest,
whose roll tables are hand-checked in test_continuous.py and shown in docs/futures.md.

Four contracts, ESH24 ESM24 ESU24 ESZ24 (expiries by ES's rule: the third Friday, 2024-03-15,
06-21, 09-20, 12-20), one daily bar per weekday closing at 16:00 Chicago, each contract from
its first day below to its expiry. Prices: on the k-th weekday from 2024-01-02 (k = 0) a
contract opens at 5000 + 0.25 k + its premium (H 0, M 12.50, U 23.75, Z 37.00), so the legs'
gap at any roll is the difference of premiums: 12.50, 11.25, 13.25. The close is the open
+1.25 on even k and -0.75 on odd k; high and low 0.50 beyond.

Volume: a contract trades 20,000 a day until its lead day, 150,000 from then until the next
contract's lead day, 30,000 after. Lead days: ESM24 2024-03-08, ESU24 2024-06-13, ESZ24
2024-09-11 (ESH24 leads from the start), so the volume crossover is on each lead day. Open
interest crosses one weekday later: 500,000 before a contract's lead day + 1 weekday,
2,000,000 until the next contract's, 400,000 after.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from foxhunt.data.continuous import ContractSeries
from foxhunt.data.contracts import FuturesContract
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.series import Bars

START = date(2024, 1, 2)
CHICAGO = ZoneInfo("America/Chicago")
MONTHS = (("H", 3, 0.0, date(2024, 1, 2), START),
          ("M", 6, 12.50, date(2024, 2, 1), date(2024, 3, 8)),
          ("U", 9, 23.75, date(2024, 5, 1), date(2024, 6, 13)),
          ("Z", 12, 37.00, date(2024, 8, 1), date(2024, 9, 11)))
"""(month code, month, premium, first day of data, lead day) of each contract."""


def weekdays(first: date, last: date) -> list[date]:
    out, d = [], first
    while d <= last:
        if d.weekday() < 5:
            out.append(d)
        d += timedelta(days=1)
    return out


def k_of(d: date) -> int:
    """The weekday index of `d` from 2024-01-02."""
    return len(weekdays(START, d)) - 1


def close_ts(d: date) -> int:
    """16:00 Chicago on `d`, as ns UTC: the daily bar's close."""
    return int(datetime(d.year, d.month, d.day, 16, tzinfo=CHICAGO).timestamp()) * 10**9


def es_contract_set() -> list[ContractSeries]:
    es = InstrumentRegistry.load().get("ES")
    out = []
    for i, (code, month, premium, first, lead) in enumerate(MONTHS):
        expiry = es.expiry.expiry(2024, month)
        next_lead = MONTHS[i + 1][4] if i + 1 < len(MONTHS) else date(2100, 1, 1)
        days = weekdays(first, expiry)
        k = np.array([k_of(d) for d in days], dtype=np.float64)
        open_ = 5000.0 + 0.25 * k + premium
        close = open_ + np.where(k % 2 == 0, 1.25, -0.75)
        volume = np.array([20_000.0 if d < lead else 150_000.0 if d < next_lead else 30_000.0
                           for d in days])
        oi_lead, oi_next = _next_weekday(lead), _next_weekday(next_lead)
        oi = np.array([500_000.0 if d < oi_lead else 2_000_000.0 if d < oi_next else 400_000.0
                       for d in days])
        if i == 0:
            oi = np.where(np.array(days) < oi_next, 2_000_000.0, 400_000.0)
        bars = Bars(ts=np.array([close_ts(d) for d in days], dtype=np.int64), open=open_,
                    high=np.maximum(open_, close) + 0.5, low=np.minimum(open_, close) - 0.5,
                    close=close, volume=volume)
        out.append(ContractSeries(FuturesContract("ES", 2024, month, expiry), bars, oi))
    return out


def _next_weekday(d: date) -> date:
    if d.year >= 2100:
        return d
    d += timedelta(days=1)
    while d.weekday() >= 5:
        d += timedelta(days=1)
    return d


def write_contract_csvs(folder) -> list:
    """The set as one CSV per contract (ESH24.csv, ...), with open interest, as a user would
    import it; returns the paths."""
    paths = []
    for s in es_contract_set():
        path = folder / f"{s.symbol}.csv"
        rows = ["ts,open,high,low,close,volume,open_interest"]
        b = s.bars
        rows += [f"{t},{o},{h},{lo},{c},{v:.0f},{oi:.0f}" for t, o, h, lo, c, v, oi in
                 zip(b.ts, b.open, b.high, b.low, b.close, b.volume, s.open_interest,
                     strict=True)]
        path.write_text("\n".join(rows) + "\n")
        paths.append(path)
    return paths
