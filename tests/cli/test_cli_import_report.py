"""`data import` says what it did: prices snapped, a file that looks open-stamped (--stamp), a
file without volume; `--bars` defaults to a symbol's only stored series."""

from __future__ import annotations

from datetime import UTC, datetime

from .test_cli import run, run_json, write_bars_csv

MINUTE = 60 * 1_000_000_000
SESSION_OPEN = int(datetime(2023, 11, 12, 23, 0, tzinfo=UTC).timestamp()) * 1_000_000_000
"""Sunday 2023-11-12 17:00 Chicago: the CME Globex session's open (ES)."""


def write_session_csv(path, n=1380, price=4000.0, volume=True, start=SESSION_OPEN):
    """n 1-minute ES bars from `start` (default: stamped with their opens from the session open)."""
    head = "ts,open,high,low,close" + (",volume" if volume else "")
    rows = [f"{start + i * MINUTE},{price},{price + 0.5},{price - 0.5},{price}"
            + (",7" if volume else "") for i in range(n)]
    path.write_text("\n".join([head, *rows]) + "\n")
    return path


def test_snap_says_how_many_rows_and_prices_it_moved(capsys, tmp_path):
    src = write_session_csv(tmp_path / "off.csv", n=40, price=4000.1, start=SESSION_OPEN + MINUTE)
    code, out, err = run(capsys, "data", "import", str(src), "--symbol", "ES", "--off-grid", "snap")
    assert code == 0 and err == ""
    assert "note: ES 1min: snapped 40 of 40 rows (160 prices) to the 0.25 grid" in out
    doc = run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--off-grid", "snap")
    assert doc["snapped"] == {"rows": 40, "prices": 160}
    on_grid = write_bars_csv(tmp_path / "on.csv")
    assert run_json(capsys, "data", "import", str(on_grid), "--symbol", "NQ")["snapped"] == {
        "rows": 0, "prices": 0}


def test_snapped_ticks_are_counted(capsys, tmp_path):
    src = tmp_path / "ticks.csv"
    src.write_text("ts,price,size\n" + "".join(
        f"{SESSION_OPEN + i * 1_000_000_000},{4000.1 if i % 2 else 4000.0},1\n" for i in range(10)))
    doc = run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--kind", "ticks",
                   "--off-grid", "snap")
    assert doc["snapped"] == {"rows": 5, "prices": 5}
    assert any("snapped 5 of 10 rows" in n for n in doc["notes"])


def test_an_open_stamped_file_warns_and_stamp_open_shifts_it(capsys, tmp_path):
    src = write_session_csv(tmp_path / "es.csv")
    code, _, err = run(capsys, "data", "import", str(src), "--symbol", "ES")
    assert code == 0
    assert len(err.splitlines()) == 1 and err.startswith(f"warning: {src} looks stamped with bar "
                                                         "opens: bars on the session open")
    assert "--stamp open" in err
    doc = run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--stamp", "open",
                   "--replace")
    assert doc["stamp"] == "open" and doc["warnings"] == []
    shown = run_json(capsys, "data", "show", "ES", "--limit", "1")
    assert shown["rows"][0]["ts"] == SESSION_OPEN + 1380 * MINUTE  # the last bar's close
    silenced = run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--stamp", "close",
                        "--replace")
    assert silenced["stamp"] == "close" and silenced["warnings"] == []


def test_a_close_stamped_file_does_not_warn(capsys, tmp_path):
    src = write_session_csv(tmp_path / "es.csv", start=SESSION_OPEN + MINUTE)
    code, _, err = run(capsys, "data", "import", str(src), "--symbol", "ES")
    assert code == 0 and err == ""


def test_a_file_without_volume_imports_and_features_leave_out_volume(capsys, tmp_path,
                                                                     isolated_home):
    src = write_session_csv(tmp_path / "novol.csv", n=1200, volume=False,
                            start=SESSION_OPEN + MINUTE)
    doc = run_json(capsys, "data", "import", str(src), "--symbol", "ES")
    assert doc["bars"] == {"1min": 1200}
    assert any("no volume (0 on every bar)" in n for n in doc["notes"])
    assert run_json(capsys, "data", "show", "ES", "--limit", "1")["rows"][0]["volume"] == 0
    (isolated_home / "config.toml").write_text(
        '[features]\ngroups = ["returns", "volume"]\nnorm_window = 64\n')
    code, out, err = run(capsys, "features", "show", "ES", "--json")
    assert code == 0, err
    assert "left out the volume features" in err
    import json

    assert set(json.loads(out)["groups"]) == {"returns"}


def test_bars_defaults_to_the_only_stored_series(capsys, tmp_path):
    write_session_csv(tmp_path / "five.csv", n=40, start=SESSION_OPEN + 5 * MINUTE)
    src = tmp_path / "five.csv"
    run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--bars", "5min")
    assert run_json(capsys, "data", "show", "ES")["bars"] == "5min"
    out = tmp_path / "x.csv"
    assert run_json(capsys, "data", "export", "ES", "--out", str(out))["bars"] == "5min"
    run_json(capsys, "data", "import", str(src), "--symbol", "ES", "--bars", "ticks:500")
    code, _, err = run(capsys, "data", "show", "ES")
    assert code == 1
    assert err.strip() == ("error: ES has 2 bar series stored (5min, ticks:500): choose one with "
                           "--bars")
    assert run_json(capsys, "data", "show", "ES", "--bars", "ticks:500")["bars"] == "ticks:500"
    one_min = write_session_csv(tmp_path / "one.csv", n=40, start=SESSION_OPEN + MINUTE)
    run_json(capsys, "data", "import", str(one_min), "--symbol", "ES")
    assert run_json(capsys, "data", "show", "ES")["bars"] == "1min"  # several: 1min when stored
