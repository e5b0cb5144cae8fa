"""Continuous series from contract months: when to roll, and how to stitch (docs/futures.md).

A roll rule picks, once per trading day (`contracts.session_days`), whether to leave the front
contract for the next one by expiry. It reads the data up to the close of that day only, and
the roll acts on the next session: the continuous series switches contract at the first bar
after the decision day at which both contracts trade (the roll bar), and that bar's opens are
the prices of the roll's two legs. Rules:

- `calendar`: roll on the first trading day at most `days_before` calendar days before the
  front's expiry (ES traders roll about 8 days before the third Friday).
- `volume`: roll on the first day the next contract's volume that day exceeds the front's.
- `open_interest`: roll on the first day the next contract's open interest exceeds the
  front's, each the last value known by that day's close.
- The crossover rules roll at the latest on the first day at most `latest_days_before` days
  before expiry, so a crossover that never comes cannot carry the series past expiry.

Adjustments (what the continuous series' prices are; fills never use them):

- `none`: each bar is the traded contract's own price; a roll shows the legs' gap as a jump.
- `difference` (back-adjusted): every bar before a roll is shifted by the gap between the two
  legs at the roll bar's open (`to - from`), summed over later rolls, so the latest contract is
  unchanged and a roll shows no jump. Bar-to-bar changes equal the traded contract's changes,
  and across a roll bar they equal what a position rolled at that open earns. Old prices can
  go negative for a market in steep contango; such a series is refused (use `ratio`).
- `ratio`: every bar before a roll is multiplied by the legs' ratio (`to / from`), so returns
  within a contract and across a roll are the traded contract's; prices leave the tick grid.

Everything here is a pure function of the contract series and the rule, so a stored
continuous series can be rebuilt and checked (`ContinuousSeries.derivation`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

import numpy as np
from pydantic import model_validator

from foxhunt.configbase import StrictConfig
from foxhunt.data.contracts import FuturesContract, date_day, day_date, session_days
from foxhunt.data.grid import off_grid_mask
from foxhunt.data.instruments import Instrument
from foxhunt.data.series import Bars
from foxhunt.data.timestamps import format_ns
from foxhunt.errors import DataError

RollKind = Literal["calendar", "volume", "open_interest"]
Adjust = Literal["none", "difference", "ratio"]


class RollRule(StrictConfig):
    """How a continuous series rolls and is adjusted (the module docstring says each rule)."""

    roll: RollKind = "volume"
    adjust: Adjust = "difference"
    days_before: int = 8
    latest_days_before: int = 1

    @model_validator(mode="after")
    def _days(self) -> RollRule:
        for name in ("days_before", "latest_days_before"):
            value = getattr(self, name)
            if not 0 <= value <= 90:
                raise ValueError(f"{name} must be 0..90 calendar days, got {value}")
        return self


@dataclass(frozen=True)
class ContractSeries:
    """One contract month's bars (and open interest known at each bar's close, if any)."""

    contract: FuturesContract
    bars: Bars
    open_interest: np.ndarray | None = None

    @property
    def symbol(self) -> str:
        return self.contract.symbol


@dataclass(frozen=True)
class RollDecision:
    """A roll decided at the close of trading day `day`, from the data up to that close."""

    day: date
    from_symbol: str
    to_symbol: str
    reason: str


@dataclass(frozen=True)
class Roll:
    """One row of the roll table: the decision, where it acted and the legs' prices there."""

    decision: RollDecision
    bar: int  # index of the roll bar in the continuous series: the first bar of `to`
    ts: int  # its close time (ns UTC); the legs trade at its open
    from_price: float  # the front's open at the roll bar
    to_price: float  # the next contract's open at the roll bar
    adjustment: float  # difference: to - from; ratio: to / from; none: 0

    @property
    def gap(self) -> float:
        return self.to_price - self.from_price

    def to_dict(self) -> dict:
        """The stored and printed row (docs/json.md#datarolls)."""
        d = self.decision
        return {"decided": d.day.isoformat(), "from": d.from_symbol, "to": d.to_symbol,
                "roll_ts": self.ts, "roll_time": format_ns(self.ts), "bar": self.bar,
                "from_price": self.from_price, "to_price": self.to_price, "gap": self.gap,
                "adjustment": self.adjustment, "reason": d.reason}


