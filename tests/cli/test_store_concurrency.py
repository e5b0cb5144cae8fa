"""Several foxhunt processes on one store: readers share it, a writer excludes the rest, and
whoever finds the file held waits a bounded time, then fails with one line.

The holder is another process with a plain DuckDB connection, so each test sees the lock as a
second foxhunt process would, whatever the store code does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import threading
import time

import pytest

from foxhunt.data.store import MarketStore

from .test_cli import run, run_json

HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
print("holding", flush=True)
sys.stdin.readline()
con.close()
"""


@contextlib.contextmanager
def held(path, mode: str):
    """Another process holds `path` for `mode` ('read' or 'write') until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready and proc.stdout.readline().strip() == "holding", proc.stderr.read()
        yield proc
    finally:
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write("\n")
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def store(capsys, isolated_home):
    run_json(capsys, "data", "synth", "--symbol", "SYN", "--bars", "2000", "--seed", "1")
    return isolated_home / "store.duckdb"


def test_three_backtests_at_once_all_finish(store, isolated_home):
    env = {**os.environ, "FOXHUNT_HOME": str(isolated_home), "FOXHUNT_STORE_WAIT_S": "5"}
    argv = [sys.executable, "-m", "foxhunt", "backtest", "SYN", "--strategy", "sma:10,30",
            "--device", "cpu", "--json"]
    with held(store, "read"):  # so the three overlap with a reader however fast each one is
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(3)]
        try:
            done = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    for p, (out, err) in zip(procs, done):
        assert p.returncode == 0, err
        assert [r["policy"] for r in json.loads(out)["results"]] == ["sma:10,30"]


TINY = ["[env]", "window = 4", "episode_len = 32", "[agent]", "hidden = 32", "atoms = 11",
        "[replay]", "capacity = 4096", "[train]", "epochs = 1", "updates_per_fold = 2",
        "learning_starts = 64", "batch_size = 32", "n_envs = 16", "device = 'cpu'",
        "[walkforward]", "folds = 2", "purge = 8"]


@pytest.mark.parametrize("argv", [
    ["data", "list"],
    ["data", "show", "SYN"],
    ["data", "export", "SYN", "--bars", "1min", "--out", "{tmp}/syn.parquet"],
    ["features", "show", "SYN"],
    ["features", "export", "SYN", "--out", "{tmp}/f.parquet"],
    ["backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu"],
    ["--config", "{tmp}/tiny.toml", "train", "SYN", "--seed", "0", "--out", "{tmp}/run"],
], ids=lambda a: " ".join(a[:2]) if a[0] != "--config" else "train")
def test_commands_that_only_read_share_the_store_with_another_reader(capsys, store, tmp_path,
                                                                     monkeypatch, argv):
    (tmp_path / "tiny.toml").write_text("\n".join(TINY) + "\n")
    monkeypatch.setenv("FOXHUNT_STORE_WAIT_S", "0")
    before = store.read_bytes()
    with held(store, "read"):
        code, out, err = run(capsys, *(a.format(tmp=tmp_path) for a in argv), "--json")
    assert code == 0, err
    json.loads(out)
    assert store.read_bytes() == before


def test_a_reader_waits_for_the_writer_then_reads(store):
    got: dict = {}

    def read():
        with MarketStore(store, read_only=True, wait_s=20) as s:
            got["series"] = [str(x) for x in s.series()]

    reader = threading.Thread(target=read)
    with held(store, "write"):
        reader.start()
        time.sleep(0.3)
        assert reader.is_alive() and not got
    reader.join(timeout=20)
    assert got["series"] == ["SYN 1min"]


def test_a_reader_gives_up_on_a_writer_with_one_line(capsys, store, monkeypatch):
    monkeypatch.setenv("FOXHUNT_STORE_WAIT_S", "0.3")
    with held(store, "write") as holder:
        start = time.monotonic()
        code, out, err = run(capsys, "backtest", "SYN", "--strategy", "sma:10,30", "--device", "cpu")
        waited = time.monotonic() - start
    assert code == 1 and out == "" and err.count("\n") == 1 and 0.3 <= waited < 10
    assert re.fullmatch(
        rf"error: {re.escape(str(store))}: another foxhunt process \(PID {holder.pid}\) holds the "
        r"store for writing; waited \d+\.\d s to read it; retry when it has finished, or wait "
        r"longer with FOXHUNT_STORE_WAIT_S=SECONDS\n", err)


def test_a_writer_gives_up_on_readers_with_one_line(capsys, store, monkeypatch):
    monkeypatch.setenv("FOXHUNT_STORE_WAIT_S", "0.2")
    before = store.read_bytes()
    with held(store, "read"):
        code, out, err = run(capsys, "data", "synth", "--symbol", "SYN", "--bars", "500")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert f"{store}: another foxhunt process" in err
    assert re.search(r"holds the store for reading; waited \d+\.\d s to write to it", err)
    assert store.read_bytes() == before


def test_a_writer_waits_for_a_reader_to_finish(capsys, store, monkeypatch):
    monkeypatch.setenv("FOXHUNT_STORE_WAIT_S", "20")
    with held(store, "read") as holder:
        threading.Timer(0.3, lambda: (holder.stdin.write("\n"), holder.stdin.flush())).start()
        code, out, err = run(capsys, "data", "synth", "--symbol", "SYN", "--bars", "500", "--json")
    assert code == 0 and json.loads(out)["bars"] == 500, err
    assert run_json(capsys, "data", "list")["series"][0]["rows"] == 500


def test_a_reader_on_an_empty_home_creates_nothing(capsys, isolated_home):
    store = isolated_home / "store.duckdb"
    code, out, err = run(capsys, "backtest", "ES", "--strategy", "sma:10,30", "--device", "cpu")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {store}: no market store here yet; import data first")
    assert "`foxhunt data sample`" in err
    assert run_json(capsys, "data", "list")["series"] == []
    assert not store.exists()
