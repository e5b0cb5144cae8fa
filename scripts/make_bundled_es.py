"""Convert mlfinpy's ES trade sample into the compact parquet file foxhunt ships.

One-off and reproducible; never imported at run time, and mlfinpy need not be installed:

    pip download --no-deps mlfinpy==0.1.2 -d /tmp/mlf && unzip -q /tmp/mlf/*.whl -d /tmp/mlf/x
    python scripts/make_bundled_es.py /tmp/mlf/x/mlfinpy/dataset/data/tick_data.csv

The CSV (`DateTime,Price,Volume`) has naive CME Globex wall-clock times (America/Chicago);
they become int64 ns UTC through the zone's own offsets, so the conversion stays right across
a DST change. Prices are stored as int32 ticks (tick size in the file metadata), timestamps
delta-encoded, everything zstd-compressed; the script re-reads its output and checks that
every row round-trips exactly before it reports success.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

SOURCE_TZ = "America/Chicago"
TICK_SIZE = 0.25
MINUTE_NS = 60_000_000_000
DEFAULT_OUT = (
    Path(__file__).resolve().parents[1] / "src/foxhunt/data/bundled/es_trades_2013-09.parquet"
)


def local_to_utc_ns(local_ns: np.ndarray, tz: str) -> np.ndarray:
    """Naive wall-clock ns -> UTC ns; refuses times a DST change makes ambiguous or nonexistent."""
    zone = ZoneInfo(tz)
    minutes, inverse = np.unique(local_ns // MINUTE_NS, return_inverse=True)
    offsets = np.empty(len(minutes), dtype=np.int64)
    epoch = datetime(1970, 1, 1)
    for i, m in enumerate(minutes.tolist()):
        wall = epoch + timedelta(minutes=m)
        first = wall.replace(tzinfo=zone, fold=0).utcoffset()
        second = wall.replace(tzinfo=zone, fold=1).utcoffset()
        if first != second:
            raise SystemExit(f"{wall} is ambiguous or nonexistent in {tz}; cannot convert")
        offsets[i] = int(first.total_seconds()) * 1_000_000_000
    return local_ns - offsets[inverse]


def convert(csv_path: Path) -> tuple[pa.Table, dict[str, np.ndarray]]:
    raw = pacsv.read_csv(
        csv_path,
        convert_options=pacsv.ConvertOptions(
            column_types={"DateTime": pa.timestamp("ns"), "Price": pa.float64(), "Volume": pa.int64()},
            include_columns=["DateTime", "Price", "Volume"],
        ),
    )
    local_ns = raw.column("DateTime").to_numpy().astype(np.int64)
    price = raw.column("Price").to_numpy()
    volume = raw.column("Volume").to_numpy()

    ticks = np.rint(price / TICK_SIZE)
    if not np.array_equal(ticks * TICK_SIZE, price):
        bad = int(np.flatnonzero(ticks * TICK_SIZE != price)[0])
        raise SystemExit(f"row {bad + 1}: price {price[bad]} is off the {TICK_SIZE} tick grid")
    if volume.min() <= 0 or volume.max() > np.iinfo(np.int32).max:
        raise SystemExit("volume outside the positive int32 range")
    ts = local_to_utc_ns(local_ns, SOURCE_TZ)
    if np.any(np.diff(ts) < 0):
        raise SystemExit("timestamps are not in time order")

    first = datetime.fromtimestamp(ts[0] / 1e9, tz=timezone.utc).isoformat()
    last = datetime.fromtimestamp(ts[-1] / 1e9, tz=timezone.utc).isoformat()
    metadata = {
        "foxhunt.symbol": "ES",
        "foxhunt.tick_size": repr(TICK_SIZE),
        "foxhunt.price_unit": "ticks",
        "foxhunt.source": "mlfinpy==0.1.2 mlfinpy/dataset/data/tick_data.csv (MIT)",
        "foxhunt.source_tz": SOURCE_TZ,
        "foxhunt.rows": str(len(ts)),
        "foxhunt.first_ts_utc": first,
        "foxhunt.last_ts_utc": last,
    }
    table = pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "price": pa.array(ticks.astype(np.int32), pa.int32()),
            "size": pa.array(volume.astype(np.int32), pa.int32()),
        }
    ).replace_schema_metadata(metadata)
    return table, {"ts": ts, "price": price, "size": volume}


def write(table: pa.Table, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        out,
        compression="zstd",
        compression_level=19,
        use_dictionary=["price", "size"],
        column_encoding={"ts": "DELTA_BINARY_PACKED"},
        row_group_size=len(table),
    )


def verify(out: Path, expected: dict[str, np.ndarray]) -> None:
    back = pq.read_table(out)
    tick = float(back.schema.metadata[b"foxhunt.tick_size"])
    if not (
        np.array_equal(back.column("ts").to_numpy(), expected["ts"])
        and np.array_equal(back.column("price").to_numpy() * tick, expected["price"])
        and np.array_equal(back.column("size").to_numpy(), expected["size"])
    ):
        raise SystemExit(f"{out}: written file does not round-trip")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="path to mlfinpy's tick_data.csv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    table, expected = convert(args.csv)
    write(table, args.out)
    verify(args.out, expected)
    meta = table.schema.metadata
    print(
        f"wrote {args.out} ({args.out.stat().st_size:,} bytes): {table.num_rows:,} trades, "
        f"{meta[b'foxhunt.first_ts_utc'].decode()} .. {meta[b'foxhunt.last_ts_utc'].decode()}, "
        f"total volume {int(expected['size'].sum()):,}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
