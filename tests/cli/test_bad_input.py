"""Bad input, as a demanding user meets it: damaged files (event logs, the venue journal, the
run's paper.json, the market store, checkpoints, config TOML), risk TOML, values on the command
line, log URLs and concurrent runs.

Each case: a non-zero exit, exactly one line on stderr (`error: ...`, naming the file, option
or key that is wrong; no traceback), nothing on stdout, and no state changed: every file under
FOXHUNT_HOME and every file the case passed in holds the same bytes after the command, and no
file appeared or went away. The concurrent runs are real processes; three backtests at once
must all work.

The cases run in this process through `foxhunt.cli.main` (the console script's entry point) on
one FOXHUNT_HOME path, restored before each case from a copy made once per module: a synthetic
market (SYN, 1,500 one-minute bars, seed 3) and a finished paper run on account a1 (sma:10,30).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .bad_input_cases import CASES, PAPER_A1, SMA, STORE, SYN, Case, cli, cli_ok

FAIL_FAST_S = 15.0  # a bad input is refused at once (no hanging connect, no long wait)


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    home = root / "home"  # every case runs on this path: the run's paper.json holds it
    cli_ok(home, "data", "synth", "--symbol", "SYN", "--bars", "1500", "--seed", "3")
    assert cli_ok(home, "config", "show")["store"] == str(home / STORE)
    assert cli_ok(home, *PAPER_A1)["orders"] > 0
    pristine = root / "pristine"
    shutil.copytree(home, pristine)
    # `cli` collects garbage after each command (to close what the process's exit would close):
    # frozen, the objects of the imports and fixtures are not walked again by each collection.
    gc.collect()
    gc.freeze()
    yield home, pristine
    gc.unfreeze()


@pytest.fixture
def home(market):
    """FOXHUNT_HOME as the module's fixtures left it (cases damage it)."""
    home, pristine = market
    shutil.rmtree(home)
    shutil.copytree(pristine, home)
    return home


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file and folder under `roots`: relative path -> sha256 of its bytes ('dir')."""
    state = {}
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            key = f"{root.name}/{path.relative_to(root)}"
            state[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def changes(before: dict[str, str], after: dict[str, str]) -> str:
    added = sorted(set(after) - set(before))
    gone = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    return f"appeared {added}, went away {gone}, changed {changed}"


def assert_one_error_line(code: int, out: str, err: str, names: str) -> str:
    assert code != 0, f"exit 0; stdout {out[:300]!r}; stderr {err[:300]!r}"
    assert "Traceback" not in err, err
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, (
        f"stderr is not one 'error: ...' line (exit {code}): {err[:1000]!r}")
    assert err.strip() != "error:", err
    assert names in err, f"the error does not name {names!r}: {err!r}"
    assert out == "", f"stdout is not empty: {out[:300]!r}"
    return err.strip()


def trading_files(home: Path) -> list[str]:
    folder = home / "trading"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_a_non_zero_exit_and_changes_nothing(case: Case, home, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for setup in case.setup:
        setup(home, inputs)
    before, files_before = snapshot(home, inputs), trading_files(home)
    began = time.monotonic()
    code, out, err = cli(home, *case.args(inputs), env=case.env)
    took = time.monotonic() - began
    assert_one_error_line(code, out, err, case.names)
    if case.secret:
        assert case.secret not in out + err, f"the error prints the password: {err!r}"
    assert trading_files(home) == files_before, "files appeared or went away under trading/"
    after = snapshot(home, inputs)
    assert after == before, f"state changed: {changes(before, after)}"
    assert took < FAIL_FAST_S, f"took {took:.1f} s to refuse"


def test_there_are_at_least_sixty_cases():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


# ----------------------------------------------------------------------------- concurrent runs


def foxhunt(home: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m foxhunt ARGV` as its own process on FOXHUNT_HOME=home."""
    return subprocess.Popen(
        [sys.executable, "-m", "foxhunt", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "FOXHUNT_HOME": str(home), "OMP_NUM_THREADS": "1",
                        **(env or {})})


def finish(procs: list[subprocess.Popen], timeout: float = 120.0) -> list[tuple[int, str, str]]:
    done = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{p.args[3:]} still running after {timeout:.0f} s") from None
        done.append((p.returncode, out, err))
    return done


