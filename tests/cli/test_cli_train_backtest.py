"""`foxhunt train`, `backtest` and `report` end to end on a small synthetic market."""

from __future__ import annotations

import json

import pytest

from .test_cli import run, run_json

TINY = """
[env]
window = 4
episode_len = 32
[agent]
hidden = 32
atoms = 11
[replay]
capacity = 4096
[train]
epochs = 1
updates_per_fold = 5
replay_ratio = 2.5
learning_starts = 64
batch_size = 32
n_envs = 16
device = "cpu"
[walkforward]
folds = 2
purge = 8
"""


@pytest.fixture
def trained(capsys, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4",
             "--signal-strength", "0.3")
    run_dir = tmp_path / "run"
    doc = run_json(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min", "--seed", "1",
                   "--out", str(run_dir))
    return cfg, run_dir, doc


def test_train_writes_a_run_and_prints_the_fold_table(trained):
    _, run_dir, doc = trained
    assert doc["run_dir"] == str(run_dir) and doc["device"] == "cpu"
    assert [f["fold"] for f in doc["folds"]] == [0, 1]
    for fold in doc["folds"]:
        assert set(fold["test"]) >= {"sharpe", "return", "max_drawdown", "trades"}
        assert fold["windows"]["val"][1] <= fold["windows"]["test"][0]
        assert fold["deployed"] in ("agent", "flat") and fold["verdict"].startswith(f"fold {fold['fold']}: ")
        if fold["deployed"] == "flat":
            assert fold["test"] == fold["baselines"]["flat"]
    source = json.loads((run_dir / "source.json").read_text())
    assert source["symbol"] == "SYN" and source["bars"] == "1min"
    # the run's phase split, as in phases.json
    assert doc["phases"] == json.loads((run_dir / "phases.json").read_text())
    assert {"setup_compile_s", "experience_s", "updates_s", "validation_s", "test_s", "other_s",
            "total_s", "experience_updates_share"} <= set(doc["phases"])


def test_train_shows_progress_per_epoch_and_prints_the_fold_table(capsys, trained, tmp_path):
    cfg, _, _ = trained
    code, out, err = run(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min",
                         "--seed", "1", "--out", str(tmp_path / "run2"))
    assert code == 0, err
    epochs = [line for line in err.splitlines() if line.startswith("[")]  # stderr is a log here
    work = next(line for line in err.splitlines() if line.startswith("work: "))
    total = int(work.split(", ")[1].split()[0].replace(",", ""))
    assert work.startswith("work: 2 folds x 1 epochs, ")
    assert [line.split()[1:6] for line in epochs] == [
        ["updates]", "fold", "1/2", "epoch", "1/1"], ["updates]", "fold", "2/2", "epoch", "1/1"]]
    assert epochs[-1].startswith(f"[{total:,}/{total:,} updates]")
    for line in epochs:  # whole, not cut to the console's width
        assert all(f" {key} " in line for key in ("Sharpe", "loss", "flat", "exp", "train", "val"))
        assert " left (" in line and line.endswith(" updates/s)")  # the time left, and the rate
    for column in ("fold", "val", "test", "to beat", "p(beats)", "deployed"):
        assert column in out.lower()
    assert out.count("\n") >= 4  # header and one row per fold
    # The run ends with its phase split on one line.
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("phases: setup+compile ")
    for phase in ("experience", "updates", "validation", "test", "other", "total"):
        assert f"| {phase} " in last
    phases = json.loads((tmp_path / "run2" / "phases.json").read_text())
    assert f"total {phases['total_s']:.1f} s" in last
    share = round(100 * phases["experience_updates_share"])
    assert last.endswith(f"experience+updates {share}% of the {phases['post_compile_s']:.1f} s "
                         "after setup+compile")
    verdicts = [line for line in err.splitlines() if line.startswith("fold ") and ": " in line]
    assert [v.split(":")[0] for v in verdicts] == ["fold 0", "fold 1"]  # one after each fold
    assert all(v.split(": ", 1)[1].startswith(("deployed agent (val Sharpe", "no edge: flat (val Sharpe"))
               for v in verdicts)
    folds = json.loads((tmp_path / "run2" / "folds.json").read_text())
    assert verdicts == [f["verdict"] for f in folds]
    for f in folds:
        shown = "agent" if f["deployed"] == "agent" else "no edge: flat"
        assert any(line.startswith(f"│ {f['fold']} ") and shown in line for line in out.splitlines())


