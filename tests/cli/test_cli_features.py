"""`foxhunt features show/export`: groups listed, matrix written with ts, causal either way."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from .test_cli import run, run_json


def synth_store(capsys, n=3000):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", str(n), "--seed", "2")


def test_show_lists_features_and_groups(capsys):
    synth_store(capsys)
    doc = run_json(capsys, "features", "show", "SYN", "--bars", "1min")
    assert set(doc["groups"]) == {"returns", "trend", "crosses"}
    names = [f["name"] for f in doc["features"]]
    assert sorted(names) == sorted(n for g in doc["groups"].values() for n in g)
    assert doc["n_features"] == len(names) and doc["rows"] == 3000


def test_export_without_fit_until_is_causal(capsys, tmp_path):
    synth_store(capsys)
    out = tmp_path / "f.parquet"
    doc = run_json(capsys, "features", "export", "SYN", "--bars", "1min", "--out", str(out))
    table = pq.read_table(out)
    assert table.column_names[0] == "ts" and table.num_rows == 3000
    assert doc["features"] == table.num_columns - 1
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    assert meta["foxhunt.normalisation"] == "causal rolling"
    assert json.loads(meta["foxhunt.groups"].replace("'", '"'))["returns"]


def test_export_with_fit_until_uses_the_window_only(capsys, tmp_path):
    synth_store(capsys)
    shown = run_json(capsys, "data", "show", "SYN", "--bars", "1min", "--limit", "0")
    ts = [r["ts"] for r in shown["rows"]]
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    run_json(capsys, "features", "export", "SYN", "--fit-until", str(ts[2000]), "--out", str(a))
    run_json(capsys, "features", "export", "SYN", "--fit-until", str(ts[2001]), "--out", str(b))
    ta, tb = pq.read_table(a), pq.read_table(b)
    # one more training row changes the fitted statistics, hence every normalised row
    assert not np.array_equal(ta.column("ret_1").to_numpy(), tb.column("ret_1").to_numpy())
    assert table_meta(ta)["foxhunt.normalisation"].startswith("fitted before")


def table_meta(table):
    return {k.decode(): v.decode() for k, v in table.schema.metadata.items()}


def test_export_errors(capsys, tmp_path):
    synth_store(capsys)
    code, out, err = run(capsys, "features", "export", "SYN", "--out", str(tmp_path / "f.csv"))
    assert code == 1 and "Parquet" in err and out == ""
    code, out, err = run(capsys, "features", "export", "SYN", "--fit-until", "1990-01-01",
                         "--out", str(tmp_path / "f.parquet"))
    assert code == 1 and "--fit-until" in err and err.count("\n") == 1
