"""A live session is a job: submitted with a session file relative to FOXHUNT_HOME (as the API
requires), run by a worker against `foxhunt venue`, ended by its `--max-bars` or by a cancel."""

from __future__ import annotations

import json
import os
import time

from foxhunt.config import load_settings
from foxhunt.data.series import BarSpec
from foxhunt.data.store import MarketStore
from foxhunt.jobs import JobState, JobStore

from ..live.fix.test_live_kill import Venue, foxhunt
from .test_worker import in_thread, wait_for

HISTORY = 1000
BARS = 40


def _times(home) -> list[int]:
    with MarketStore(load_settings(None).store_path, read_only=True) as store:
        return [int(t) for t in store.read_bars("SYN", BarSpec.parse("1min")).ts]


def live_args(venue: Venue, home, history_to: int, account: str, *extra: str) -> list[str]:
    session = os.path.relpath(venue.session_file, home)
    assert not session.startswith(("/", ".."))
    return ["SYN", "--venue", f"fix:{session}", "--strategy", "sma:3,8", "--history-to",
            str(history_to), "--account", account, "--stale-after", "600", *extra]


def test_a_live_job_trades_its_bars_and_a_cancelled_one_ends_its_session(market, tmp_path):
    ts = _times(market)
    store = JobStore.open(f"sqlite:///{tmp_path / 'foxhunt.db'}")
    done_venue = Venue(market, "ex-a", str(ts[HISTORY]))
    try:
        job = store.submit("live", live_args(done_venue, market, ts[HISTORY - 1], "desk",
                                             "--max-bars", str(BARS)))
        _, thread = in_thread(store, market)
        thread.join(120)
        done = store.get(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.result["kind"] == "live" and done.result["account"] == "desk"
        assert done.result["bars"] == BARS and done.result["orders"] > 0
        assert len(orders_of(market, "desk")) == done.result["orders"]
    finally:
        done_venue.stop()

    open_venue = Venue(market, "ex-b", str(ts[HISTORY]), speed="30x")  # a bar every 2 s
    try:
        job = store.submit("live", live_args(open_venue, market, ts[HISTORY - 1], "desk2"))
        _, thread = in_thread(store, market)
        wait_for(lambda: store.get(job.id).progress.get("pid"), 60, "the session's child")
        wait_for(lambda: orders_of(market, "desk2"), 60, "the session's first order")
        store.cancel(job.id)
        began = time.monotonic()
        thread.join(30)
        assert not thread.is_alive() and time.monotonic() - began < 30
        assert store.get(job.id).state is JobState.CANCELLED
        assert orders_of(market, "desk2")  # the account's log is whole and readable after it
    finally:
        if not store.get(job.id).state.finished:
            store.cancel(job.id)
        open_venue.stop()


def orders_of(home, account: str) -> list[dict]:
    """The account's orders; none while its log does not exist yet."""
    proc = foxhunt(home, "orders", "--account", account, "--last", "0", "--json")
    out, _ = proc.communicate(timeout=60)
    return json.loads(out)["orders"] if proc.returncode == 0 else []