def test_train_on_a_terminal_draws_one_progress_bar_over_all_epochs(capsys, trained, tmp_path,
                                                                    monkeypatch):
    from rich.console import Console

    import foxhunt.cli.train as train_cli

    monkeypatch.setattr(train_cli, "err", Console(stderr=True, force_terminal=True, width=200))
    cfg, _, _ = trained
    code, _, err = run(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min",
                       "--seed", "1", "--out", str(tmp_path / "run3"))
    assert code == 0, err
    assert "walk-forward" in err and "fold 2/2 epoch 1/1" in err
    assert " updates" in err and " left " in err  # updates done of the run's, the time left
    assert " updates]" not in err  # the bar, not the log lines
    assert "fold 0: " in err and "fold 1: " in err  # the verdicts, above the bar


def test_the_budget_options_reach_the_run(capsys, trained, tmp_path):
    cfg, _, _ = trained
    doc = run_json(capsys, "--config", str(cfg), "train", "SYN", "--bars", "1min", "--seed", "1",
                   "--epochs", "2", "--updates-per-fold", "3", "--out", str(tmp_path / "run5"))
    spec = json.loads((tmp_path / "run5" / "spec.json").read_text())
    assert spec["train"]["epochs"] == 2 and spec["train"]["updates_per_fold"] == 3
    lines = [json.loads(x) for x in (tmp_path / "run5" / "run.jsonl").read_text().splitlines()]
    assert [x["updates"] for x in lines if x["fold"] == 0] == [1, 2]
    assert len(doc["folds"]) == 2


def test_an_old_budget_key_is_one_line_naming_its_replacement(capsys, trained, tmp_path):
    cfg, _, _ = trained
    old = tmp_path / "old.toml"
    old.write_text(cfg.read_text().replace("updates_per_fold = 5", "updates_per_epoch = 5"))
    code, out, err = run(capsys, "--config", str(old), "train", "SYN", "--out",
                         str(tmp_path / "run6"))
    assert code != 0 and out == ""
    [line] = err.strip().splitlines()
    assert "'updates_per_epoch' was replaced by [train] updates_per_fold" in line


def test_an_episode_longer_than_the_training_window_is_clipped_with_one_notice(capsys, trained,
                                                                                tmp_path):
    cfg, _, _ = trained
    long_episodes = tmp_path / "long.toml"
    long_episodes.write_text(cfg.read_text().replace("episode_len = 32", "episode_len = 5000"))
    code, _, err = run(capsys, "--config", str(long_episodes), "train", "SYN", "--bars", "1min",
                       "--seed", "1", "--out", str(tmp_path / "run4"))
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "[env] episode_len = 5000" in notes[0] and "clipped to" in notes[0]
    used = json.loads((tmp_path / "run4" / "spec.json").read_text())["env"]["episode_len"]
    assert f"clipped to {used};" in notes[0]


def test_report_writes_one_offline_html_file(capsys, trained, tmp_path):
    cfg, run_dir, _ = trained
    out = tmp_path / "r.html"
    doc = run_json(capsys, "--config", str(cfg), "report", str(run_dir), "--out", str(out), "--device", "cpu")
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "fold 1 test" in html
    assert "https://" not in html.split("</head>")[-1].replace("https://github", "")
    assert {r["policy"] for r in doc["results"]} == {"agent", "buy-and-hold", "sma:10,30", "flat"}


