"""An account's files belong to its log: two logs of one account name never share a resume file,
a failed start writes nothing, a moved FOXHUNT_HOME still resumes, a start killed before its
log held an event resumes as a fresh start, one trader at a time, and the kill switch's flatten
reaches the venue when no trader runs."""

from __future__ import annotations

import shutil

import pytest

from foxhunt.execution import SqlEventStore
from foxhunt.paper import PaperTrader
from foxhunt.paper.account_files import AccountFiles

from .test_cli import run, run_json

SYN = ("SYN", "--bars", "1min")
SMA = ("--strategy", "sma:10,30")


@pytest.fixture
def synth_market(capsys):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "600", "--seed", "3")


def tree(home) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def test_two_logs_of_one_account_name_keep_their_own_files(capsys, synth_market, tmp_path,
                                                            isolated_home):
    other = f"sqlite:///{tmp_path / 'elsewhere.sqlite'}"
    first = run_json(capsys, "paper", *SYN, *SMA, "--account", "pg")
    run_json(capsys, "paper", *SYN, "--strategy", "sma:5,20", "--account", "pg", "--log", other)
    files = sorted(p.name for p in (isolated_home / "trading").iterdir())
    assert "pg.paper.json" in files and any(f.startswith("pg@") and f.endswith(".paper.json")
                                            for f in files)  # fmt: skip
    again = run_json(capsys, "paper", *SYN, *SMA, "--account", "pg", "--resume")
    assert again["equity"] == first["equity"] and again["resumed_from"] is not None


def test_a_failed_start_writes_nothing(capsys, synth_market, tmp_path, isolated_home):
    before = tree(isolated_home)
    risk = tmp_path / "risk.toml"
    risk.write_text("[risk]\norder_rate_window_s = inf\n")
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "x", "--risk", str(risk))
    assert code == 1 and "order_rate_window_s" in err
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "x", "--from",
                       "2100-01-01T00:00")  # fmt: skip
    assert code == 1 and "paper run needs at least 3" in err
    code, _, err = run(capsys, "paper", *SYN, "--strategy", "sma:30,10", "--account", "x")
    assert code == 1 and err.count("\n") == 1
    assert tree(isolated_home) == before


def test_a_moved_home_still_resumes(capsys, synth_market, tmp_path, isolated_home, monkeypatch):
    first = run_json(capsys, "paper", *SYN, *SMA, "--account", "m")
    moved = tmp_path / "moved_home"
    shutil.copytree(isolated_home, moved)
    monkeypatch.setenv("FOXHUNT_HOME", str(moved))
    again = run_json(capsys, "paper", *SYN, *SMA, "--account", "m", "--resume")
    assert again["equity"] == first["equity"] and again["log"].startswith(f"sqlite:///{moved}")


def test_a_start_killed_before_its_log_held_an_event_resumes_as_a_fresh_start(
        capsys, synth_market, isolated_home):
    files = AccountFiles.of(isolated_home, "k", None)
    files.folder.mkdir(parents=True, exist_ok=True)
    files.write_meta({"symbol": "SYN"})  # a start killed after its arguments, before an event
    SqlEventStore(f"sqlite:///{files.folder / 'k.sqlite'}").close()
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "k", "--resume", "--json")
    assert code == 0 and "has no run to resume: starting one" in err
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "never-started", "--resume")
    assert code == 1 and "account 'never-started' has no paper run to resume" in err
    assert not list((isolated_home / "trading").glob("never-started*"))


def test_one_trader_per_account_and_log(capsys, synth_market, isolated_home):
    files = AccountFiles.of(isolated_home, "busy", None)
    with files.hold():
        code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "busy")
    assert code == 1 and err.count("\n") == 1
    assert "account 'busy' (log default) is being traded by another process" in err
    assert not (isolated_home / "trading" / "busy.sqlite").exists()


def test_a_damaged_arguments_file_is_one_line(capsys, synth_market, isolated_home):
    run_json(capsys, "paper", *SYN, *SMA, "--account", "d")
    meta = isolated_home / "trading" / "d.paper.json"
    meta.write_text(meta.read_text()[:40])
    for argv in (("risk", "status", "--account", "d"),
                 ("paper", *SYN, *SMA, "--account", "d", "--resume")):  # fmt: skip
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.count("\n") == 1 and f"{meta} is damaged" in err