@dataclass(frozen=True)
class ContinuousSeries:
    """A stitched series: `bars` as the rule adjusts them, `raw` the traded contracts' own
    prices on the same bars (what fills and marks use), `contract[i]` the index into
    `contracts` of the contract traded at bar i, and the roll table."""

    root: str
    rule: RollRule
    bars: Bars
    raw: Bars
    contract: np.ndarray
    contracts: tuple[FuturesContract, ...]
    rolls: tuple[Roll, ...]
    inputs: tuple[dict, ...] = field(default=())

    @property
    def derivation(self) -> dict:
        """What the series was built from and how, stored beside it: rebuilding from the same
        contract series with the same rule gives the same bars (the fingerprint says whether
        the inputs are still the same)."""
        return {"roll": self.rule.roll, "adjust": self.rule.adjust,
                "days_before": self.rule.days_before,
                "latest_days_before": self.rule.latest_days_before,
                "contracts": [{k: v for k, v in i.items() if k != "digest"} for i in self.inputs],
                "fingerprint": _fingerprint(self.inputs)}


def decide_rolls(series: list[ContractSeries], rule: RollRule,
                 instrument: Instrument) -> list[RollDecision]:
    """The roll decisions over the contracts' trading days, in time order. A decision on day
    d reads bars of days <= d only (held by `test_no_look_ahead_in_the_roll_decisions`)."""
    chain = _chain(series)
    days = [session_days(s.bars.ts, instrument.session) for s in chain]
    volume = [_sum_by_day(d, s.bars.volume) for d, s in zip(days, chain, strict=True)]
    oi = [_last_by_day(d, s) for d, s in zip(days, chain, strict=True)]
    if rule.roll == "open_interest":
        missing = [s.symbol for s, o in zip(chain, oi, strict=True) if o is None]
        if missing:
            raise DataError(f"{', '.join(missing)}: no open interest stored; the open_interest "
                            "rule needs an open_interest column in every contract's import "
                            "(or use --roll volume or calendar)")
    calendar = sorted(set(np.concatenate(days).tolist()))
    front = _first_front(chain, days, calendar[0])
    out: list[RollDecision] = []
    for day in calendar:
        if front + 1 >= len(chain):
            break
        nxt = front + 1
        reason = _roll_reason(rule, chain[front].contract, day, volume[front], volume[nxt],
                              oi[front], oi[nxt])
        if reason is None:
            continue
        out.append(RollDecision(day_date(day), chain[front].symbol, chain[nxt].symbol, reason))
        front = nxt
    return out


def build_continuous(series: list[ContractSeries], rule: RollRule,
                     instrument: Instrument) -> ContinuousSeries:
    """The continuous series of the contracts under `rule`, with its roll table."""
    chain = _chain(series)
    decisions = decide_rolls(chain, rule, instrument)
    index = {s.symbol: i for i, s in enumerate(chain)}
    days = [session_days(s.bars.ts, instrument.session) for s in chain]
    current = _first_front(chain, days, min(int(d[0]) for d in days))
    start = 0  # first bar of the current segment, in the current contract's bars
    pieces: list[tuple[int, int, int]] = []  # (contract, first bar, stop bar)
    legs: list[tuple[RollDecision, int, int]] = []  # decision, from-bar, to-bar
    for decision in decisions:
        frm, to = index[decision.from_symbol], index[decision.to_symbol]
        at = _roll_bars(chain[frm], days[frm], chain[to], days[to], decision)
        if at[0] < start:
            raise DataError(f"{decision.from_symbol} -> {decision.to_symbol}: the roll decided "
                            f"on {decision.day} would act before the roll into "
                            f"{decision.from_symbol} did; the contracts' data overlap too little")
        pieces.append((frm, start, at[0]))
        legs.append((decision, at[0], at[1]))
        current, start = to, at[1]
    pieces.append((current, start, len(chain[current].bars)))
    raw = _concat([chain[c].bars.slice(a, b) for c, a, b in pieces])
    contract = np.concatenate([np.full(b - a, c, dtype=np.int64) for c, a, b in pieces])
    rolls, bar = [], 0
    for (c, a, b), (decision, i_from, i_to) in zip(pieces[:-1], legs, strict=True):
        bar += b - a
        frm_px = float(chain[c].bars.open[i_from])
        to_px = float(chain[index[decision.to_symbol]].bars.open[i_to])
        adj = {"none": 0.0, "difference": _gap(frm_px, to_px, instrument.tick_size),
               "ratio": to_px / frm_px}[rule.adjust]
        rolls.append(Roll(decision, bar, int(raw.ts[bar]), frm_px, to_px, adj))
    bars = _adjust(raw, rolls, rule.adjust, instrument)
    inputs = tuple(_input(s) for s in chain)
    return ContinuousSeries(chain[0].contract.root, rule, bars, raw, contract,
                            tuple(s.contract for s in chain), tuple(rolls), inputs)


def _gap(from_price: float, to_price: float, tick_size: float) -> float:
    """`to - from`, as a whole number of ticks when both legs are on the tick grid (the usual
    case), so the adjustment carries no float residue into the back-adjusted prices."""
    if off_grid_mask(np.array([from_price, to_price]), tick_size).any():
        return to_price - from_price
    return (round(to_price / tick_size) - round(from_price / tick_size)) * tick_size


