"""DBN files written here with databento_dbn's own encoders, then read back."""

from __future__ import annotations

import databento_dbn as dbn
import pytest

from foxhunt.data.readers import read_bars, read_ticks
from foxhunt.errors import DataError, ValidationError

T0 = 1_378_072_800_000_000_000  # 2013-09-01T22:00:00Z
MIN = 60_000_000_000
PX = 1_000_000_000  # DBN prices are fixed-point 1e-9


def encode(path, schema, records, *, zstd: bool = False) -> None:
    meta = dbn.Metadata(
        dataset="GLBX.MDP3",
        start=T0,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=schema,
        symbols=["ESZ3"],
    )
    raw = bytes(meta) + b"".join(bytes(r) for r in records)
    if not zstd:
        path.write_bytes(raw)
        return
    with open(path, "wb") as f:
        out = dbn.Transcoder(f, dbn.Encoding.DBN, dbn.Compression.ZSTD)
        out.write(raw)
        out.finish()


def ohlcv(
    i: int, o: float, h: float, lo: float, c: float, v: int, instrument: int = 42
) -> dbn.OHLCVMsg:
    return dbn.OHLCVMsg(
        dbn.RType.OHLCV_1M,
        1,
        instrument,
        T0 + i * MIN,
        int(o * PX),
        int(h * PX),
        int(lo * PX),
        int(c * PX),
        v,
    )


def trade(ts: int, price: float, size: int, side, instrument: int = 42) -> dbn.TradeMsg:
    return dbn.TradeMsg(
        1, instrument, ts - 1_000, int(price * PX), size, dbn.Action.TRADE, side, 0, ts
    )


BARS = [
    ohlcv(0, 1632.25, 1633.00, 1632.00, 1632.75, 120),
    ohlcv(1, 1632.75, 1633.25, 1632.50, 1633.00, 80),
    ohlcv(3, 1633.00, 1633.00, 1632.25, 1632.50, 95),  # no trades in minute 2: no record
]
TRADES = [
    trade(T0 + 83_000_000, 1632.25, 3, dbn.Side.BID),
    trade(T0 + 83_000_000, 1632.00, 1, dbn.Side.ASK),
    trade(T0 + 100_000_000, 1632.25, 2, dbn.Side.NONE),
]


@pytest.mark.parametrize("name", ["es.ohlcv-1m.dbn", "es.ohlcv-1m.dbn.zst"])
def test_ohlcv_1m_bars_are_stamped_at_close(tmp_path, name):
    path = tmp_path / name
    encode(path, dbn.Schema.OHLCV_1M, BARS, zstd=name.endswith(".zst"))
    bars = read_bars(path)
    assert ((bars.ts - T0) // MIN).tolist() == [1, 2, 4]  # open time + 60 s
    assert bars.open.tolist() == [1632.25, 1632.75, 1633.0]
    assert bars.high.tolist() == [1633.0, 1633.25, 1633.0]
    assert bars.low.tolist() == [1632.0, 1632.5, 1632.25]
    assert bars.close.tolist() == [1632.75, 1633.0, 1632.5]
    assert bars.volume.tolist() == [120, 80, 95]


@pytest.mark.parametrize("name", ["es.trades.dbn", "es.trades.dbn.zst"])
def test_trades_become_ticks_with_aggressor_side(tmp_path, name):
    path = tmp_path / name
    encode(path, dbn.Schema.TRADES, TRADES, zstd=name.endswith(".zst"))
    ticks = read_ticks(path)
    assert ticks.ts.tolist() == [T0 + 83_000_000, T0 + 83_000_000, T0 + 100_000_000]  # ts_recv
    assert ticks.price.tolist() == [1632.25, 1632.0, 1632.25]
    assert ticks.size.tolist() == [3, 1, 2]
    assert ticks.side.tolist() == [1, -1, 0]


def test_wrong_schema_for_the_reader_says_which_to_use(tmp_path):
    path = tmp_path / "es.dbn"
    encode(path, dbn.Schema.TRADES, TRADES)
    with pytest.raises(
        DataError, match=r"es\.dbn: DBN schema trades holds no bars; bars come from ohlcv-1s"
    ):
        read_bars(path)
    encode(path, dbn.Schema.OHLCV_1M, BARS)
    with pytest.raises(
        DataError, match="DBN schema ohlcv-1m holds no ticks; ticks come from trades"
    ):
        read_ticks(path)


def test_records_mixed_with_other_types_are_picked_out(tmp_path):
    path = tmp_path / "live.dbn"
    status = dbn.SystemMsg(ts_event=T0, msg="Heartbeat")
    encode(path, None, [status, BARS[0], status, BARS[1]])
    assert read_bars(path).close.tolist() == [1632.75, 1633.0]


def test_interleaved_instruments_are_refused(tmp_path):
    path = tmp_path / "es-all.dbn"
    encode(
        path,
        dbn.Schema.OHLCV_1M,
        [
            ohlcv(0, 1, 2, 0.5, 1, 1, 42),
            ohlcv(0, 1, 2, 0.5, 1, 1, 43),
            ohlcv(1, 1, 2, 0.5, 1, 1, 42),
        ],
    )
    with pytest.raises(DataError, match=r"interleaves 2 instruments \(ids 42, 43\)"):
        read_bars(path)


def test_a_continuous_series_across_a_roll_is_fine(tmp_path):
    path = tmp_path / "es-c-0.dbn"
    encode(
        path, dbn.Schema.OHLCV_1M, [ohlcv(0, 1, 2, 0.5, 1, 1, 42), ohlcv(1, 1, 2, 0.5, 1, 1, 43)]
    )
    assert len(read_bars(path)) == 2


def test_bad_dbn_records_are_validated_with_row_numbers(tmp_path):
    path = tmp_path / "es.dbn"
    encode(path, dbn.Schema.OHLCV_1M, [BARS[0], ohlcv(1, 1632.75, 1632.0, 1632.5, 1633.0, 80)])
    with pytest.raises(ValidationError) as e:
        read_bars(path)
    assert (e.value.rule, e.value.row) == ("high below open or close", 2)


def test_not_a_dbn_file_and_no_records(tmp_path):
    junk = tmp_path / "junk.dbn"
    junk.write_bytes(b"hello world")
    with pytest.raises(DataError, match=r"junk\.dbn: not a DBN file"):
        read_bars(junk)
    junk.write_bytes(b"DBN\x03\x05\x00\x00\x00abcde")
    with pytest.raises(DataError, match=r"junk\.dbn: corrupt DBN metadata \(decoding error"):
        read_bars(junk)
    empty = tmp_path / "empty.dbn.zst"
    encode(empty, dbn.Schema.OHLCV_1M, [], zstd=True)
    with pytest.raises(DataError, match=r"empty\.dbn\.zst: no rows$"):
        read_bars(empty)
