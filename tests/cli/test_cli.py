"""The CLI: `--json` prints exactly one JSON document on stdout; mistakes are one line on stderr."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foxhunt.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, *argv: str):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # fails if anything but one JSON document is on stdout


def write_bars_csv(path, n=50, start_ns=1_700_000_040_000_000_000, bad_row: int | None = None):
    rows = ["ts,open,high,low,close,volume"]
    price = 4000.0
    for i in range(n):
        ts = start_ns + i * 60_000_000_000
        o, c = price, price + (0.25 if i % 2 else -0.25)
        h, low = max(o, c) + 0.25, min(o, c) - 0.25
        if bad_row is not None and i == bad_row - 1:
            h = low - 1.0
        rows.append(f"{ts},{o},{h},{low},{c},{10 + i}")
        price = c
    path.write_text("\n".join(rows) + "\n")
    return path


def test_version_and_config_show_json(capsys, isolated_home):
    assert run_json(capsys, "version")["foxhunt"]
    doc = run_json(capsys, "config", "show")
    assert doc["home"] == str(isolated_home)
    assert doc["gpu_profile"]["name"] == "default"
    assert doc["gpu_profile"]["reason"] == "no CUDA device" or "CUDA" in doc["gpu_profile"]["reason"]
    assert doc["settings"]["features"]["clip"] > 0


def test_config_file_option_and_unknown_key(capsys, tmp_path):
    cfg = tmp_path / "x.toml"
    cfg.write_text("[data]\nstore = 'other.duckdb'\n")
    assert run_json(capsys, "--config", str(cfg), "config", "show")["store"].endswith("other.duckdb")
    cfg.write_text("[data]\nstor = 'x'\n")
    code, out, err = run(capsys, "--config", str(cfg), "config", "show")
    assert code == 1 and out == ""
    assert err.strip() == f"error: {cfg}: unknown key 'data.stor'"


def test_profile_env_var_is_reported(capsys, monkeypatch):
    monkeypatch.setenv("FOXHUNT_GPU_PROFILE", "h200")
    prof = run_json(capsys, "config", "show")["gpu_profile"]
    assert prof["name"] == "h200" and "FOXHUNT_GPU_PROFILE" in prof["reason"] and prof["atoms"] == 51


def test_import_list_show_export_round_trip(capsys, tmp_path):
    src = write_bars_csv(tmp_path / "es.csv")
    doc = run_json(capsys, "data", "import", str(src), "--symbol", "ES")
    assert doc["bars"] == {"1min": 50}
    assert doc["notes"] == [] and doc["grid"] == "on the 0.25 grid"
    again = run_json(capsys, "data", "import", str(src), "--symbol", "ES")
    assert again["bars"] == doc["bars"]
    assert [n.split(":")[0] for n in again["notes"]] == ["ES 1min"]
    assert "replaced 50 stored rows" in again["notes"][0]
    listing = run_json(capsys, "data", "list")["series"]
    assert [(r["symbol"], r["bars"], r["rows"]) for r in listing] == [("ES", "1min", 50)]
    shown = run_json(capsys, "data", "show", "ES", "--bars", "1min", "--limit", "5")
    assert shown["rows_in_range"] == 50 and len(shown["rows"]) == 5
    assert shown["rows"][-1]["volume"] == 59
    out_file = tmp_path / "out.parquet"
    assert run_json(capsys, "data", "export", "ES", "--bars", "1min", "--out", str(out_file))["rows"] == 50
    assert out_file.exists()


def test_show_with_time_range(capsys, tmp_path):
    run_json(capsys, "data", "import", str(write_bars_csv(tmp_path / "es.csv")), "--symbol", "ES")
    shown = run_json(capsys, "data", "show", "ES", "--from", "2023-11-14T22:20:00Z",
                     "--to", "2023-11-14T22:22:00+00:00", "--limit", "0")
    assert shown["rows_in_range"] == 3
    code, out, err = run(capsys, "data", "show", "ES", "--bars", "7min")
    assert code == 1 and out == "" and err.count("\n") == 1 and "no bars for ES 7min" in err


def test_bad_file_names_row_and_rule_and_writes_nothing(capsys, tmp_path):
    good = write_bars_csv(tmp_path / "good.csv")
    run_json(capsys, "data", "import", str(good), "--symbol", "ES")
    before = run_json(capsys, "data", "list")
    bad = write_bars_csv(tmp_path / "bad.csv", start_ns=1_700_100_000_000_000_000, bad_row=7)
    code, out, err = run(capsys, "data", "import", str(bad), "--symbol", "ES")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "row 7" in err and "high" in err
    assert "Traceback" not in err
    assert run_json(capsys, "data", "list") == before


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "import", "missing.csv", "--symbol", "ES"], "missing.csv"),
        (["data", "import", "x.csv", "--symbol", "NOPE"], "unknown symbol 'NOPE'"),
        (["data", "show", "ES", "--bars", "7min"], "no market store here yet; import data first"),
        (["data", "show", "ES", "--bars", "fortnightly"], "bar spec 'fortnightly'"),
        (["data", "show", "ES", "--from", "yesterday"], "--from 'yesterday'"),
    ],
)
def test_user_mistakes_are_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == ""
    assert needle in err and err.count("\n") == 1


def test_ticks_import_resamples_into_several_series(capsys, tmp_path):
    n = 2000
    ts = 1_700_000_000_000_000_000 + np.arange(n) * 250_000_000
    price = 4000 + 0.25 * np.cumsum(np.random.default_rng(0).choice([-1, 0, 1], n))
    (tmp_path / "t.csv").write_text(
        "ts,price,size\n" + "\n".join(f"{t},{p},{1 + i % 3}" for i, (t, p) in enumerate(zip(ts, price)))
    )
    doc = run_json(capsys, "data", "import", str(tmp_path / "t.csv"), "--symbol", "ES", "--kind", "ticks",
                   "--bars", "1min", "--bars", "ticks:100", "--bars", "volume:500")
    assert doc["ticks"] == n
    assert doc["bars"]["ticks:100"] == 20 and doc["bars"]["1min"] == 9 and doc["bars"]["volume:500"] == 7


def test_sample_loads_ticks_and_bars(capsys):
    rows = run_json(capsys, "data", "sample")["series"]
    by = {r["bars"]: r["rows"] for r in rows}
    assert by["ticks (raw)"] == 500_000 and by["ticks:500"] == 1000 and by["1min"] > 2000


def test_synth_stores_bars_with_summary(capsys):
    doc = run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "2000", "--seed", "3",
                   "--signal-strength", "0.3")
    assert doc["series"] == "1min" and doc["bars"] == 2000 and doc["signal_strength"] == 0.3 and doc["oracle_sharpe"] > 0
    assert run_json(capsys, "data", "list")["series"][0]["rows"] == 2000
