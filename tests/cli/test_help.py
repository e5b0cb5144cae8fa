"""Every `--help`: plain text wrapped to the terminal (no Rich markup eating `[risk]`), every
option's help whole, every default said; run directories under FOXHUNT_HOME/runs."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest
import typer

import foxhunt.cli.train
from foxhunt.cli import app
from foxhunt.cli.common import under_home

from .test_cli import run

NOT_YET: set[str] = set()
"""Commands whose option help may still leave a None default unsaid (none now)."""


def _commands(group=None, path=()):
    group = group or typer.main.get_group(app)
    for name in group.list_commands(None):
        command = group.get_command(None, name)
        if hasattr(command, "list_commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(_commands())


def _squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("path", [p for p, _ in COMMANDS] + [(), ("data",)], ids=" ".join)
def test_help_fits_the_terminal_and_keeps_every_help_text_whole(capsys, monkeypatch, path,
                                                                 columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run(capsys, *path, "--help")
    assert code == 0 and err == ""
    too_long = [line for line in out.splitlines() if len(line) > columns]
    assert too_long == []
    command = dict(COMMANDS).get(path)
    if command is None:
        return
    squeezed = _squeezed(out)
    helps = [p.help for p in command.params if getattr(p, "help", None) and not p.hidden]
    for text in [command.help or "", *helps]:
        assert _squeezed(text) in squeezed  # nothing eaten as markup, nothing cut


def test_paper_help_keeps_square_brackets(capsys):
    code, out, _ = run(capsys, "paper", "--help")
    assert code == 0 and "[risk] table" in out and "with a  table" not in out


def test_a_hard_wrapped_docstring_reads_as_one_paragraph(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = run(capsys, "train", "--help")
    assert ("Walk-forward train a branching Rainbow DQN; writes a run directory and a per-fold "
            "table, and ends with the run's phase split") in out


@pytest.mark.parametrize("path,command", [c for c in COMMANDS if c[0][0] not in NOT_YET],
                         ids=[" ".join(p) for p, _ in COMMANDS if p[0] not in NOT_YET])
def test_every_option_says_its_default(capsys, path, command):
    _, out, _ = run(capsys, *path, "--help")
    for param in command.params:
        if not isinstance(param, typer.core.TyperOption) or param.required or param.is_flag:
            continue
        if param.default is None:
            words = param.help.lower()
            assert "default" in words or "one of --run" in words, param.name
        else:
            assert "[default:" in out


def test_train_help_gives_the_profiles_update_caps(capsys):
    profiles = resources.files("foxhunt.resources") / "profiles"
    caps = {name: tomllib.loads((profiles / f"{name}.toml").read_text())["updates_per_fold"]
            for name in ("default", "h100")}
    _, out, _ = run(capsys, "train", "--help")
    flat = " ".join(out.split())
    assert f"{caps['default']:,} on a CPU, {caps['h100']:,} on an H100" in flat


def test_a_bare_out_name_goes_under_foxhunt_home_runs(capsys, monkeypatch, isolated_home,
                                                      tmp_path):
    seen = []

    def fake_training(ctx, symbol, bars, **kwargs):
        seen.append((bars, kwargs["out_dir"]))
        raise SystemExit(0)

    monkeypatch.setattr(foxhunt.cli.train, "run_training", fake_training)
    monkeypatch.chdir(tmp_path)
    for given in ("x", "runs/x", "./x", str(tmp_path / "abs")):
        run(capsys, "train", "ES", "--out", given)
    assert [d for _, d in seen] == [isolated_home / "runs" / "x", Path("runs/x"), Path("x"),
                                    tmp_path / "abs"]
    assert {b for b, _ in seen} == {"1min"}  # no store yet: the usual default


def test_a_bare_run_name_reads_from_foxhunt_home_else_as_given(monkeypatch, isolated_home,
                                                               tmp_path):
    ctx = typer.Context(typer.main.get_command(app))
    from foxhunt.cli.common import Invocation

    ctx.obj = Invocation()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local").mkdir()
    assert under_home(ctx, "local", existing=True) == Path("local")
    (isolated_home / "runs" / "local").mkdir(parents=True)
    assert under_home(ctx, "local", existing=True) == isolated_home / "runs" / "local"
    assert under_home(ctx, "gone", existing=True) == isolated_home / "runs" / "gone"
    assert under_home(ctx, "s", "studies") == isolated_home / "studies" / "s"
    assert under_home(ctx, None) is None
