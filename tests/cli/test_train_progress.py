"""Issue 34, point 2: training says how long it will take, and `--budget` changes the work."""

from __future__ import annotations

import pytest

from foxhunt.cli.train import RunClock, _duration, apply_budget
from foxhunt.errors import ConfigError
from foxhunt.profiles import shipped_profiles
from foxhunt.training.config import TrainingSpec

H100 = shipped_profiles()["h100"]


def test_quick_trains_a_tenth_of_every_folds_updates_on_any_data():
    full = TrainingSpec().sized_for(H100)
    quick, why = apply_budget(full, "quick")
    assert why == "--budget quick: a 10th of each fold's updates"
    for bars in (696, 12_582, 100_000):  # under the cap, at it, over it
        assert quick.train.for_fold(bars)[0].updates_per_fold == pytest.approx(
            full.train.for_fold(bars)[0].updates_per_fold / 10, rel=0.03)


def test_full_is_the_shipped_budget_and_a_number_sets_the_updates_a_fold():
    full = TrainingSpec().sized_for(H100)
    assert apply_budget(full, "full") == (full, None)
    assert apply_budget(full, None) == (full, None)
    set_, why = apply_budget(full, "1200")
    assert why == "--budget 1200: updates a fold as set"
    assert all(set_.train.for_fold(b)[0].updates_per_fold == 1200 for b in (696, 100_000))


@pytest.mark.parametrize("bad", ["fast", "-3", "0", "1e4", ""])
def test_a_bad_budget_is_one_line_naming_the_option(bad):
    with pytest.raises(ConfigError, match=r"^--budget: .* is not quick, full or a number"):
        apply_budget(TrainingSpec().sized_for(H100), bad)


class Budget:
    def __init__(self, updates):
        self.updates = tuple(updates)
        self.total_updates = sum(self.updates)


def test_the_clock_counts_the_runs_updates_and_projects_the_rest(monkeypatch):
    now = iter([100.0, 110.0, 130.0])
    monkeypatch.setattr("foxhunt.cli.train.time.perf_counter", lambda: next(now))
    clock = RunClock({0: Budget([10, 10]), 1: Budget([30, 30])})
    assert clock.total == 80
    assert clock.tick(0, 0) == (10, 1.0, 70.0)  # 10 updates in 10 s: 70 left at 1 a second
    assert clock.tick(1, 0) == (50, 50 / 30, 30 / (50 / 30))


def test_a_resumed_run_times_only_what_this_process_trains(monkeypatch):
    now = iter([0.0, 20.0])
    monkeypatch.setattr("foxhunt.cli.train.time.perf_counter", lambda: next(now))
    clock = RunClock({0: Budget([10, 10]), 1: Budget([30, 30])})
    done, rate, left = clock.tick(1, 1)  # folds 0 and epoch 0 of fold 1 were done before
    assert (done, rate, left) == (80, 1.5, 0.0)


def test_durations_read_as_a_clock():
    assert [_duration(s) for s in (4.4, 75, 3_725)] == ["4s", "1m15s", "1h02m"]


def test_training_bars_without_volume_leaves_out_the_volume_features(capsys, tmp_path,
                                                                     isolated_home):
    """A series imported without volume trains on the configured groups it can feed, and says
    so; source.json records the features it was trained on."""
    import json

    import numpy as np

    from .test_cli import run, run_json
    from .test_cli_train_backtest import TINY

    rng = np.random.default_rng(0)
    close = 4000 + np.round(np.cumsum(rng.normal(0, 1, 3_000)) * 4) / 4
    ts0 = 1_700_000_000 * 10**9
    rows = [f"{ts0 + i * 60 * 10**9},{c},{c + 0.5},{c - 0.5},{c}" for i, c in enumerate(close)]
    src = tmp_path / "novol.csv"
    src.write_text("ts,open,high,low,close\n" + "\n".join(rows) + "\n")
    run_json(capsys, "data", "import", str(src), "--symbol", "ES")
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY + '\n[features]\ngroups = ["returns", "volume"]\nnorm_window = 64\n')
    code, _, err = run(capsys, "--config", str(cfg), "train", "ES", "--folds", "2",
                       "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert "note: the bars carry no volume (0 on every bar): left out the volume features" in err
    source = json.loads((tmp_path / "run" / "source.json").read_text())
    assert source["features"]["groups"] == ["returns"]


def test_steps_without_a_count_show_a_spinner_and_their_time_on_a_terminal(capsys, tmp_path,
                                                                          monkeypatch,
                                                                          isolated_home):
    from rich.console import Console

    from foxhunt.cli import common

    from .test_cli import run, write_bars_csv

    src = write_bars_csv(tmp_path / "bars.csv", n=1_600)
    code, _, err = run(capsys, "data", "import", str(src), "--symbol", "ES")
    assert code == 0, err
    assert "importing bars.csv as ES" not in err  # a log: the result lines say it
    monkeypatch.setattr(common, "err", Console(stderr=True, force_terminal=True, width=120))
    code, _, err = run(capsys, "features", "show", "ES")
    assert code == 0, err
    assert "building features on ES" in err and " s\n" in err


def test_a_run_is_estimated_from_the_last_run_of_its_shape_on_this_machine(tmp_path):
    import torch

    from foxhunt.cli.train import PastRates

    spec = TrainingSpec().sized_for(shipped_profiles()["default"])
    rates, cpu = PastRates(tmp_path), torch.device("cpu")
    assert rates.estimate(spec, cpu, 1_000) is None  # first run: nothing to go on
    rates.record(spec, cpu, 2_000, {"setup_compile_s": 5.0, "total_s": 25.0})
    assert rates.estimate(spec, cpu, 1_000) == 5.0 + 1_000 * 20.0 / 2_000
    wider = spec.with_overrides({"agent": {"hidden": 1024}}, "test")
    assert rates.estimate(wider, cpu, 1_000) is None  # another shape, another speed


def test_the_second_run_says_how_long_it_will_take_before_it_starts(capsys, tmp_path,
                                                                     isolated_home):
    from .test_cli import run, run_json
    from .test_cli_train_backtest import TINY

    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4")
    lines = []
    for name in ("a", "b"):
        code, _, err = run(capsys, "--config", str(config), "train", "SYN", "--seed", "1",
                           "--out", str(tmp_path / name))
        assert code == 0, err
        lines.append(next(x for x in err.splitlines() if x.startswith("work: ")))
    assert lines[0].endswith("the time left shows after the first epoch")
    assert "estimate ~" in lines[1] and lines[1].endswith("(the last run of this shape on this "
                                                          "machine)")
