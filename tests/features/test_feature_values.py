"""Feature values against hand-computed answers and a plain pandas re-implementation."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features import GROUPS, FeatureConfig, FeaturePipeline
from foxhunt.features.calendar import SessionClock

from .feature_bars import MINUTE, every_group, random_bars, small_chunks

CHICAGO = Session(tz="America/Chicago", open="17:00", close="16:00")
SMALL = every_group(returns_lags=[1, 2], vol_windows=[2, 3], volume_windows=[2],
                    trend_windows=[2, 3], cross_pairs=[(1, 2), (2, 3)], norm_window=4)


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 1_000_000_000


def column(pipe: FeaturePipeline, raw: np.ndarray, name: str) -> np.ndarray:
    return raw[:, pipe.names.index(name)].astype(np.float64)


# --- layout -------------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [FeatureConfig(), every_group(), SMALL, FeatureConfig(groups=["time", "returns"]),
                                 FeatureConfig(groups=list(GROUPS))])
def test_groups_cover_every_column_once_in_the_fixed_order(cfg):
    pipe = FeaturePipeline(cfg)
    cols = [i for idx in pipe.groups.values() for i in idx]
    assert cols == list(range(pipe.n_features))
    assert list(pipe.groups) == [g for g in GROUPS if g in cfg.groups]
    assert len(set(pipe.names)) == pipe.n_features
    described = pipe.describe()
    assert [d["name"] for d in described] == pipe.names
    assert all(pipe.names[i] in [d["name"] for d in described if d["group"] == g]
               for g, idx in pipe.groups.items() for i in idx)
    assert all(d["description"] for d in described)


def test_default_feature_set():
    pipe = FeaturePipeline()
    assert {g: len(i) for g, i in pipe.groups.items()} == {"returns": 6, "trend": 12, "crosses": 4}
    assert pipe.warmup == 512  # ema_dist_256 waits out two spans
    full = FeaturePipeline(every_group())
    assert {g: len(i) for g, i in full.groups.items()} == {
        "returns": 6, "volatility": 9, "volume": 5, "trend": 12, "crosses": 3, "time": 6,
    }


@pytest.mark.parametrize("flow", [False, True])
def test_matrix_shape_dtype_warmup_and_no_nan(flow):
    pipe = FeaturePipeline(every_group(norm_window=50), CHICAGO)
    bars = random_bars(np.random.default_rng(1), 700, flow=flow)
    raw = pipe.raw(bars)
    assert raw.shape == (700, pipe.n_features) and raw.dtype == np.float32
    assert raw.flags.c_contiguous
    for i, spec in enumerate(pipe.specs):
        assert np.isnan(raw[: spec.warmup, i]).all(), spec.name
        assert np.isfinite(raw[spec.warmup :, i]).all(), spec.name
    assert pipe.warmup == max(s.warmup for s in pipe.specs)
    for fm, valid_from in [
        (pipe.transform(bars), pipe.warmup + 49),
        (pipe.transform(bars, fit_until=500), pipe.warmup),
    ]:
        assert fm.values.shape == raw.shape and fm.values.dtype == np.float32
        assert fm.values.flags.c_contiguous
        assert fm.valid_from == valid_from
        assert np.isfinite(fm.values).all()
        assert not fm.values[:valid_from].any()
        assert np.abs(fm.values).max() <= pipe.config.clip
        assert fm.names == tuple(pipe.names) and fm.groups == pipe.groups
        assert fm.ts is bars.ts
        assert np.array_equal(fm.group("time"), fm.values[:, pipe.groups["time"]])


def test_flat_market_and_zero_volume_stay_finite():
    pipe = FeaturePipeline(every_group(norm_window=20))
    bars = random_bars(np.random.default_rng(2), 900, flat_from=300, zero_volume=True)
    raw = pipe.raw(bars)
    assert np.isfinite(raw[pipe.warmup :]).all()
    for fm in (pipe.transform(bars), pipe.transform(bars, fit_until=600)):
        assert np.isfinite(fm.values).all()
    flat = raw[300 + 2 * pipe.history :]
    for name in ("ret_1", "rv_16", "pk_16", "gk_16", "atr_16", "ofi", "ofi_16", "logvol_16",
                 "zscore_32", "rsi_32", "chan_32"):
        assert np.abs(flat[:, pipe.names.index(name)]).max() < 1e-6, name


# --- hand-computed answers ----------------------------------------------------------------


def test_hand_computed_small_example():
    close = np.array([100.0, 101.0, 99.0, 102.0, 103.0, 103.0, 104.0])
    opens = np.array([100.0, 100.0, 101.0, 99.0, 102.0, 103.0, 103.0])
    high = np.array([101.0, 102.0, 101.5, 102.5, 104.0, 103.5, 104.5])
    low = np.array([99.0, 99.5, 98.0, 99.0, 101.5, 102.5, 102.8])
    volume = np.array([10.0, 20.0, 30.0, 0.0, 40.0, 50.0, 10.0])
    buy = np.array([5.0, 15.0, 10.0, 0.0, 40.0, 25.0, 4.0])
    ts = np.arange(1, 8, dtype=np.int64) * MINUTE
    bars = Bars(ts, opens, high, low, close, volume, buy, volume - buy)
    pipe = FeaturePipeline(SMALL)
    raw = pipe.raw(bars)
    lc = np.log(close)

    r1 = column(pipe, raw, "ret_1")
    assert np.isnan(r1[0])
    assert r1[2] == pytest.approx(math.log(99 / 101), rel=1e-6)
    assert column(pipe, raw, "ret_2")[3] == pytest.approx(math.log(102 / 101), rel=1e-6)
    # rv over 2 bars at row 3: RMS of the returns into rows 2 and 3
    expect = math.sqrt((math.log(99 / 101) ** 2 + math.log(102 / 99) ** 2) / 2)
    assert column(pipe, raw, "rv_2")[3] == pytest.approx(expect, rel=1e-6)
    assert np.isnan(column(pipe, raw, "rv_2")[1])
    # Parkinson over 2 bars at row 1
    pk = math.sqrt((math.log(101 / 99) ** 2 + math.log(102 / 99.5) ** 2) / 2 / (4 * math.log(2)))
    assert column(pipe, raw, "pk_2")[1] == pytest.approx(pk, rel=1e-6)
    # ATR-like: the true range reaches back to the previous close when it lies outside the bar
    tr3 = math.log(102.5 / 99.0)
    tr4 = math.log(104.0 / 101.5)
    assert column(pipe, raw, "atr_2")[4] == pytest.approx((tr3 + tr4) / 2, rel=1e-6)
    # flow: (buy - sell) / (buy + sell); zero volume -> 0
    ofi = column(pipe, raw, "ofi")
    assert ofi[:4].tolist() == pytest.approx([0.0, 0.5, -1 / 3, 0.0])
    assert column(pipe, raw, "ofi_2")[2] == pytest.approx((10 - 10) / 50, abs=1e-7)
    # channel over 3 bars at row 4: lows 98.0/99/101.5, highs 101.5/102.5/104
    mid = (math.log(104.0) + math.log(98.0)) / 2
    chan = (lc[4] - mid) / (math.log(104.0) - math.log(98.0))
    assert column(pipe, raw, "chan_3")[4] == pytest.approx(chan, rel=1e-6)
    # RSI-like over 2 bars at row 5: (0 + up) / (0 + up) = 1
    assert column(pipe, raw, "rsi_2")[5] == pytest.approx(1.0)
    # z-score over 2 bars: +-1 unless the two closes are equal
    z = column(pipe, raw, "zscore_2")
    assert z[1:5] == pytest.approx([1.0, -1.0, 1.0, 1.0])
    assert z[5] == 0.0


def test_proxy_flow_without_buy_sell_volume():
    rng = np.random.default_rng(3)
    bars = random_bars(rng, 300)
    pipe = FeaturePipeline(SMALL)
    ofi = column(pipe, pipe.raw(bars), "ofi")
    expect = np.sign(bars.close - bars.open) * (bars.volume > 0)
    assert np.array_equal(ofi, expect)


# --- against a plain pandas implementation ------------------------------------------------


def reference(bars: Bars, cfg: FeatureConfig) -> dict[str, np.ndarray]:
    """Straightforward, non-chunked definitions of every price/volume feature."""
    o, h, l, c = (pd.Series(np.log(getattr(bars, k))) for k in ("open", "high", "low", "close"))
    v = pd.Series(bars.volume)
    r1 = c.diff()
    out = {}
    for k in cfg.returns_lags:
        out[f"ret_{k}"] = c - c.shift(k)
    rv = {w: np.sqrt((r1**2).rolling(w).mean()) for w in cfg.vol_windows}
    true_range = np.maximum(h, c.shift(1)) - np.minimum(l, c.shift(1))
    for w in cfg.vol_windows:
        out[f"rv_{w}"] = rv[w]
        out[f"pk_{w}"] = np.sqrt(((h - l) ** 2).rolling(w).mean() / (4 * math.log(2)))
        gk = 0.5 * (h - l) ** 2 - (2 * math.log(2) - 1) * (c - o) ** 2
        out[f"gk_{w}"] = np.sqrt(gk.rolling(w).mean().clip(lower=0))
        out[f"atr_{w}"] = true_range.rolling(w).mean()
    short, long = cfg.vol_windows[0], cfg.vol_windows[-1]
    out["rv_ratio"] = np.log(rv[short].clip(lower=1e-10) / rv[long].clip(lower=1e-10))
    if bars.has_flow:
        signed = pd.Series(bars.buy_volume - bars.sell_volume)
        total = pd.Series(bars.buy_volume + bars.sell_volume)
    else:
        signed, total = pd.Series(np.sign(bars.close - bars.open)) * v, v
    out["ofi"] = (signed / total).where(total > 0, 0.0)
    for w in cfg.volume_windows:
        s, t = signed.rolling(w).sum(), total.rolling(w).sum()
        out[f"ofi_{w}"] = (s / t).where(t > 0, 0.0).where(t.notna())
        out[f"logvol_{w}"] = np.log1p(v) - np.log1p(v).rolling(w).mean()
    unit = rv[long].clip(lower=1e-10)
    for w in cfg.trend_windows:
        out[f"ema_dist_{w}"] = (c - c.ewm(span=w, adjust=False).mean()) / (unit * math.sqrt(w))
        std = c.rolling(w).std(ddof=0)
        z = (c - c.rolling(w).mean()) / std
        out[f"zscore_{w}"] = z.where(std > 1e-10, 0.0).where(std.notna())
        moves = r1.abs().rolling(w).sum()
        out[f"rsi_{w}"] = ((c - c.shift(w)) / moves).where(moves > 0, 0.0).where(moves.notna())
        top, bottom = h.rolling(w).max(), l.rolling(w).min()
        rng = top - bottom
        out[f"chan_{w}"] = ((c - (top + bottom) / 2) / rng).where(rng > 0, 0.0).where(rng.notna())
    for fast, slow in cfg.cross_pairs:
        cross = c.rolling(fast).mean() - c.rolling(slow).mean()
        out[f"cross_{fast}_{slow}"] = cross / (unit * math.sqrt(slow))
    return {k: np.asarray(s, dtype=np.float64) for k, s in out.items()}


@pytest.mark.parametrize(
    ("cfg", "n", "chunks", "flow"),
    [
        (every_group(norm_window=8), 1_500, True, True),
        (SMALL, 400, True, False),
        (every_group(returns_lags=[1, 5], vol_windows=[7], volume_windows=[3, 9],
                       trend_windows=[4, 11]), 900, True, False),
        (FeatureConfig(), 20_000, False, True),
        (FeatureConfig(groups=list(GROUPS), cross_pairs=[(1, 3), (2, 9), (5, 40)]), 1_200, True,
         False),
        (FeatureConfig(groups=list(GROUPS)), 20_000, False, False),
    ],
)
def test_every_feature_matches_a_plain_implementation(cfg, n, chunks, flow):
    rng = np.random.default_rng(n)
    bars = random_bars(rng, n, flow=flow, flat_from=n - 40)
    pipe = FeaturePipeline(cfg)
    if chunks:
        with small_chunks():
            raw = pipe.raw(bars)
    else:
        raw = pipe.raw(bars)
    ref = reference(bars, cfg)
    for i, spec in enumerate(pipe.specs):
        if spec.group == "time":
            continue
        got, want = raw[spec.warmup :, i].astype(np.float64), ref[spec.name][spec.warmup :]
        scale = np.nanstd(want) + np.abs(np.nanmean(want)) + 1e-12
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * scale), spec.name
        if spec.name.startswith("ema_dist"):
            continue  # pandas defines the EMA from row 0; ours waits out the seed's effect
        assert np.isnan(ref[spec.name][: spec.warmup]).all(), spec.name


# --- time of day --------------------------------------------------------------------------


def test_chicago_clock_across_both_dst_changes():
    """09:00 CST (UTC-6) on Fri 8 Mar 2024, 10:00 CDT (UTC-5) on Mon 11 Mar; back on 3 Nov."""
    ts = np.array([ns("2024-03-08T15:00:00"), ns("2024-03-11T15:00:00"),
                   ns("2024-03-10T07:59:00"), ns("2024-03-10T08:00:00"),
                   ns("2024-11-03T06:59:00"), ns("2024-11-03T07:00:00")], dtype=np.int64)
    clock = SessionClock(CHICAGO, int(ts.min()), int(ts.max()))
    offsets_h = clock.utc_offsets_ns(ts) / 3_600_000_000_000
    assert offsets_h.tolist() == [-6, -5, -6, -5, -5, -6]
    f = clock.features(ts)
    minutes = np.array([540, 600, 119, 180, 119, 60])
    angle = 2 * np.pi * minutes / 1440
    assert f["tod_sin"] == pytest.approx(np.sin(angle), abs=1e-6)
    assert f["tod_cos"] == pytest.approx(np.cos(angle), abs=1e-6)
    assert f["tod_sin"][0] == pytest.approx(math.sqrt(0.5), abs=1e-6)
    assert f["tod_cos"][1] == pytest.approx(-math.sqrt(3) / 2, abs=1e-6)
    weekday = np.array([4, 0, 6, 6, 6, 6])  # Fri, Mon, Sun x4
    week = 2 * np.pi * (weekday + minutes / 1440) / 7
    assert f["dow_sin"] == pytest.approx(np.sin(week), abs=1e-6)
    assert f["dow_cos"] == pytest.approx(np.cos(week), abs=1e-6)
    # session 17:00-16:00 (1380 min): 09:00 is 960 min in, 420 to go
    assert f["session_elapsed"][0] == pytest.approx(960 / 1380)
    assert f["session_to_close"][0] == pytest.approx(math.log1p(420) / math.log1p(1380), rel=1e-6)


def test_session_edges_overnight_and_around_the_clock():
    ts = np.array([ns("2024-06-03T21:00:00"), ns("2024-06-03T21:30:00"),
                   ns("2024-06-03T22:00:00"), ns("2024-06-03T22:01:00")], dtype=np.int64)
    f = SessionClock(CHICAGO, int(ts[0]), int(ts[-1])).features(ts)
    # 16:00 CDT is the close, 16:30 the break, 17:00 still the break (a bar closing at the
    # open covers the minute before it), 17:01 the first minute of the new session.
    assert f["session_elapsed"].tolist() == pytest.approx([1.0, 1.0, 1.0, 1 / 1380])
    assert f["session_to_close"][:3].tolist() == [0.0, 0.0, 0.0]
    utc = np.array([ns("2024-06-04T00:00:00"), ns("2024-06-04T00:01:00"),
                    ns("2024-06-04T12:00:00")], dtype=np.int64)
    g = SessionClock(Session(), int(utc[0]), int(utc[-1])).features(utc)
    assert g["session_elapsed"].tolist() == pytest.approx([1.0, 1 / 1440, 0.5])


def test_clock_matches_zoneinfo_row_by_row():
    rng = np.random.default_rng(5)
    lo, hi = ns("2019-01-01T00:00:00"), ns("2026-12-31T00:00:00")
    for tz in ("America/Chicago", "Europe/London", "Australia/Sydney", "Asia/Kolkata"):
        ts = np.sort(rng.integers(lo, hi, 3_000))
        clock = SessionClock(Session(tz=tz, open="08:00", close="16:30"), int(ts[0]), int(ts[-1]))
        got = clock.utc_offsets_ns(ts) // 1_000_000_000
        zone = ZoneInfo(tz)
        want = [
            datetime.fromtimestamp(t // 10**9, UTC).astimezone(zone).utcoffset().total_seconds()
            for t in ts.tolist()
        ]
        assert got.tolist() == want, tz


# --- errors -------------------------------------------------------------------------------


def test_clear_errors():
    pipe = FeaturePipeline(SMALL)
    bars = random_bars(np.random.default_rng(4), 50)
    with pytest.raises(DataError, match="too few"):
        pipe.raw(bars.slice(0, pipe.warmup))
    with pytest.raises(DataError, match="norm_window"):
        pipe.transform(bars.slice(0, pipe.rolling_valid_from))
    for bad in (pipe.warmup + 1, 51, 0):
        with pytest.raises(DataError, match="fit_until"):
            pipe.transform(bars, fit_until=bad)
    fm = pipe.transform(bars, fit_until=40)
    with pytest.raises(DataError, match="not both"):
        pipe.transform(bars, fit_until=40, normaliser=fm.normaliser)
    with pytest.raises(DataError, match="different feature set"):
        FeaturePipeline(every_group(norm_window=4)).transform(bars, normaliser=fm.normaliser)
    cols = bars.columns()
    cols["low"] = cols["low"].copy()
    cols["low"][17] = 0.0
    with pytest.raises(DataError, match="row 17: low"):
        pipe.raw(Bars(**cols))