def test_backtest_run_strategy_and_checkpoint(capsys, trained, tmp_path):
    cfg, run_dir, _ = trained
    doc = run_json(capsys, "--config", str(cfg), "backtest", "SYN", "--run", str(run_dir), "--device", "cpu")
    assert len(doc["results"]) == 2 * 4
    trades = tmp_path / "t.csv"
    doc = run_json(capsys, "backtest", "SYN", "--strategy", "sma:5,20", "--strategy", "buy-and-hold",
                   "--trades", str(trades), "--no-costs", "--device", "cpu")
    assert [r["policy"] for r in doc["results"]] == ["sma:5,20", "buy-and-hold"]
    assert doc["costs"] is False and trades.read_text().startswith("policy,")
    doc = run_json(capsys, "backtest", "SYN", "--checkpoint", str(run_dir / "checkpoints" / "fold0.pt"),
                   "--from", "2024-01-05T15:00:00Z", "--device", "cpu",
                   "--report", str(tmp_path / "b.html"))
    assert doc["results"][0]["policy"] == "agent" and (tmp_path / "b.html").exists()


@pytest.mark.parametrize("argv, needle", [
    (["backtest", "SYN", "--strategy", "flat", "--run", "x"], "exactly one of"),
    (["backtest", "SYN", "--strategy", "momentum"], "momentum"),
    (["report", "nowhere"], "not a finished foxhunt run"),
    (["train", "SYN", "--resume"], "--resume needs --out"),
])
def test_mistakes_are_one_line(capsys, argv, needle):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "500")
    code, out, err = run(capsys, *argv)
    assert code != 0 and out == "" and needle in err and err.count("\n") == 1


def test_the_report_shows_what_each_fold_deployed(trained, monkeypatch):
    """A fold that deployed flat (no edge on validation) is flat in the report's agent row: its
    checkpoint is not what traded, so it is not backtested; the fold table says what was
    deployed."""
    from foxhunt.report import run as report_run

    def no_checkpoint(*args, **kwargs):
        raise AssertionError("a fold that deployed flat had its checkpoint backtested")

    monkeypatch.setattr(report_run, "checkpoint_policy", no_checkpoint)
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.synth import SynthConfig, generate
    from foxhunt.report.run import backtest_run, read_run, run_report_data

    _, run_dir, _ = trained
    folds_file = run_dir / "folds.json"
    folds = json.loads(folds_file.read_text())
    for fold in folds:
        fold["deployed"], fold["verdict"] = "flat", f"fold {fold['fold']}: no edge: flat"
    folds_file.write_text(json.dumps(folds))
    bars = generate(SynthConfig(n_bars=3000, seed=4, signal_strength=0.3)).bars  # as stored
    per_fold = backtest_run(run_dir, bars, InstrumentRegistry.load().get("SYN"), device="cpu")
    for results in per_fold:
        agent = next(r for r in results if r.name == "agent")
        assert agent.metrics["trades"] == 0
    data = run_report_data(run_dir, per_fold)
    assert [f["deployed"] for f in data["folds"]] == ["flat"] * len(folds)
    assert read_run(run_dir)["folds.json"][0]["verdict"].endswith("no edge: flat")


def test_the_verdicts_opportunity_is_the_best_rule_chosen_on_validation_alone():
    """What `foxhunt train` hands the trainer: the default grid's best rule on the fold's
    validation window; bars after it do not change the choice."""
    from foxhunt.backtest.rule_search import choose_rule
    from foxhunt.cli.train import validation_opportunity
    from foxhunt.data.instruments import InstrumentRegistry
    from foxhunt.data.synth import SynthConfig, generate
    from foxhunt.env.config import EnvConfig
    from foxhunt.training.walkforward import Fold, Window

    bars = generate(SynthConfig(n_bars=4_000, seed=3, family="trend")).bars
    instrument = InstrumentRegistry.load().get("SYN")
    fold = Fold(0, Window(0, 2_000), Window(2_000, 3_000), Window(3_000, 4_000))
    found = validation_opportunity(bars, instrument, EnvConfig(), 98_280.0)(fold)
    rule, scores = choose_rule(bars, instrument, fold.val, env_config=EnvConfig(),
                               periods_per_year=98_280.0)
    assert (found.rule, found.sharpe, found.bars) == (rule.label, scores[rule.label], 1_000)
    cut = validation_opportunity(bars.slice(0, 3_000), instrument, EnvConfig(), 98_280.0)(fold)
    assert cut == found