# Holds the store open in another process until its stdin closes.
_HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
con.execute("SELECT count(*) FROM bars").fetchall()
print("holding", flush=True)
sys.stdin.read()
con.close()
"""


class StoreHolder:
    def __init__(self, home: Path, mode: str):
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(home / STORE), mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "holding", f"the {mode}er did not open the store: {line!r}"

    def release(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def test_two_paper_runs_on_one_account_one_runs_the_other_is_refused(home):
    """Started together; the winner's run lasts ~4 s (80 bars paced at 1200x), so the other
    meets the account held. The loser says so in one line and leaves the log as the winner's."""
    argv = ("paper", *SYN, *SMA, "--account", "c1", "--speed", "1200x",
            "--to", "2024-01-02T15:50:00Z", "--json")
    results = finish([foxhunt(home, *argv), foxhunt(home, *argv)])
    ok = [r for r in results if r[0] == 0]
    failed = [r for r in results if r[0] != 0]
    summary = [(rc, err.strip().splitlines()[:3]) for rc, _, err in results]
    assert len(ok) == 1 and len(failed) == 1, f"not one winner and one loser: {summary}"
    code, out, err = failed[0]
    line = assert_one_error_line(code, out, err, "c1")
    assert re.search(r"another|running|in use|held|holds|lock", line, re.IGNORECASE), (
        f"the loser does not say another run holds the account: {line!r}")
    doc = json.loads(ok[0][1])
    orders = cli_ok(home, "orders", "--account", "c1", "--last", "0")["orders"]
    assert len(orders) == doc["orders"], "the log holds other orders than the winner's run"
    assert cli_ok(home, "positions", "--account", "c1")["equity"] == doc["equity"]


def _bars_file(path: Path) -> Path:
    rows = ["ts,open,high,low,close,volume"]
    for i in range(60):
        p = 4000.0 + 0.25 * (i % 3)
        rows.append(f"{1_800_000_000_000_000_000 + i * 60_000_000_000},{p},{p + 0.5},{p - 0.5},"
                    f"{p},{10 + i}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_data_import_gives_up_on_a_reader_that_holds_the_store_past_the_wait(home, tmp_path):
    bars = _bars_file(tmp_path / "es.csv")
    with StoreHolder(home, "read"):
        before = snapshot(home, tmp_path)
        began = time.monotonic()
        code, out, err = cli(home, "data", "import", str(bars), "--symbol", "ES",
                             env={"FOXHUNT_STORE_WAIT_S": "1"})
        took = time.monotonic() - began
        assert_one_error_line(code, out, err, "store.duckdb")
        after = snapshot(home, tmp_path)
    assert after == before, f"state changed: {changes(before, after)}"
    assert took < FAIL_FAST_S


def test_data_list_gives_up_on_a_writer_that_holds_the_store_past_the_wait(home):
    with StoreHolder(home, "write"):
        before = snapshot(home)
        code, out, err = cli(home, "data", "list", env={"FOXHUNT_STORE_WAIT_S": "1"})
        assert_one_error_line(code, out, err, "store.duckdb")
        after = snapshot(home)
    assert after == before, f"state changed: {changes(before, after)}"


def test_data_import_waits_for_a_reader_to_let_go_and_then_writes(home, tmp_path):
    bars = _bars_file(tmp_path / "es.csv")
    with StoreHolder(home, "read") as reader:
        threading.Timer(1.0, reader.release).start()
        code, _, err = cli(home, "data", "import", str(bars), "--symbol", "ES", "--json",
                           env={"FOXHUNT_STORE_WAIT_S": "60"})
    assert code == 0, err
    assert ("ES", 60) in {(r["symbol"], r["rows"]) for r in cli_ok(home, "data", "list")["series"]}


def test_readers_share_the_store_without_waiting(home):
    with StoreHolder(home, "read"):
        code, out, err = cli(home, "data", "list", "--json", env={"FOXHUNT_STORE_WAIT_S": "0"})
    assert code == 0, err
    assert [r["symbol"] for r in json.loads(out)["series"]] == ["SYN"]


def test_three_backtests_at_once_all_work_and_agree(home):
    before = snapshot(home)
    argv = ("backtest", "SYN", *SMA, "--json")
    results = finish([foxhunt(home, *argv) for _ in range(3)])
    summary = [(rc, err.strip().splitlines()[:3]) for rc, _, err in results]
    assert all(rc == 0 for rc, _, _ in results), summary
    docs = [json.loads(out)["results"] for _, out, _ in results]
    assert docs[0] == docs[1] == docs[2] and docs[0][0]["trades"] > 0
    after = snapshot(home)
    assert after == before, f"state changed: {changes(before, after)}"
