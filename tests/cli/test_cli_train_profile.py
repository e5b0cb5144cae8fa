"""`foxhunt train` says which keys the GPU profile filled and why, and records them in source.json;
`--json` keeps stdout one document and stderr free of it (issue 32, point 8)."""

from __future__ import annotations

import json

from foxhunt.profiles import SIZED

from .test_cli import run, run_json
from .test_cli_train_backtest import TINY

UNSIZED = TINY.replace("hidden = 32\n", "").replace("episode_len = 32\n", "")


def test_train_prints_and_records_exactly_what_the_profile_filled(capsys, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(UNSIZED)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4")
    code, _, err = run(capsys, "--config", str(cfg), "train", "SYN", "--profile", "rtx3050",
                       "--folds", "1", "--out", str(tmp_path / "run"))
    assert code == 0, err
    why = dict(SIZED.values())
    block = [line for line in err.splitlines() if line.startswith("profile ")]
    assert block == [f"profile rtx3050: [agent] hidden = 256 (unset; {why['agent.hidden']})",
                     f"profile rtx3050: [env] episode_len = 512 (unset; {why['env.episode_len']})"]
    source = json.loads((tmp_path / "run" / "source.json").read_text())
    assert source["profile"]["name"] == "rtx3050" and "--profile" in source["profile"]["reason"]
    assert source["profile"]["filled"] == {"agent.hidden": 256, "env.episode_len": 512}
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert spec["agent"]["hidden"] == 256 and spec["agent"]["atoms"] == 11  # the config's atoms


def test_train_json_prints_no_profile_block(capsys, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "4")
    code, out, err = run(capsys, "--config", str(cfg), "train", "SYN", "--profile", "h200",
                         "--folds", "1", "--out", str(tmp_path / "run"), "--json")
    assert code == 0, err
    assert json.loads(out)["profile"] == "h200" and "profile h200" not in err
    source = json.loads((tmp_path / "run" / "source.json").read_text())
    assert source["profile"]["filled"] == {}
