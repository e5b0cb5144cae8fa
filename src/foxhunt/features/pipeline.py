"""Causal bar features in named groups and their normalisation (docs/domain.md#features).

The feature row for bar t is a function of bars[0..t] only: every kernel reads rows <= t, and
nothing is computed over the whole array except bounds used for checks. Groups are laid out in
the fixed order of `GROUPS`, each as a contiguous block of columns, so a variable-selection layer
can weight them. Prices enter through logs, so features are scale-free and one config serves
ES and CL alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from foxhunt.data.instruments import Session
from foxhunt.data.series import Bars
from foxhunt.errors import DataError
from foxhunt.features import normalise
from foxhunt.features.calendar import SessionClock
from foxhunt.features.config import FeatureConfig
from foxhunt.features.normalise import Normaliser, RollingZScore, pair_buffer, pair_rows
from foxhunt.features.scaling import Scaling, second_core
from foxhunt.features.segment import Segment
from foxhunt.features.specs import FeatureSpec, feature_specs

PASSTHROUGH_GROUPS = frozenset({"time"})
CHUNK = 8000
BATCH = 8  # chunks computed together (one numpy call serves all of them)


@dataclass(frozen=True, eq=False)
class FeatureMatrix:
    """Normalised features, float32 [T, F]; rows before `valid_from` are all zero (warm-up)."""

    values: np.ndarray
    names: tuple[str, ...]
    groups: dict[str, list[int]]
    ts: np.ndarray
    valid_from: int
    normaliser: Normaliser | None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def n_features(self) -> int:
        return self.values.shape[1]

    def group(self, name: str) -> np.ndarray:
        """The columns of one group, [T, F_group] (a view)."""
        idx = self.groups[name]
        return self.values[:, idx[0] : idx[-1] + 1]


def _row_length(n: int) -> int:
    """n rounded up to an odd multiple of 16 floats: a row stride that is a large power of two
    makes every transpose of the matrix hit the same cache sets and run several times slower."""
    m = -(-n // 16) * 16
    return m + 16 if (m // 16) % 2 == 0 else m


def _check_prices(bars: Bars) -> None:
    """Logs need positive prices; a bad row fails here with its number, not as NaN features."""
    for name in ("open", "high", "low", "close"):
        col = getattr(bars, name)
        if not (col.min() > 0.0 and col.max() < np.inf):  # a NaN fails the first test
            row = int(np.argmax(~(np.isfinite(col) & (col > 0.0))))
            raise DataError(
                f"bars row {row}: {name} must be a positive finite price (got {col[row]})"
            )
    for name in ("volume", "buy_volume", "sell_volume"):
        col = getattr(bars, name)
        if col is not None and not (col.min() >= 0.0 and col.max() < np.inf):
            row = int(np.argmax(~(np.isfinite(col) & (col >= 0.0))))
            raise DataError(f"bars row {row}: {name} must be finite and >= 0 (got {col[row]})")


VOLUME_GROUPS = ("volume",)
"""The groups built from volume: bars that carry none (`Bars.has_volume`) leave them out."""


def fit_to_bars(config: FeatureConfig, bars: Bars) -> tuple[FeatureConfig, list[str]]:
    """`config` without the groups the bars cannot feed, and a notice for each one left out:
    bars without volume (0 on every bar, as a file without the column imports) feed no
    volume features. A config of nothing but those groups is refused."""
    dropped = [] if bars.has_volume else [g for g in VOLUME_GROUPS if g in config.groups]
    if not dropped:
        return config, []
    kept = [g for g in config.groups if g not in dropped]
    if not kept:
        raise DataError(f"the bars carry no volume (0 on every bar) and features.groups holds "
                        f"only {', '.join(dropped)}: add another group")
    names = [s.name for s in feature_specs(config) if s.group in dropped]
    notice = (f"the bars carry no volume (0 on every bar): left out the {', '.join(dropped)} "
              f"features ({', '.join(names)})")
    return config.model_copy(update={"groups": kept}), [notice]


class FeaturePipeline:
    """Builds the feature matrix of a bar series; the layout depends on the config only.

    `session` places the clock features in the instrument's trading session; without one the
    session is UTC, around the clock.
    """

    def __init__(self, config: FeatureConfig | None = None, session: Session | None = None):
        self.config = config or FeatureConfig()
        self.session = session or Session()
        self.specs: tuple[FeatureSpec, ...] = tuple(feature_specs(self.config))
        self._fixed = [s.group in PASSTHROUGH_GROUPS for s in self.specs]
        self._by_group = {g: [s for s in self.specs if s.group == g] for g in self.config.groups}

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def groups(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, s in enumerate(self.specs):
            out.setdefault(s.group, []).append(i)
        return out

    @property
    def n_features(self) -> int:
        return len(self.specs)

    @property
    def warmup(self) -> int:
        """First row at which every raw feature is defined."""
        return max(s.warmup for s in self.specs)

    @property
    def rolling_valid_from(self) -> int:
        """First row of a rolling-normalised matrix: warm-up plus one full normalisation window."""
        return self.warmup + self.config.norm_window - 1

    def describe(self) -> list[dict[str, object]]:
        """One entry per column, in column order, for `features show --json`."""
        return [
            {"index": i, "name": s.name, "group": s.group, "warmup": s.warmup,
             "description": s.description}
            for i, s in enumerate(self.specs)
        ]

    def raw(self, bars: Bars) -> np.ndarray:
        """Un-normalised features, float32 [T, F] C-contiguous; NaN where a column is in warm-up."""
        return np.ascontiguousarray(self._raw_fm(bars).T)

    def transform(
        self,
        bars: Bars,
        *,
        fit_until: int | None = None,
        normaliser: Normaliser | None = None,
    ) -> FeatureMatrix:
        """Normalised features.

        `fit_until`: fit a `Normaliser` on rows [warmup, fit_until) (a fold's training window)
        and apply it to every row. `normaliser`: apply stored statistics, fitting nothing.
        Neither: causal rolling z-score over `norm_window` rows. Rows before `valid_from` are 0.
        """
        if fit_until is not None and normaliser is not None:
            raise DataError("transform: pass fit_until or normaliser, not both")
        n = len(bars)
        if normaliser is not None:
            if normaliser.names != tuple(self.names):
                raise DataError("transform: normaliser was fitted on a different feature set "
                                f"({len(normaliser.names)} features vs {self.n_features} here)")
            valid_from = self.warmup
            self._check_length(n, valid_from, "")
            values = normaliser.apply(self._raw_fm(bars).T)
        elif fit_until is not None:
            valid_from = self.warmup
            if not valid_from + 2 <= fit_until <= n:
                raise DataError(
                    f"fit_until={fit_until} out of range: the fit window starts after the "
                    f"{valid_from}-bar warm-up and needs at least 2 rows, so fit_until must be "
                    f"in [{valid_from + 2}, {n}]"
                )
            raw = self._raw_fm(bars).T
            normaliser = Normaliser.fit(raw, self.names, valid_from, fit_until,
                                        self.config.clip, self._fixed)
            values = normaliser.apply(raw)
        else:
            valid_from = self.rolling_valid_from
            self._check_length(n, valid_from, f" and a {self.config.norm_window}-bar "
                               "normalisation window (features.norm_window)")
            values = self._rolling(bars)
        values[:valid_from] = 0.0
        names = tuple(self.names)
        return FeatureMatrix(values, names, self.groups, bars.ts, valid_from, normaliser)

    def _check_length(self, n: int, valid_from: int, extra: str) -> None:
        if n <= valid_from:
            raise DataError(
                f"{n} bars are too few: the features need a {self.warmup}-bar warm-up{extra}, "
                f"so at least {valid_from + 1} bars"
            )

    @property
    def history(self) -> int:
        """Rows before a chunk that its windows and lags can reach back into."""
        c = self.config
        slow = [s for _, s in c.cross_pairs] if "crosses" in c.groups else []
        return max(c.returns_lags + c.vol_windows + c.volume_windows + c.trend_windows + slow) + 1

    def _raw_fm(self, bars: Bars) -> np.ndarray:
        """Raw features feature-major [F, T] float32, warm-up rows NaN.

        Rows are computed CHUNK at a time, each chunk with `history` rows before it, so every
        intermediate stays small and in cache; chunk bounds are fixed multiples of CHUNK, so a
        row's bits never depend on later rows or on the series length.
        """
        n = len(bars)
        self._check_length(n, self.warmup, "")
        out = np.empty((self.n_features, _row_length(n)), dtype=np.float32)[:, :n]
        fill = self._filler(bars)
        for k0 in range(0, n, BATCH * CHUNK):
            k1 = min(k0 + BATCH * CHUNK, n)
            fill(k0, k1, out[:, k0:k1])
        for i, spec in enumerate(self.specs):
            out[i, : spec.warmup] = np.nan
        return out

    def _filler(self, bars: Bars) -> Callable[[int, int, Sequence[np.ndarray]], None]:
        """fill(k0, k1, dst): raw features of rows [k0, k1) into the float32 rows dst[i] (one
        per column, each k1 - k0 long; [F, k1 - k0] will do). k0 is a multiple of CHUNK, and
        k1 one too or n; calls come in order (the EMAs carry their state from chunk to chunk).

        Each CHUNK of rows is computed from its own segment (`Segment`); runs of whole chunks
        that have their full history before them go through together, up to BATCH at a time.
        Rows before a feature's warm-up are left undefined.
        """
        clock = SessionClock(self.session, int(bars.ts.min()), int(bars.ts.max()))
        ema_state: dict[int, float] = {}
        groups = [g for g in self.config.groups if g != "time"]
        names = self.names
        history = self.history

        def segment(k0: int, chunks: int, stop: int, dst: dict[str, np.ndarray]) -> None:
            lo = max(0, k0 - history)
            seg = Segment(bars, lo, stop, k0 - lo, chunks, CHUNK, self.config)
            if not seg.valid():  # checked here, on rows in cache; the full check names the row
                _check_prices(bars)
            for group in groups:
                if group == "trend":
                    seg.trend(dst, ema_state)
                else:
                    getattr(seg, group)(dst)

        def fill(k0: int, k1: int, dst: Sequence[np.ndarray]) -> None:
            rows = dict(zip(names, dst, strict=True))
            if "time" in self.config.groups:
                clock.write(bars.ts[k0:k1], rows)
            c0 = k0
            while c0 < k1:
                c1 = min(c0 + CHUNK, k1)
                if c0 >= history and c1 - c0 == CHUNK:  # a run of whole chunks
                    chunks = min((k1 - c0) // CHUNK, BATCH)
                    c1 = c0 + chunks * CHUNK
                else:
                    chunks = 1
                width = (c1 - c0) // chunks
                part = {k: v[c0 - k0 : c1 - k0].reshape(chunks, width) for k, v in rows.items()}
                segment(c0, chunks, c0 + width, part)
                c0 = c1

        return fill

    def _rolling(self, bars: Bars) -> np.ndarray:
        """`rolling_zscore(self._raw_fm(bars), ...)`, bit for bit, without the raw matrix: each
        chunk of raw features goes into a small window buffer and is scaled soon after, while
        in cache, by the same `RollingZScore` arithmetic.

        With a second core available (`second_core`), a worker thread scales chunks while this
        one computes the next raw chunks (numpy and torch release the GIL in their loops), and
        this thread takes a queued chunk itself whenever the worker falls behind. Each chunk is
        computed by the same code on the same rows either way, so the bits do not change.
        """
        n, f = len(bars), self.n_features
        w = self.config.norm_window
        out = np.empty((n, f), dtype=np.float32)
        out[: self.rolling_valid_from] = 0.0
        scaling = Scaling(
            lambda: RollingZScore(f, w, self.warmup, self.config.clip, self._fixed), out,
            threaded=second_core())
        fill = self._filler(bars)
        rolling_chunk = normalise.ROLLING_CHUNK
        step = BATCH * CHUNK
        # Raw rows go into a window buffer; when it is full, the w - 1 rows before the first
        # unscaled row (and the unscaled ones) move to the front of the other buffer, so the
        # worker can go on reading this one. One buffer does when nothing runs alongside.
        cap = step + rolling_chunk + w - 1
        bufs = [pair_buffer(f, cap) for _ in range(2 if scaling.threaded else 1)]
        readers: list[list[threading.Event]] = [[] for _ in bufs]  # jobs reading each buffer
        cur = 0
        base = 0  # row of the series held in bufs[cur][:, 0]
        done = 0  # first row not yet scaled, a multiple of ROLLING_CHUNK (or n)
        with scaling:
            k1 = 0
            while k1 < n:
                # a first step of one chunk gets the scaling going sooner
                k0, k1 = k1, min(k1 + (step if k1 else CHUNK), n)
                if k1 - base > cap:
                    nxt = (cur + 1) % len(bufs)
                    scaling.wait(readers[nxt])
                    readers[nxt] = []
                    keep = max(0, done - w + 1)
                    bufs[nxt][:, : k0 - keep] = bufs[cur][:, keep - base : k0 - base]
                    cur, base = nxt, keep
                buf = bufs[cur]
                fill(k0, k1, pair_rows(buf, f, k0 - base, k1 - base))
                while done < n and min(done + rolling_chunk, n) <= k1:
                    stop = min(done + rolling_chunk, n)
                    readers[cur].append(scaling.submit((buf, done, stop, base)))
                    done = stop
                # take on what the worker has not started once more than a step's worth waits
                scaling.help(-(-step // rolling_chunk))
            scaling.wait([job for jobs in readers for job in jobs])
        return out
