"""The bundled ES trades load exactly as converted from mlfinpy's CSV."""

from datetime import UTC, datetime

import numpy as np

from foxhunt.data.sample import SAMPLE_BAR_SPECS, SAMPLE_SYMBOL, load_sample_ticks
from foxhunt.data.series import BarSpec, Ticks

# Computed once from mlfinpy 0.1.2 tick_data.csv (sum of the Volume column).
CSV_TOTAL_VOLUME = 1_844_058


def _ns(text: str) -> int:
    d = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return int(d.timestamp()) * 1_000_000_000 + d.microsecond * 1_000


def test_sample_ticks_match_the_source():
    ticks = load_sample_ticks()
    assert isinstance(ticks, Ticks)
    assert len(ticks) == 500_000
    assert ticks.side is None
    assert np.all(np.diff(ticks.ts) >= 0)
    # Chicago is UTC-5 (CDT) in September: the Sunday 17:00:00.083 open is 22:00:00.083 UTC.
    assert ticks.ts[0] == _ns("2013-09-01 22:00:00.083")
    assert ticks.ts[-1] == _ns("2013-09-03 18:51:44.578")
    assert ticks.price[0] == 1640.25 and ticks.price[-1] == 1631.25
    assert np.array_equal(ticks.price / 0.25, np.rint(ticks.price / 0.25))
    assert 1630.0 < ticks.price.min() and ticks.price.max() <= 1650.0
    assert np.all(ticks.size >= 1)
    assert int(ticks.size.sum()) == CSV_TOTAL_VOLUME


def test_sample_constants():
    assert SAMPLE_SYMBOL == "ES"
    assert [str(BarSpec.parse(s)) for s in SAMPLE_BAR_SPECS] == ["1min", "ticks:500"]
