"""Roll rules and continuous series (docs/futures.md): the synthetic set's hand-checked roll
tables, no look-ahead in the roll choice, what each adjustment keeps, and the stored
derivation with its roll table."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt import schemas
from foxhunt.data.continuous import (
    ContractSeries,
    RollRule,
    build_continuous,
    decide_rolls,
    fingerprint,
)
from foxhunt.data.contracts import FuturesContract, date_day, session_days
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.series import Bars
from foxhunt.data.store import MarketStore
from foxhunt.errors import DataError

from ..cli.test_cli import run, run_json, write_bars_csv
from .contract_set import es_contract_set, k_of, write_contract_csvs

ES = InstrumentRegistry.load().get("ES")

# -- the synthetic set's roll tables, checked by hand ------------------------------------------
# Roll bar = the first bar after the decision day (both legs trade every weekday). Each leg's
# price there is its open, 5000 + 0.25 k + premium with k the roll bar's weekday index from
# 2024-01-02: 2024-03-08 is k = 48, 03-11 k = 49, 03-12 k = 50, 06-14 k = 118, 06-17 k = 119,
# 09-12 k = 182, 09-13 k = 183. Gaps are the premium differences: 12.50, 11.25, 13.25, so the
# difference back-adjustment of the first segment is their sum, 37.00.
# (decided, from, to, roll bar's date, from price, to price)
CALENDAR = [  # 8 days before the third Fridays 03-15, 06-21, 09-20: Thursdays 03-07, 06-13, 09-12
    ("2024-03-07", "ESH24", "ESM24", date(2024, 3, 8), 5012.00, 5024.50),
    ("2024-06-13", "ESM24", "ESU24", date(2024, 6, 14), 5042.00, 5053.25),
    ("2024-09-12", "ESU24", "ESZ24", date(2024, 9, 13), 5069.50, 5082.75),
]
VOLUME = [  # on each lead day the next contract trades 150,000 against the front's 30,000
    ("2024-03-08", "ESH24", "ESM24", date(2024, 3, 11), 5012.25, 5024.75),
    ("2024-06-13", "ESM24", "ESU24", date(2024, 6, 14), 5042.00, 5053.25),
    ("2024-09-11", "ESU24", "ESZ24", date(2024, 9, 12), 5069.25, 5082.50),
]
OPEN_INTEREST = [  # open interest crosses one weekday after volume
    ("2024-03-11", "ESH24", "ESM24", date(2024, 3, 12), 5012.50, 5025.00),
    ("2024-06-14", "ESM24", "ESU24", date(2024, 6, 17), 5042.25, 5053.50),
    ("2024-09-12", "ESU24", "ESZ24", date(2024, 9, 13), 5069.50, 5082.75),
]


def _table(built) -> list[tuple]:
    return [(r.decision.day.isoformat(), r.decision.from_symbol, r.decision.to_symbol,
             _date_of(r.ts), r.from_price, r.to_price) for r in built.rolls]


def _date_of(ts: int) -> date:
    return datetime.fromtimestamp(ts / 1e9, tz=ZoneInfo("America/Chicago")).date()


@pytest.mark.parametrize("roll,expected", [("calendar", CALENDAR), ("volume", VOLUME),
                                           ("open_interest", OPEN_INTEREST)])
def test_the_synthetic_sets_roll_table_is_the_hand_checked_one(roll, expected):
    built = build_continuous(es_contract_set(), RollRule(roll=roll, adjust="none"), ES)
    assert _table(built) == expected
    # the hand arithmetic: opens are 5000 + 0.25 k + premium at the roll bar
    for (_, _, _, day, frm, to), prem in zip(expected, [(0, 12.5), (12.5, 23.75), (23.75, 37.0)],
                                             strict=True):
        assert (frm, to) == (5000 + 0.25 * k_of(day) + prem[0], 5000 + 0.25 * k_of(day) + prem[1])
    assert [r.gap for r in built.rolls] == [12.5, 11.25, 13.25]
    assert built.rolls[0].decision.reason == {
        "calendar": "calendar: 8 days before ESH24's expiry 2024-03-15",
        "volume": "volume 150,000 > 30,000",
        "open_interest": "open interest 2,000,000 > 400,000"}[roll]


def test_the_adjustments_of_the_synthetic_set():
    raw = build_continuous(es_contract_set(), RollRule(adjust="none"), ES)
    diff = build_continuous(es_contract_set(), RollRule(adjust="difference"), ES)
    ratio = build_continuous(es_contract_set(), RollRule(adjust="ratio"), ES)
    assert [r.adjustment for r in diff.rolls] == [12.5, 11.25, 13.25]
    assert [r.adjustment for r in raw.rolls] == [0.0, 0.0, 0.0]
    assert [r.adjustment for r in ratio.rolls] == [5024.75 / 5012.25, 5053.25 / 5042.0,
                                                   5082.5 / 5069.25]
    bars = [r.bar for r in diff.rolls]
    assert bars == [49, 118, 182] and len(diff.bars) == 254
    offset = np.select([np.arange(254) < b for b in bars], [37.0, 24.5, 13.25], 0.0)
    assert np.array_equal(diff.bars.close, raw.bars.close + offset)  # exact: on the 0.25 grid
    assert np.array_equal(diff.raw.close, raw.bars.close)
    assert diff.bars.close[0] == 5001.25 + 37.0 and diff.bars.close[-1] == raw.bars.close[-1]
    assert np.array_equal(ratio.bars.close[bars[-1]:], raw.bars.close[bars[-1]:])
    assert [diff.contracts[i].symbol for i in diff.contract[[0, 48, 49, 253]]] == [
        "ESH24", "ESH24", "ESM24", "ESZ24"]


# -- properties on random contract sets --------------------------------------------------------

CHICAGO = ZoneInfo("America/Chicago")
WINDOWS = ((3, date(2024, 1, 2)), (6, date(2024, 2, 15)), (9, date(2024, 5, 15)))
"""Three quarterly contracts, each from its first day to its expiry, overlapping by a month."""


def _weekdays(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)
            if (first + timedelta(days=i)).weekday() < 5]


def random_set(seed: int) -> list[ContractSeries]:
    """Two bars a weekday (10:00 and 16:00 Chicago) per contract, prices a random walk on the
    0.25 grid; volume and open interest noisy around a ramp up over a contract's first month
    and down over its last three weeks, so crossovers come mid-overlap and flicker."""
    rng = np.random.default_rng(seed)
    out = []
    for month, first in WINDOWS:
        expiry = ES.expiry.expiry(2024, month)
        ts = np.array([int(datetime(d.year, d.month, d.day, h, tzinfo=CHICAGO).timestamp())
                       * 10**9 for d in _weekdays(first, expiry) for h in (10, 16)])
        bars = _random_bars(rng, ts, 4000 + 40 * month)
        out.append(ContractSeries(FuturesContract("ES", 2024, month, expiry), bars,
                                  _activity(rng, ts)))
    return out


def _activity(rng, ts: np.ndarray) -> np.ndarray:
    day = (ts - ts[0]) / 86_400e9
    left = (ts[-1] - ts) / 86_400e9
    ramp = np.minimum(1.0, day / 30.0) * np.minimum(1.0, left / 21.0) + 0.05
    return np.round(10_000 * ramp * rng.lognormal(0.0, 0.3, len(ts)))


def _random_bars(rng, ts: np.ndarray, level: float) -> Bars:
    n = len(ts)
    close = level + 0.25 * np.cumsum(rng.integers(-8, 9, n))
    open_ = close + 0.25 * rng.integers(-4, 5, n)
    return Bars(ts=ts, open=open_, high=np.maximum(open_, close) + 0.25 * rng.integers(0, 4, n),
                low=np.minimum(open_, close) - 0.25 * rng.integers(0, 4, n), close=close,
                volume=_activity(rng, ts))


def _changed_after(series: list[ContractSeries], day: int, seed: int) -> list[ContractSeries]:
    """Every bar (prices, volume, open interest) of trading days after `day` redrawn."""
    rng = np.random.default_rng(seed)
    out = []
    for s in series:
        later = session_days(s.bars.ts, ES.session) > day
        if not later.any():
            out.append(s)
            continue
        new = _random_bars(rng, s.bars.ts, 3000 + 10 * s.contract.month)
        cols = {k: np.where(later, getattr(new, k), getattr(s.bars, k))
                for k in ("open", "high", "low", "close")}
        cols["volume"] = np.where(later, rng.integers(1, 20_000, len(later)), s.bars.volume)
        oi = np.where(later, rng.integers(1, 20_000, len(later)), s.open_interest)
        out.append(ContractSeries(s.contract, replace(s.bars, **cols), oi.astype(float)))
    return out


RULES = st.builds(RollRule, roll=st.sampled_from(["calendar", "volume", "open_interest"]),
                  adjust=st.just("none"), days_before=st.integers(1, 12),
                  latest_days_before=st.integers(1, 5))
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(seed=st.integers(0, 2**32 - 1), other=st.integers(0, 2**32 - 1), rule=RULES,
       data=st.data())
def test_no_look_ahead_in_the_roll_decisions(seed, other, rule, data):
    """Redrawing every bar after day t changes no roll decided up to t, nor any value of the
    unadjusted series up to t. t is mostly a decision day or the day before one, where a rule
    that peeked at the next day would decide differently."""
    series = random_set(seed)
    days = sorted(set(np.concatenate([session_days(s.bars.ts, ES.session)
                                      for s in series]).tolist()))
    decided = [days.index(date_day(d.day)) for d in decide_rolls(series, rule, ES)]
    near = sorted({max(i - k, 0) for i in decided for k in (0, 1)})
    cut = data.draw(st.sampled_from(near) if near and data.draw(st.booleans())
                    else st.integers(0, len(days) - 2))
    t = days[cut]
    changed = _changed_after(series, t, other)
    before = [d for d in decide_rolls(series, rule, ES) if date_day(d.day) <= t]
    after = [d for d in decide_rolls(changed, rule, ES) if date_day(d.day) <= t]
    assert before == after
    a, b = build_continuous(series, rule, ES), build_continuous(changed, rule, ES)
    upto = session_days(a.bars.ts, ES.session) <= t
    assert np.array_equal(a.bars.ts[upto], b.bars.ts[: upto.sum()])
    for name in ("open", "high", "low", "close", "volume"):
        assert np.array_equal(getattr(a.bars, name)[upto], getattr(b.bars, name)[: upto.sum()])


@SLOW
@given(seed=st.integers(0, 2**32 - 1), rule=RULES)
def test_adjustments_keep_the_traded_contracts_changes(seed, rule):
    """difference: bar-to-bar changes equal the traded contract's, except across a roll bar,
    where they equal what a position rolled at its open earns; the adjustment at each roll is
    the legs' gap there. ratio: the same for returns, with the legs' ratio."""
    series = random_set(seed)
    by_symbol = {s.symbol: s for s in series}
    raw = build_continuous(series, rule.model_copy(update={"adjust": "none"}), ES)
    diff = build_continuous(series, rule.model_copy(update={"adjust": "difference"}), ES)
    ratio = build_continuous(series, rule.model_copy(update={"adjust": "ratio"}), ES)
    assert _table(raw) == _table(diff) == _table(ratio)
    rolls = {r.bar: r for r in diff.rolls}
    step = np.diff(diff.bars.close)
    for i in range(1, len(raw.bars)):
        r = rolls.get(i)
        if r is None:
            assert step[i - 1] == raw.raw.close[i] - raw.raw.close[i - 1]
            assert ratio.bars.close[i] / ratio.bars.close[i - 1] == pytest.approx(
                raw.raw.close[i] / raw.raw.close[i - 1], rel=1e-12)
            continue
        frm = by_symbol[r.decision.from_symbol].bars
        j = int(np.searchsorted(frm.ts, r.ts))
        rolled = (r.from_price - frm.close[j - 1]) + (raw.raw.close[i] - r.to_price)
        assert step[i - 1] == rolled
        assert r.adjustment == r.to_price - r.from_price == frm_open_gap(by_symbol, r)
        assert (diff.bars.close[i - 1] - raw.raw.close[i - 1]) - (
            diff.bars.close[i] - raw.raw.close[i]) == r.adjustment
        q = ratio.rolls[list(rolls).index(i)]
        assert q.adjustment == r.to_price / r.from_price
        assert (ratio.bars.close[i - 1] / raw.raw.close[i - 1]) / (
            ratio.bars.close[i] / raw.raw.close[i]) == pytest.approx(q.adjustment, rel=1e-12)


def frm_open_gap(by_symbol, r) -> float:
    """The legs' gap read from the contracts' own bars at the roll bar."""
    to = by_symbol[r.decision.to_symbol].bars
    frm = by_symbol[r.decision.from_symbol].bars
    return to.open[np.searchsorted(to.ts, r.ts)] - frm.open[np.searchsorted(frm.ts, r.ts)]


# -- errors ---------------------------------------------------------------------------------------


def test_rule_options_are_checked():
    with pytest.raises(ValueError, match="days_before must be 0..90"):
        RollRule(days_before=-1)
    with pytest.raises(ValueError):
        RollRule(roll="monthly")


def test_difference_adjustment_that_goes_negative_is_refused():
    series = es_contract_set()
    big = replace(series[1], bars=replace(series[1].bars, **{
        k: getattr(series[1].bars, k) - 5014.0 for k in ("open", "high", "low", "close")}))
    with pytest.raises(DataError, match=r"ES: back-adjusting by difference takes the low .* "
                                        r"use --adjust ratio"):
        build_continuous([series[0], big], RollRule(adjust="difference"), ES)
    build_continuous([series[0], big], RollRule(adjust="ratio"), ES)


def test_a_roll_that_cannot_act_names_the_contracts_and_the_day():
    with pytest.raises(DataError, match=r"ESH24 -> ESM24: no bar at which both trade after the "
                                        r"roll decided on 2024-03-15"):
        build_continuous(es_contract_set()[:2], RollRule(roll="calendar", days_before=0), ES)


def test_open_interest_rule_needs_open_interest():
    series = [replace(s, open_interest=None) for s in es_contract_set()]
    with pytest.raises(DataError, match=r"ESH24, ESM24, ESU24, ESZ24: no open interest stored"):
        decide_rolls(series, RollRule(roll="open_interest"), ES)
    with pytest.raises(DataError, match="several roots"):
        decide_rolls([*series[:1], replace(series[1], contract=replace(
            series[1].contract, root="NQ"))], RollRule(), ES)


# -- stored derivation and the commands ---------------------------------------------------------


def test_the_stored_series_is_the_derivation_and_an_import_cannot_overwrite_it(tmp_path):
    built = build_continuous(es_contract_set(), RollRule(), ES)
    with MarketStore(tmp_path / "s.duckdb") as store:
        store.write_continuous("ES", "1d", built.bars, built.derivation,
                               [r.to_dict() for r in built.rolls])
        stored = store.read_bars("ES", "1d")
        assert np.array_equal(stored.close, built.bars.close)
        found = store.continuous("ES")
        assert found["fingerprint"] == fingerprint(es_contract_set()) == \
            built.derivation["fingerprint"]
        assert [r["to"] for r in found["rolls"]] == ["ESM24", "ESU24", "ESZ24"]
        with pytest.raises(DataError, match="ES 1d is a continuous series derived from contract"):
            store.write_bars("ES", "1d", built.bars, "es.csv")
    assert build_continuous(es_contract_set(), RollRule(), ES).derivation == built.derivation


def test_commands_build_store_and_show_the_roll_table(capsys, tmp_path):
    run_json(capsys, "data", "import", *map(str, write_contract_csvs(tmp_path)), "--symbol", "ES")
    doc = run_json(capsys, "data", "continuous", "ES", "--roll", "volume", "--adjust",
                   "difference")
    schemas.validate(doc)
    assert (doc["bars"], doc["rows"], doc["notes"]) == ("1d", 254, [])
    assert [(r["decided"], r["from"], r["to"], r["from_price"], r["to_price"], r["adjustment"])
            for r in doc["rolls"]] == [(d, f, t, fp, tp, tp - fp) for d, f, t, _, fp, tp in VOLUME]
    rolls = run_json(capsys, "data", "rolls", "ES")
    schemas.validate(rolls)
    assert rolls["current"] is True and rolls["rolls"] == doc["rolls"]
    code, out, _ = run(capsys, "data", "rolls", "ES")
    assert code == 0 and "ESH24" in out and "volume 150,000 > 30,000" in out
    listing = run_json(capsys, "data", "list")["series"]
    assert listing[0]["symbol"] == "ES" and listing[0]["continuous"]["rolls"] == 3
    # a changed contract month makes the stored series stale, and rebuilding replaces it
    path = tmp_path / "ESM24.csv"
    lines = path.read_text().splitlines()
    lines[5] = lines[5].replace(",150000,", ",150001,").replace(",20000,", ",20001,")
    path.write_text("\n".join(lines) + "\n")
    run_json(capsys, "data", "import", str(path), "--symbol", "ESM24")
    assert run_json(capsys, "data", "rolls", "ES")["current"] is False
    code, out, _ = run(capsys, "data", "rolls", "ES")
    assert "changed since this series was built" in out
    again = run_json(capsys, "data", "continuous", "ES", "--roll", "calendar", "--adjust", "none")
    assert [r["decided"] for r in again["rolls"]] == [r[0] for r in CALENDAR]
    assert run_json(capsys, "data", "rolls", "ES")["current"] is True


@pytest.mark.parametrize("setup,argv,message", [
    ("none", ["data", "continuous", "ES"], r"no contract months of ES stored; import them first"),
    ("contracts", ["data", "rolls", "ES"], r"no continuous series of ES stored; build one"),
    ("contracts", ["data", "continuous", "ES", "--bars", "1min"],
     r"no contract month of ES has 1min bars stored"),
    ("plain", ["data", "continuous", "ES", "--bars", "1min"],
     r"ES 1min is already stored and is not a continuous series .* --replace"),
    ("contracts", ["data", "continuous", "ES", "--days", "-1"], r"'--days'.* greater than or equal to 0"),
    ("contracts", ["data", "continuous", "ES", "--roll", "monthly"], r"monthly"),
])
def test_bad_continuous_commands_are_one_line(capsys, tmp_path, setup, argv, message):
    if setup in ("contracts", "plain"):
        run_json(capsys, "data", "import", *map(str, write_contract_csvs(tmp_path)), "--symbol",
                 "ES")
    if setup == "plain":
        run_json(capsys, "data", "import", str(write_bars_csv(tmp_path / "es.csv")), "--symbol",
                 "ES")
        for s in es_contract_set():  # the months in 1min too, so the build reaches the store
            run_json(capsys, "data", "import", str(_minute_file(tmp_path, s)), "--symbol",
                     s.symbol, "--bars", "1min")
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == "" and err.count("\n") == 1
    assert re.search(message, err), err


def _minute_file(tmp_path, s: ContractSeries):
    path = tmp_path / f"{s.symbol}_1min.csv"
    b = s.bars
    path.write_text("ts,open,high,low,close,volume\n" + "".join(
        f"{t},{o},{h},{lo},{c},{v:.0f}\n" for t, o, h, lo, c, v in
        zip(b.ts, b.open, b.high, b.low, b.close, b.volume, strict=True)))
    return path