def _chain(series: list[ContractSeries]) -> list[ContractSeries]:
    """The contracts by expiry; one root, distinct months, each with bars."""
    if not series:
        raise DataError("no contract months to build a continuous series from; import them "
                        "first (foxhunt data import ESH4.csv ESM4.csv --symbol ES)")
    chain = sorted(series, key=lambda s: s.contract)
    roots = {s.contract.root for s in chain}
    if len(roots) > 1:
        raise DataError(f"contract months of several roots ({', '.join(sorted(roots))}); a "
                        "continuous series is one root's")
    seen = [s.symbol for s in chain]
    if len(set(seen)) != len(seen):
        raise DataError(f"a contract month is given twice ({', '.join(seen)})")
    for s in chain:
        if len(s.bars) == 0:
            raise DataError(f"{s.symbol}: no bars")
    return chain


def _first_front(chain: list[ContractSeries], days: list[np.ndarray], first_day: int) -> int:
    """The front at the start: the earliest-expiring contract trading on the first day."""
    for i, d in enumerate(days):
        if d[0] <= first_day <= d[-1]:
            return i
    return 0


def _sum_by_day(days: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """Each trading day's total (volume)."""
    keys, start = np.unique(days, return_index=True)
    return dict(zip(keys.tolist(), np.add.reduceat(values, start).tolist(), strict=True))


def _last_by_day(days: np.ndarray, s: ContractSeries) -> tuple[np.ndarray, np.ndarray] | None:
    """(trading days, the last open interest known at each day's close), or None."""
    if s.open_interest is None:
        return None
    keys, start = np.unique(days, return_index=True)
    last = np.r_[start[1:], len(days)] - 1
    return keys, np.asarray(s.open_interest, dtype=np.float64)[last]


def _known(by_day: tuple[np.ndarray, np.ndarray], day: int) -> float:
    """The last value known at the close of `day` (0 before the first)."""
    keys, values = by_day
    i = int(np.searchsorted(keys, day, side="right")) - 1
    return float(values[i]) if i >= 0 else 0.0


def _roll_reason(rule: RollRule, front: FuturesContract, day: int, vol_front: dict,
                 vol_next: dict, oi_front, oi_next) -> str | None:
    """Why to roll at the close of `day`, or None to stay: only data of days <= `day`."""
    expiry = date_day(front.expiry)
    if rule.roll == "calendar":
        if day >= expiry - rule.days_before:
            return f"calendar: {_days(rule.days_before)} before {front.symbol}'s expiry {front.expiry}"
        return None
    if rule.roll == "volume":
        mine, theirs = vol_front.get(day, 0.0), vol_next.get(day, 0.0)
        if theirs > mine:
            return f"volume {theirs:,.0f} > {mine:,.0f}"
    else:
        mine, theirs = _known(oi_front, day), _known(oi_next, day)
        if theirs > mine:
            return f"open interest {theirs:,.0f} > {mine:,.0f}"
    if day >= expiry - rule.latest_days_before:
        return (f"no crossover {_days(rule.latest_days_before)} before {front.symbol}'s expiry "
                f"{front.expiry}")
    return None


def _days(n: int) -> str:
    return f"{n} day" if n == 1 else f"{n} days"


def _roll_bars(frm: ContractSeries, frm_days: np.ndarray, to: ContractSeries,
               to_days: np.ndarray, decision: RollDecision) -> tuple[int, int]:
    """(bar in `frm`, bar in `to`) of the roll: the first time after the decision day at which
    both contracts have a bar."""
    day = date_day(decision.day)
    a = frm.bars.ts[frm_days > day]
    b = to.bars.ts[to_days > day]
    common = np.intersect1d(a, b, assume_unique=True)
    if common.size == 0:
        raise DataError(f"{decision.from_symbol} -> {decision.to_symbol}: no bar at which both "
                        f"trade after the roll decided on {decision.day} ({decision.reason}); "
                        f"{decision.from_symbol}'s bars end at {format_ns(int(frm.bars.ts[-1]))}:"
                        " roll earlier (--days) or import the missing bars")
    ts = common[0]
    return int(np.searchsorted(frm.bars.ts, ts)), int(np.searchsorted(to.bars.ts, ts))


def _concat(parts: list[Bars]) -> Bars:
    flow = all(p.has_flow for p in parts)
    cols = {}
    for name in ("ts", "open", "high", "low", "close", "volume"):
        cols[name] = np.concatenate([getattr(p, name) for p in parts])
    if flow:
        cols["buy_volume"] = np.concatenate([p.buy_volume for p in parts])
        cols["sell_volume"] = np.concatenate([p.sell_volume for p in parts])
    return Bars(**cols)


def _adjust(raw: Bars, rolls: list[Roll], adjust: Adjust, instrument: Instrument) -> Bars:
    """The back-adjusted prices: bars before each roll shifted (difference) or scaled (ratio)
    by that roll's adjustment, the latest contract left as it is."""
    if adjust == "none" or not rolls:
        return raw
    n = len(raw)
    if adjust == "difference":
        step = np.zeros(n)
        for r in rolls:
            step[: r.bar] += r.adjustment
    else:
        step = np.ones(n)
        for r in rolls:
            step[: r.bar] *= r.adjustment
    t = instrument.tick_size
    cols = {}
    for name in ("open", "high", "low", "close"):
        p = getattr(raw, name)
        if adjust == "difference":
            moved = p + step
            cols[name] = np.where(off_grid_mask(p, t), moved, np.round(moved / t) * t)
        else:
            cols[name] = p * step
    low = cols["low"]
    if adjust == "difference" and (low <= 0).any():
        i = int(np.argmax(low <= 0))
        raise DataError(f"{instrument.symbol}: back-adjusting by difference takes the low of the "
                        f"bar at {format_ns(int(raw.ts[i]))} to {low[i]:g}; prices must stay "
                        "positive: use --adjust ratio")
    return Bars(ts=raw.ts, **cols, volume=raw.volume, buy_volume=raw.buy_volume,
                sell_volume=raw.sell_volume)


def fingerprint(series: list[ContractSeries]) -> str:
    """A digest of the contract series a continuous series is built from (bars, open
    interest): equal to the stored derivation's while the inputs are unchanged."""
    return _fingerprint(tuple(_input(s) for s in _chain(series)))


def _fingerprint(inputs: tuple[dict, ...]) -> str:
    digest = hashlib.sha256()
    for item in inputs:
        digest.update(item["digest"].encode())
    return digest.hexdigest()[:16]


def _input(s: ContractSeries) -> dict:
    digest = hashlib.sha256()
    for a in (s.bars.ts, s.bars.open, s.bars.high, s.bars.low, s.bars.close, s.bars.volume):
        digest.update(np.ascontiguousarray(a).tobytes())
    if s.open_interest is not None:
        digest.update(np.ascontiguousarray(s.open_interest, dtype=np.float64).tobytes())
    return {"symbol": s.symbol, "expiry": s.contract.expiry.isoformat(), "rows": len(s.bars),
            "first_ts": int(s.bars.ts[0]), "last_ts": int(s.bars.ts[-1]),
            "digest": digest.hexdigest()}


def stored_contract_series(store, root: str, spec: str | None) -> tuple[str, list[ContractSeries],
                                                                         list[str]]:
    """(bar spec, the contract series of `root` stored in that spec, notes) from a
    `MarketStore`. `spec` None: the one spec every stored month has (1min when several do).
    A month stored in other specs only is left out, with a note."""
    contracts = store.contracts(root)
    if not contracts:
        raise DataError(f"no contract months of {root} stored; import them first, e.g. foxhunt "
                        f"data import {root}H4.csv {root}M4.csv --symbol {root}")
    specs: dict[str, set[str]] = {}
    for s in store.series():
        if s.kind == "bars":
            specs.setdefault(s.symbol, set()).add(s.spec)
    have = [specs.get(c.symbol, set()) for c in contracts]
    if spec is None:
        common = set.intersection(*have) if have else set()
        if len(common) == 1:
            spec = common.pop()
        elif "1min" in common:
            spec = "1min"
        else:
            every = sorted(set.union(*have))
            raise DataError(f"{root}'s contract months are stored as {', '.join(every) or 'no bars'}"
                            f"{'' if common else ' (none common to all)'}; choose one with --bars")
    notes = [f"{c.symbol}: no {spec} bars stored; left out" for c, h in zip(contracts, have,
                                                                           strict=True)
             if spec not in h]
    series = []
    for c, h in zip(contracts, have, strict=True):
        if spec not in h:
            continue
        oi = store.read_open_interest(c.symbol, spec)
        bars = store.read_bars(c.symbol, spec)
        series.append(ContractSeries(c, bars, _aligned_oi(bars, oi)))
    if not series:
        raise DataError(f"no contract month of {root} has {spec} bars stored")
    return spec, series, notes


def _aligned_oi(bars: Bars, oi: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray | None:
    """Open interest at each bar: the last value stamped at or before it (0 before any)."""
    if oi is None:
        return None
    ts, values = oi
    i = np.searchsorted(ts, bars.ts, side="right") - 1
    return np.where(i >= 0, values[np.maximum(i, 0)], 0.0)
