"""`foxhunt tune` and `foxhunt report STUDY_DIR` end to end on a small synthetic market."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import run, run_json

TINY = """
[env]
window = 4
episode_len = 32
[agent]
hidden = 32
atoms = 11
[replay]
capacity = 4096
beta_anneal_steps = 200
[train]
epochs = 2
updates_per_fold = 20
replay_ratio = 2.5
learning_starts = 128
batch_size = 32
n_envs = 16
device = "cpu"
[walkforward]
folds = 2
purge = 8
"""
SPACE = """
[agent]
lr = { low = 1e-4, high = 3e-3, log = true }
[replay]
n_step = { low = 1, high = 4 }
"""


@pytest.fixture
def files(capsys, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "space.toml").write_text(SPACE)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4",
             "--signal-strength", "0.5")
    return tmp_path


def test_tune_then_report(capsys, files, isolated_home):
    doc = run_json(capsys, "--config", str(files / "tiny.toml"), "tune", "SYN", "--space",
                   str(files / "space.toml"), "--trials", "2", "--particles", "2",
                   "--backend", "thread")
    study_dir = isolated_home / "studies" / "SYN-1min-pso"
    assert doc["study_dir"] == str(study_dir) and doc["study"] == "SYN-1min-pso"
    assert len(doc["trials"]) == 2 and doc["best"] is not None
    assert doc["final"]["run_dir"] == str(study_dir / "final")
    assert (study_dir / "best.toml").is_file() and (study_dir / "final" / "source.json").is_file()
    # best.toml is a config `foxhunt train` takes
    shown = run_json(capsys, "--config", str(study_dir / "best.toml"), "config", "show")
    assert shown["settings"]["agent"]["lr"] == pytest.approx(doc["best"]["params"]["agent.lr"])
    report = run_json(capsys, "report", str(study_dir), "--out", str(files / "study.html"))
    html = (files / "study.html").read_text()
    assert report["report"] == str(files / "study.html")
    assert "Optimisation history" in html and "Parallel coordinates" in html
    code, _, err = run(capsys, "--config", str(files / "tiny.toml"), "tune", "SYN", "--space",
                       str(files / "space.toml"), "--trials", "2")
    assert code == 1 and "already exists" in err and "--resume" in err


def test_a_bad_space_is_one_line(capsys, files):
    (files / "bad.toml").write_text("[agent]\nlr = { low = 1e-2, high = 1e-3 }\n")
    code, out, err = run(capsys, "--config", str(files / "tiny.toml"), "tune", "SYN", "--space",
                         str(files / "bad.toml"))
    assert code == 1 and out == ""
    assert err.strip() == f"error: {files / 'bad.toml'}: agent.lr: empty range [0.01, 0.001]: " \
                          "low must be below high"
