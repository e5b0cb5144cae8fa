"""The report's input contract: clear errors that name the key, normalised optional fields."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.report import ReportDataError, normalise, render_report

from .builders import minimal, report


def _raises(data, *fragments: str) -> str:
    with pytest.raises(ReportDataError) as info:
        normalise(data)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    return text


def test_error_is_a_foxhunt_error():
    assert issubclass(ReportDataError, FoxhuntError)
    with pytest.raises(FoxhuntError):
        render_report({"title": "x"})


@pytest.mark.parametrize("key", ["title", "symbol", "bars"])
def test_missing_top_level_key_is_named(key):
    data = minimal()
    del data[key]
    _raises(data, "report data:", f"missing key '{key}'", "top level")


def test_top_level_must_be_a_dict_and_lists_must_be_lists():
    _raises([1, 2], "must be an object")
    _raises({**minimal(), "folds": {"fold": 0}}, "folds must be a list")


@pytest.mark.parametrize("key", ["name", "ts", "close", "equity"])
def test_missing_series_key_is_named(key):
    data = report(n_series=2)
    del data["series"][1][key]
    _raises(data, f"series[1] is missing key '{key}'")


def test_series_length_mismatch_names_the_column():
    data = report()
    data["series"][0]["equity"]["agent"] = data["series"][0]["equity"]["agent"][:-1]
    _raises(data, "series[0].equity['agent']", "has 399 values, expected 400")
    data = report()
    data["series"][0]["components"]["cost"].append(0.0)
    _raises(data, "series[0].components['cost']", "expected 400")


def test_non_numeric_values_are_named_with_their_index():
    data = report()
    data["series"][0]["close"][7] = "4000.25"
    _raises(data, "series[0].close[7]", "'4000.25'")
    data = report()
    data["folds"][0]["test"]["sharpe"] = [1, 2]  # non-scalars are left out, not an error
    assert "sharpe" not in normalise(data).folds[0].test


def test_trade_errors():
    data = report()
    del data["series"][0]["trades"][1]["entry_ts"]
    _raises(data, "series[0].trades[1] is missing key 'entry_ts'")
    data = report()
    data["series"][0]["trades"][0]["side"] = "sideways"
    _raises(data, "series[0].trades[0].side", "'long' or 'short'")


def test_direction_codes_are_checked():
    data = report()
    data["series"][0]["direction"][3] = 5
    _raises(data, "series[0].direction[3]", "0 (flat), 1 (long) or 2 (short)")


def test_timestamps_must_be_ordered_integers():
    data = report()
    data["series"][0]["ts"][10], data["series"][0]["ts"][11] = (
        data["series"][0]["ts"][11],
        data["series"][0]["ts"][10],
    )
    _raises(data, "series[0].ts", "time order")
    data = report()
    data["series"][0]["ts"] = []
    _raises(data, "series[0].ts", "non-empty")
    data = report()
    data["series"][0]["ts"][0] = "yesterday"
    _raises(data, "series[0].ts", "integer ns timestamps")


def test_fold_training_and_metrics_keys():
    data = report()
    del data["folds"][1]["test"]
    _raises(data, "folds[1] is missing key 'test'")
    data = report()
    data["folds"][0]["windows"]["test"] = [1]
    _raises(data, "folds[0].windows.test", "[start, stop]")
    data = report()
    del data["training"][3]["epoch"]
    _raises(data, "training[3] is missing key 'epoch'")
    data = report()
    data["training"][0]["loss"] = "high"
    _raises(data, "training[0].loss", "number or null")
    data = report()
    del data["metrics"][0]["policy"]
    _raises(data, "metrics[0] is missing key 'policy'")


def test_optional_fields_are_filled_in():
    d = normalise(minimal())
    assert d.folds == d.training == d.series == d.metrics == []
    assert d.generated  # defaults to now, ISO
    data = report(n_series=1)
    s = data["series"][0]
    for key in ("trades", "direction", "components"):
        del s[key]
    out = normalise(data).series[0]
    assert out.trades == [] and out.direction is None and out.components == {}
    f = data["folds"][0]
    for key in ("windows", "best_epoch", "val", "baselines"):
        del f[key]
    fold = normalise(data).folds[0]
    assert (
        fold.windows == {} and fold.best_epoch is None and fold.val == {} and fold.baselines == {}
    )


def test_none_and_nan_become_nan():
    data = report()
    data["series"][0]["equity"]["flat"][5] = None
    data["series"][0]["close"][6] = float("nan")
    data["folds"][0]["test"]["sharpe"] = None
    d = normalise(data)
    assert math.isnan(d.series[0].equity["flat"][5]) and math.isnan(d.series[0].close[6])
    assert math.isnan(d.folds[0].test["sharpe"])
    assert d.series[0].ts.dtype == np.int64


def test_numpy_arrays_are_accepted():
    data = report(n_series=1)
    s = data["series"][0]
    s["ts"] = np.asarray(s["ts"])
    s["close"] = np.asarray(s["close"])
    s["equity"] = {k: np.asarray(v) for k, v in s["equity"].items()}
    s["direction"] = np.asarray(s["direction"], dtype=np.int8)
    out = normalise(data).series[0]
    assert out.ts.size == out.close.size == out.direction.size == 400
    assert render_report(data).count('class="plot"') == 1 + 5 + 6  # rolling Sharpe