def test_risk_reduce_lets_only_exits_out_and_is_logged(capsys, synth_market):
    run_json(capsys, "paper", *SYN, *SMA, "--account", "r")
    doc = run_json(capsys, "risk", "reduce", "--account", "r", "--reason", "wind down")
    assert (doc["trading_state"], doc["cause"], doc["reason"]) == ("REDUCING", "MANUAL", "wind down")
    code, _, err = run(capsys, "risk", "reduce", "--account", "r")
    assert code == 1 and "already REDUCING" in err
    assert run_json(capsys, "risk", "resume", "--account", "r")["trading_state"] == "ACTIVE"


def test_the_kill_switch_reaches_the_venue_of_a_stopped_run(capsys, synth_market, monkeypatch):
    """A run stops mid-window holding a position; `risk kill` with no trader running sends the
    flatten to the paper venue itself, and the resumed run fills it at the next bar."""
    live_bar = PaperTrader._live_bar

    def crash_at_bar_400(self, t):
        if t == 400:
            raise KeyboardInterrupt
        live_bar(self, t)

    monkeypatch.setattr(PaperTrader, "_live_bar", crash_at_bar_400)
    code, _, _ = run(capsys, "paper", *SYN, "--strategy", "buy-and-hold", "--account", "s")
    assert code == 130
    monkeypatch.setattr(PaperTrader, "_live_bar", live_bar)
    held = run_json(capsys, "positions", "--account", "s")["positions"][0]["position"]
    assert held != 0
    doc = run_json(capsys, "risk", "kill", "--account", "s")
    assert doc["trading_state"] == "HALTED" and "are at the venue" in doc["flatten"]
    [kill] = [o for o in run_json(capsys, "orders", "--account", "s", "--last", "0")["orders"]
              if o["tag"] == "kill_switch"]  # fmt: skip
    assert kill["status"] == "ACCEPTED" and kill["quantity"] == abs(held)
    resumed = run_json(capsys, "paper", *SYN, "--strategy", "buy-and-hold", "--account", "s",
                       "--resume")  # fmt: skip
    assert resumed["position"] == 0
    [kill] = [o for o in run_json(capsys, "orders", "--account", "s", "--last", "0")["orders"]
              if o["tag"] == "kill_switch"]  # fmt: skip
    assert kill["status"] == "FILLED"


def test_a_damaged_venue_journal_is_one_line_and_rebuild_venue_goes_on(capsys, synth_market,
                                                                       isolated_home):
    first = run_json(capsys, "paper", *SYN, *SMA, "--account", "j")
    journal = isolated_home / "trading" / "j.venue.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join([*lines[:5], "not json", *lines[5:]]) + "\n")
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "j", "--resume")
    assert code == 1 and err.count("\n") == 1 and "--rebuild-venue" in err
    code, _, err = run(capsys, "paper", *SYN, *SMA, "--account", "j", "--rebuild-venue")
    assert code == 1 and "use it with --resume" in err
    again = run_json(capsys, "paper", *SYN, *SMA, "--account", "j", "--resume", "--rebuild-venue")
    assert (again["equity"], again["position"]) == (first["equity"], 0)
    assert list((isolated_home / "trading").glob("j.venue.jsonl.damaged-*"))


def test_the_kill_switch_flattens_at_once_after_the_window_ended(capsys, synth_market,
                                                                  monkeypatch):
    """A finished run that still holds a position (its last flatten skipped here): the venue
    knows its feed ended, so `risk kill` fills the flatten at the last close, not never."""
    monkeypatch.setattr(PaperTrader, "_flatten_at_close", lambda self, t, ts, close: None)
    done = run_json(capsys, "paper", *SYN, "--strategy", "buy-and-hold", "--account", "e")
    assert done["position"] != 0
    doc = run_json(capsys, "risk", "kill", "--account", "e")
    assert doc["flatten"].endswith("SYN is flat")
    assert run_json(capsys, "positions", "--account", "e")["positions"][0]["position"] == 0
    [kill] = [o for o in run_json(capsys, "orders", "--account", "e", "--last", "0")["orders"]
              if o["tag"] == "kill_switch"]  # fmt: skip
    assert kill["status"] == "FILLED"
