"""The real ES trades shipped with foxhunt, so a fresh install has market data to try.

500,000 E-mini S&P 500 trades from 2013-09-01 22:00 to 2013-09-03 18:51 UTC (mlfinpy 0.1.2,
MIT; see `bundled/README.md`). Stored as int32 ticks plus the tick size in the parquet
metadata, which reproduces every price exactly.
"""

from __future__ import annotations

from importlib import resources

import pyarrow.parquet as pq

from foxhunt.data.series import Ticks
from foxhunt.errors import DataError

SAMPLE_SYMBOL = "ES"
SAMPLE_BAR_SPECS: tuple[str, ...] = ("1min", "ticks:500")
SAMPLE_FILE = "es_trades_2013-09.parquet"


def load_sample_ticks() -> Ticks:
    """The bundled ES trades as `Ticks` (no aggressor side: the source has none)."""
    ref = resources.files("foxhunt.data").joinpath("bundled", SAMPLE_FILE)
    try:
        with ref.open("rb") as fh:
            table = pq.read_table(fh)
    except (FileNotFoundError, OSError) as exc:
        raise DataError(
            f"bundled sample {SAMPLE_FILE} is missing or unreadable ({exc}); reinstall foxhunt"
        ) from None
    meta = table.schema.metadata or {}
    try:
        tick_size = float(meta[b"foxhunt.tick_size"])
    except (KeyError, ValueError):
        raise DataError(f"bundled sample {SAMPLE_FILE} has no tick size; reinstall foxhunt") from None
    return Ticks(
        table.column("ts").to_numpy(),
        table.column("price").to_numpy() * tick_size,
        table.column("size").to_numpy(),
    )
