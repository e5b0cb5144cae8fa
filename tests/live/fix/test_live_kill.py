"""`kill -9` of `foxhunt live` at random moments of a session against `foxhunt venue`, then a
restart each time: no order or fill lost or doubled, the position equal to the exchange's,
and the same orders, fills and equity as a session that was never interrupted.

The exchange plays in lockstep (`--speed step`): the next bar when the trader said it is done
with the last, and no bar while it is away, so an interrupted session can be compared with an
uninterrupted one bar for bar. Real processes on loopback; every wait bounded."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foxhunt.live.reconcile import NEVER_REACHED

from .helpers import free_port

BARS, HISTORY = 1400, 600  # the trader warms up on 600 bars; the exchange plays the rest
STRATEGY = "sma:3,8"  # trades often: kills land between orders and their fills
KILLS = 10
pytestmark = pytest.mark.slow


def foxhunt(home: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "FOXHUNT_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "foxhunt", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # fmt: skip


class Venue:
    def __init__(self, home: Path, name: str, start: str, speed: str = "step"):
        self.port = free_port()
        self.proc = foxhunt(home, "venue", "SYN", "--port", str(self.port), "--state", name,
                            "--speed", speed, "--from", start, "--json")  # fmt: skip
        self.session_file = self.event("session_file")["path"]

    def event(self, kind: str, timeout_s: float = 60) -> dict:
        deadline = time.monotonic() + timeout_s
        for line in self.proc.stdout:
            doc = json.loads(line)
            if doc["event"] == kind:
                return doc
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"foxhunt venue sent no {kind} event")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def live(home: Path, venue: Venue, account: str, history_to: str, *extra: str) -> list[str]:
    return ["live", "SYN", "--venue", f"fix:{venue.session_file}", "--strategy", STRATEGY,
            "--history-to", history_to, "--account", account, "--stale-after", "600", *extra]


def read_json(home: Path, *args: str) -> dict:
    proc = foxhunt(home, *args, "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    doc = read_json(home, "data", "synth", "--bars", str(BARS), "--signal-strength", "0.3")
    assert doc["rows"] == BARS if "rows" in doc else True
    from foxhunt.config import load_settings
    from foxhunt.data.series import BarSpec
    from foxhunt.data.store import MarketStore

    os.environ["FOXHUNT_HOME"], old = str(home), os.environ.get("FOXHUNT_HOME")
    try:
        with MarketStore(load_settings(None).store_path, read_only=True) as store:
            ts = store.read_bars("SYN", BarSpec.parse("1min")).ts
    finally:
        if old is None:
            del os.environ["FOXHUNT_HOME"]
        else:
            os.environ["FOXHUNT_HOME"] = old
    return home, str(int(ts[HISTORY - 1])), str(int(ts[HISTORY]))


def account_state(home: Path, account: str) -> tuple:
    """Every order (what reached the venue, under the bar's id) and the positions. A kill between
    the log's append of an order and its send leaves that order rejected as never having reached
    the venue, and the bar's step, run again, sends it as `<id>.2`: both are what reached it."""
    orders = read_json(home, "orders", "--account", account, "--last", "0")["orders"]
    positions = read_json(home, "positions", "--account", account)
    keep = ("client_order_id", "side", "quantity", "filled", "type", "status", "avg_fill_ticks")
    sent = [o for o in orders if o["reason"] != NEVER_REACHED]
    for o in orders:
        if o["reason"] == NEVER_REACHED:  # never at the venue, and decided again under a new id
            assert o["status"] == "REJECTED" and o["filled"] == 0
            assert any(s["client_order_id"] == f"{o['client_order_id']}.2" for s in sent)
    return [{**{k: o[k] for k in keep}, "client_order_id": o["client_order_id"].split(".")[0]}
            for o in sent], positions


def test_kill_9_at_random_moments_loses_and_doubles_nothing(home):
    home, history_to, start = home
    ref_venue = Venue(home, "ref", start)
    try:
        ref = foxhunt(home, *live(home, ref_venue, "ref", history_to, "--json"))
        out, err = ref.communicate(timeout=180)
        assert ref.returncode == 0, err
        reference = json.loads(out)
        # the same start after the end as the killed session gets below: a report still on its
        # way when the session ended (the last order, filled at the end of the data) is applied
        ref_check = read_json(home, *live(home, ref_venue, "ref", history_to, "--max-bars", "0"))
    finally:
        ref_venue.stop()
    assert reference["ended"] and reference["orders"] > 20, reference
    assert ref_check["reconciliations"][0]["differences"] == []

    venue = Venue(home, "killed", start)
    rng = random.Random(7)
    kills = 0
    try:
        while kills < KILLS:
            proc = foxhunt(home, *live(home, venue, "killed", history_to))
            # a random moment: mostly once it trades (after its first live bar), else while it
            # starts, reconciles and replays
            trading = rng.random() < 0.8 and bool(proc.stdout.readline())
            time.sleep(rng.uniform(0.0, 0.15) if trading else rng.uniform(0.3, 2.5))
            if proc.poll() is not None:
                break  # the session ended first
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
        last = foxhunt(home, *live(home, venue, "killed", history_to))
        _, err = last.communicate(timeout=180)
        assert last.returncode == 0, err
        # one more start after the end: it reconciles with the exchange, which still answers
        check = read_json(home, *live(home, venue, "killed", history_to, "--max-bars", "0"))
    finally:
        venue.stop()
    assert kills == KILLS, f"the session ended after {kills} kills: give it more bars"
    assert check["reconciliations"][0]["differences"] == []  # the exchange agrees with the log
    killed_orders, killed_pos = account_state(home, "killed")
    ref_orders, ref_pos = account_state(home, "ref")
    assert killed_orders == ref_orders  # no order lost, doubled or changed; fills at the same prices
    assert len({o["client_order_id"] for o in killed_orders}) == len(killed_orders)
    assert len(killed_orders) > 50  # every order compared, not the listing's default last 50
    assert killed_pos["positions"] == ref_pos["positions"]
    assert killed_pos["equity"] == ref_pos["equity"]
