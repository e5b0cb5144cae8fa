"""Contract months: symbols, expiries, imports that store each month under its root, and the
listing by root (docs/futures.md#contract-months)."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from foxhunt.data.contracts import (
    FuturesContract,
    is_contract_symbol,
    parse_symbol,
    resolve,
    session_days,
)
from foxhunt.data.expiry import ExpiryRule
from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.data.store import MarketStore
from foxhunt.errors import ConfigError, DataError

from ..cli.test_cli import run, run_json
from .contract_set import es_contract_set, write_contract_csvs

REG = InstrumentRegistry.load()


@pytest.mark.parametrize("text,ref,expected", [
    ("ESH4", 2013, ("ES", 2014, 3)),
    ("ESZ3", 2013, ("ES", 2013, 12)),
    ("ESH3", 2013, ("ES", 2013, 3)),
    ("ESH4", 2019, ("ES", 2024, 3)),
    ("ESH24", 2023, ("ES", 2024, 3)),
    ("ESH98", 1997, ("ES", 1998, 3)),
    ("ES H4", 2023, ("ES", 2024, 3)),
    ("esm24", 2024, ("ES", 2024, 6)),
    ("ESU2024", 1990, ("ES", 2024, 9)),
    ("MESZ23", 2023, ("MES", 2023, 12)),
    ("6EM24", 2024, ("6E", 2024, 6)),
    ("ZNN4", 2024, ("ZN", 2024, 7)),
    ("GCF25", 2024, ("GC", 2025, 1)),
])
def test_raw_symbols_parse_to_root_year_and_month(text, ref, expected):
    assert parse_symbol(text, ref) == expected


@pytest.mark.parametrize("bad", ["ES", "ESA4", "ESH", "H4", "ES-H4", "", "ESH123"])
def test_a_bad_symbol_is_one_line_naming_it(bad):
    with pytest.raises(DataError) as e:
        parse_symbol(bad, 2024)
    text = str(e.value)
    assert "\n" not in text and repr(bad) in text and "month code" in text


def test_a_contract_has_a_canonical_symbol_and_sorts_by_expiry():
    h = FuturesContract("ES", 2024, 3, date(2024, 3, 15))
    z3 = FuturesContract("ES", 2023, 12, date(2023, 12, 15))
    assert (h.symbol, h.code, str(z3)) == ("ESH24", "H", "ESZ23")
    assert sorted([h, z3]) == [z3, h]
    with pytest.raises(DataError, match="month 13"):
        FuturesContract("ES", 2024, 13, date(2024, 12, 1))


def test_a_known_instrument_is_not_read_as_a_contract():
    assert is_contract_symbol("ESH4", REG) and is_contract_symbol("MESZ23", REG)
    assert not is_contract_symbol("MES", REG) and not is_contract_symbol("ES", REG)
    assert not is_contract_symbol("XXH4", REG)  # unknown root


@pytest.mark.parametrize("root,month,year,expected", [
    ("ES", 3, 2024, date(2024, 3, 15)),   # third Friday
    ("ES", 6, 2024, date(2024, 6, 21)),
    ("ES", 9, 2024, date(2024, 9, 20)),
    ("ES", 12, 2024, date(2024, 12, 20)),
    ("ES", 9, 2013, date(2013, 9, 20)),   # the bundled sample's contract, ESU3
    ("CL", 3, 2024, date(2024, 2, 20)),   # 25 Feb is a Sunday: 4 business days before it
    ("CL", 5, 2024, date(2024, 4, 22)),   # 25 Apr a Thursday: 3 business days before it
    ("6E", 3, 2024, date(2024, 3, 18)),   # 2 business days before the third Wednesday
    ("GC", 12, 2023, date(2023, 12, 27)),  # third last business day
    ("ZN", 9, 2024, date(2024, 9, 19)),   # 7 business days before the last business day
])
def test_expiry_rules_give_the_exchanges_last_trading_days(root, month, year, expected):
    assert REG.get(root).expiry.expiry(year, month) == expected


def test_the_rule_knows_no_holidays_which_is_why_definitions_win():
    # Good Friday 2008 was the third Friday of March: CME moved ES's expiry to Thursday 20th.
    assert REG.get("ES").expiry.expiry(2008, 3) == date(2008, 3, 21)
    c = resolve("ESH8", REG, _ns(2007, 12, 1), expiry=date(2008, 3, 20))
    assert (c.expiry, c.expiry_source) == (date(2008, 3, 20), "definition")


def test_expiry_rules_in_words_and_bad_rules_refused(tmp_path):
    assert REG.get("ES").expiry.describe() == "3rd Friday of the contract month"
    assert "month before the contract month" in REG.get("CL").expiry.describe()
    f = tmp_path / "instruments.toml"
    f.write_text('[FX]\ntick_size = 1.0\npoint_value = 1.0\ncommission = 0.0\n'
                 'expiry = { anchor = "nth_weekday", n = 5 }\n')
    with pytest.raises(ConfigError, match=r"\[FX\].*n must be 1..4"):
        InstrumentRegistry.load(f)
    with pytest.raises(ValueError, match="anchor"):
        ExpiryRule(anchor="easter")


def test_a_month_the_exchange_does_not_list_is_refused():
    with pytest.raises(DataError, match=r"'ESX4': ES lists contract months H M U Z, not X"):
        resolve("ESX4", REG, _ns(2024, 1, 2))
    assert resolve("CLX4", REG, _ns(2024, 1, 2)).symbol == "CLX24"  # CL lists every month


def test_resolve_needs_a_known_root_and_an_expiry(tmp_path):
    with pytest.raises(DataError, match=r"'XXH4': unknown root 'XX'"):
        resolve("XXH4", REG, _ns(2024, 1, 2))
    f = tmp_path / "instruments.toml"
    f.write_text('[FX]\ntick_size = 1.0\npoint_value = 1.0\ncommission = 0.0\n')
    with pytest.raises(DataError, match=r"FX has no expiry rule.*expiration column"):
        resolve("FXH4", InstrumentRegistry.load(f), _ns(2024, 1, 2))
    c = resolve("ESH4", REG, _ns(2023, 6, 1))
    assert (c.symbol, c.expiry, c.expiry_source) == ("ESH24", date(2024, 3, 15), "rule")


def test_session_days_follow_the_session_close():
    chicago = ZoneInfo("America/Chicago")
    ts = np.array([_ns(2024, 3, 4, 16, tz=chicago), _ns(2024, 3, 4, 18, tz=chicago),
                   _ns(2024, 3, 5, 9, tz=chicago)])
    days = session_days(ts, REG.get("ES").session)
    assert [str(np.datetime64(int(d), "D")) for d in days] == [
        "2024-03-04", "2024-03-05", "2024-03-05"]  # the 18:00 bar opens Tuesday's session


# -- imports ------------------------------------------------------------------------------------


def _listing(capsys) -> list[dict]:
    return run_json(capsys, "data", "list")["series"]


def test_importing_files_named_after_their_contracts_stores_each_under_its_root(capsys, tmp_path):
    paths = write_contract_csvs(tmp_path)
    doc = run_json(capsys, "data", "import", *map(str, paths), "--symbol", "ES")
    assert [c["symbol"] for c in doc["contracts"]] == ["ESH24", "ESM24", "ESU24", "ESZ24"]
    assert [c["expiry"] for c in doc["contracts"]] == ["2024-03-15", "2024-06-21",
                                                       "2024-09-20", "2024-12-20"]
    assert {c["expiry_source"] for c in doc["contracts"]} == {"rule"}
    assert doc["bars"] == {"1d": 54 + 102 + 103 + 102}
    rows = _listing(capsys)
    assert [(r["root"], r["symbol"]) for r in rows] == [("ES", "ESH24"), ("ES", "ESM24"),
                                                       ("ES", "ESU24"), ("ES", "ESZ24")]
    assert rows[0]["contract"]["expiry"] == "2024-03-15"
    code, out, _ = run(capsys, "data", "list")
    assert code == 0 and "ESH24" in out and "expires 2024-03-15, by rule" in out
    home = MarketStore(_store(), read_only=True)
    with home:
        assert [c.symbol for c in home.contracts("ES")] == ["ESH24", "ESM24", "ESU24", "ESZ24"]
        ts, oi = home.read_open_interest("ESM24", "1d")
        assert len(ts) == 102 and oi.max() == 2_000_000


def test_one_file_with_a_symbol_column_is_split_by_contract(capsys, tmp_path):
    contracts = es_contract_set()[:2]
    rows = ["ts,symbol,open,high,low,close,volume,expiration"]
    for s in contracts:
        b = s.bars
        rows += [f"{t},ES{s.contract.code}4,{o},{h},{lo},{c},{v:.0f},"
                 f"{s.contract.expiry.isoformat()}"
                 for t, o, h, lo, c, v in zip(b.ts, b.open, b.high, b.low, b.close, b.volume,
                                               strict=True)]
    header, body = rows[0], sorted(rows[1:])  # interleaved by time, as a vendor file comes
    path = tmp_path / "es_contracts.csv"
    path.write_text("\n".join([header, *body]) + "\n")
    doc = run_json(capsys, "data", "import", str(path), "--symbol", "ES")
    assert [(c["symbol"], c["rows"], c["expiry_source"]) for c in doc["contracts"]] == [
        ("ESH24", 54, "definition"), ("ESM24", 102, "definition")]
    with MarketStore(_store(), read_only=True) as store:
        bars = store.read_bars("ESM24", "1d")
        assert np.array_equal(bars.close, contracts[1].bars.close)


def test_a_contract_symbol_imports_one_file_as_that_month(capsys, tmp_path):
    path = write_contract_csvs(tmp_path)[1]
    renamed = path.with_name("june.csv")
    path.rename(renamed)
    doc = run_json(capsys, "data", "import", str(renamed), "--symbol", "ESM4")
    assert doc["symbol"] == "ES" and [c["symbol"] for c in doc["contracts"]] == ["ESM24"]
    assert [r["symbol"] for r in _listing(capsys)] == ["ESM24"]


def test_ticks_of_a_contract_month_are_stored_under_it(capsys, tmp_path):
    path = tmp_path / "esu3_trades.csv"
    t0 = _ns(2013, 9, 3, 14)
    path.write_text("ts,price,size\n" + "".join(f"{t0 + i * 10**9},1632.25,{i + 1}\n"
                                                 for i in range(5)))
    doc = run_json(capsys, "data", "import", str(path), "--symbol", "ESU3", "--kind", "ticks",
                   "--bars", "1min")
    assert doc["symbol"] == "ESU13" and doc["ticks"] == 5
    rows = _listing(capsys)
    assert {(r["root"], r["symbol"], r["bars"]) for r in rows} == {
        ("ES", "ESU13", "ticks (raw)"), ("ES", "ESU13", "1min")}
    assert rows[0]["contract"]["expiry"] == "2013-09-20"  # the bundled sample's contract


def test_a_plain_import_is_unchanged_by_contract_months(capsys, tmp_path):
    from ..cli.test_cli import write_bars_csv

    doc = run_json(capsys, "data", "import", str(write_bars_csv(tmp_path / "es.csv")),
                   "--symbol", "ES")
    assert "contracts" not in doc and doc["bars"] == {"1min": 50}
    assert [(r["root"], r["symbol"]) for r in _listing(capsys)] == [("ES", "ES")]


@pytest.mark.parametrize("case,message", [
    ("unnamed", r"es_data.csv \(one of 2 files\): cannot tell which contract month it holds"),
    ("bad_symbol", r"'ESA4' is not a contract symbol"),
    ("other_root", r"'NQH4' is a NQ contract, not ES; import it with --symbol NQ"),
    ("twice", r"contract ESH24 also comes from"),
    ("contract_and_files", r"--symbol ESH4 names one contract month but 2 files"),
])
def test_bad_contract_imports_are_one_line_and_write_nothing(capsys, tmp_path, case, message):
    a, b = write_contract_csvs(tmp_path)[:2]
    symbol = "ES"
    if case == "unnamed":
        b = b.rename(b.with_name("es_data.csv"))
    elif case in ("bad_symbol", "other_root"):
        text = b.read_text().splitlines()
        bad = "ESA4" if case == "bad_symbol" else "NQH4"
        b.write_text("\n".join([text[0] + ",symbol", *(f"{r},{bad}" for r in text[1:])]) + "\n")
    elif case == "twice":
        b = b.rename(b.with_name("ESH4_again.csv"))
        b.write_text(a.read_text())
    else:
        symbol = "ESH4"
    code, out, err = run(capsys, "data", "import", str(a), str(b), "--symbol", symbol)
    assert code == 1 and out == ""
    line = err.strip()
    assert "\n" not in line and __import__("re").search(message, line), line
    assert not _store().exists() or _listing(capsys) == []


def test_an_expiration_that_differs_within_a_contract_is_refused(capsys, tmp_path):
    path = tmp_path / "ESH4.csv"
    path.write_text("ts,open,high,low,close,volume,expiration\n"
                    f"{_ns(2024, 3, 1, 22)},5000,5001,4999,5000.5,10,2024-03-15\n"
                    f"{_ns(2024, 3, 4, 22)},5000,5001,4999,5000.5,10,2024-03-14\n")
    code, _, err = run(capsys, "data", "import", str(path), "--symbol", "ESH4", "--bars", "1d")
    assert code == 1 and "expiration differs between rows of one contract" in err


def _dbn_contracts(tmp_path, *, mappings: bool, spread: bool = False):
    """ESH24 and ESM24 of the synthetic set as one DBN ohlcv-1d file, the two instruments
    interleaved by time as Databento sends them (ids 11 and 12, a spread 13), and their
    instrument definitions as a second file."""
    from types import SimpleNamespace

    import databento_dbn as dbn

    px, day = 1_000_000_000, 86_400 * 10**9
    series = es_contract_set()[:2]
    records = []
    for iid, s in zip((11, 12), series, strict=True):
        b = s.bars
        records += [(int(t) - day, iid, dbn.OHLCVMsg(dbn.RType.OHLCV_1D, 1, iid, int(t) - day,
                                                     int(o * px), int(h * px), int(lo * px),
                                                     int(c * px), int(v)))
                    for t, o, h, lo, c, v in zip(b.ts, b.open, b.high, b.low, b.close,
                                                 b.volume, strict=True)]
    if spread:
        t = int(series[1].bars.ts[0]) - day
        records.append((t, 13, dbn.OHLCVMsg(dbn.RType.OHLCV_1D, 1, 13, t, 12 * px, 13 * px,
                                            12 * px, 13 * px, 5)))
    records.sort(key=lambda r: (r[0], r[1]))
    maps = [SimpleNamespace(raw_symbol=sym, intervals=[SimpleNamespace(
        start_date=date(2024, 1, 1), end_date=date(2024, 12, 31), symbol=str(iid))])
        for sym, iid in (("ESH4", 11), ("ESM4", 12), ("ESM4-ESU4", 13))] if mappings else []
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.OHLCV_1D,
                        symbols=["ESH4", "ESM4"], mappings=maps)
    bars = tmp_path / "glbx-es.ohlcv-1d.dbn"
    bars.write_bytes(bytes(meta) + b"".join(bytes(r[2]) for r in records))
    defs = tmp_path / "glbx-es.definition.dbn"
    definitions = [dbn.InstrumentDefMsg(1, iid, 0, 0, 250_000_000, px, sym, "ES", "FUT",
                                        dbn.InstrumentClass.FUTURE,
                                        dbn.SecurityUpdateAction.ADD, expiration=exp)
                   for iid, sym, exp in ((11, "ESH4", _ns(2024, 3, 15, 14)),
                                         (12, "ESM4", _ns(2024, 6, 20, 14)))]
    defs.write_bytes(bytes(dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.PARENT,
                                        stype_out=dbn.SType.INSTRUMENT_ID,
                                        schema=dbn.Schema.DEFINITION, symbols=["ES.FUT"]))
                     + b"".join(bytes(d) for d in definitions))
    return bars, defs


def test_a_dbn_file_of_several_contracts_is_split_by_its_symbology(capsys, tmp_path):
    bars, _ = _dbn_contracts(tmp_path, mappings=True, spread=True)
    doc = run_json(capsys, "data", "import", str(bars), "--symbol", "ES")
    assert [(c["symbol"], c["rows"], c["expiry"], c["expiry_source"]) for c in doc["contracts"]] \
        == [("ESH24", 54, "2024-03-15", "rule"), ("ESM24", 102, "2024-06-21", "rule")]
    with MarketStore(_store(), read_only=True) as store:
        stored = store.read_bars("ESM24", "1d")
    expected = es_contract_set()[1].bars
    assert np.array_equal(stored.close, expected.close)
    assert np.array_equal(stored.ts, expected.ts)  # ohlcv-1d opens + 1 day: the closes


def test_dbn_definitions_give_the_symbols_and_the_expiries(capsys, tmp_path):
    bars, defs = _dbn_contracts(tmp_path, mappings=False)
    code, _, err = run(capsys, "data", "import", str(bars), "--symbol", "ES")
    assert code == 1 and "instrument 11 has no raw symbol in the file's symbology mappings" in err
    doc = run_json(capsys, "data", "import", str(defs), str(bars), "--symbol", "ES")
    # the definitions' expirations win over the rule (ESM4's here a day early, as on a holiday)
    assert [(c["symbol"], c["expiry"], c["expiry_source"]) for c in doc["contracts"]] == [
        ("ESH24", "2024-03-15", "definition"), ("ESM24", "2024-06-20", "definition")]
    code, _, err = run(capsys, "data", "import", str(defs), "--symbol", "ES")
    assert code == 1 and "instrument definitions only" in err


def _store():
    import os
    from pathlib import Path

    return Path(os.environ["FOXHUNT_HOME"]) / "store.duckdb"


def _ns(y, m, d, h=0, tz=None) -> int:
    return int(datetime(y, m, d, h, tzinfo=tz or ZoneInfo("UTC")).timestamp()) * 10**9
