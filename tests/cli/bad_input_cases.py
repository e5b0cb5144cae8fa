"""The cases of `test_bad_input.py`: one spec line each.

A case is a command line, what the setup damages or writes first (in the account's home or in
the case's own input folder), and the word its one error line must contain: the file, the
option or the key that is wrong. `{in}` in the command line stands for the case's input
folder.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

Setup = Callable[[Path, Path], None]  # (FOXHUNT_HOME, input folder) -> None

SYN = ("SYN", "--bars", "1min")
SMA = ("--strategy", "sma:10,30")
A1 = ("--account", "a1")
PAPER_A1 = ("paper", *SYN, *SMA, *A1)  # the arguments of the module's finished run on a1
RESUME_A1 = (*PAPER_A1, "--resume")
LOG = "trading/a1.sqlite"
JOURNAL = "trading/a1.venue.jsonl"
META = "trading/a1.paper.json"
STORE = "store.duckdb"


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    names: str  # the error line contains this: the file, option or key that is wrong
    setup: tuple[Setup, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    secret: str | None = None  # must appear nowhere in the output

    def args(self, inputs: Path) -> list[str]:
        return [a.replace("{in}", str(inputs)) for a in self.argv]


# ----------------------------------------------------------------------------- running it


def cli(home: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`foxhunt ARGV` in this process, as the console script runs it (`foxhunt.cli.main`), on
    FOXHUNT_HOME=home: (exit code, stdout, stderr). An exception that escapes `main` ends as the
    interpreter would end it: exit code 1 and its traceback on stderr."""
    from foxhunt.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FOXHUNT_HOME", str(home))
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in argv])
                code = 0
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:  # sys.exit("text"): the interpreter prints it and exits 1
                    code = 1
                    err.write(f"{exc.code}\n")
            except BaseException:  # noqa: BLE001 - what the process would die of
                code = 1
                err.write(traceback.format_exc())
    gc.collect()  # what the process's exit would close (an undisposed engine's connections)
    return code, out.getvalue(), err.getvalue()


def cli_ok(home: Path, *argv: str):
    """A command that must work (the fixtures' setup); its JSON document."""
    code, out, err = cli(home, *argv, "--json")
    assert code == 0, f"foxhunt {' '.join(argv)} failed: {err}"
    return json.loads(out)


# ----------------------------------------------------------------------------- damage


def _garbage(n: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(n)


def garbage_middle(rel: str) -> Setup:
    """Random bytes over the middle half of the file."""
    def setup(home: Path, _inputs: Path) -> None:
        path = home / rel
        data = bytearray(path.read_bytes())
        lo, hi = len(data) // 4, 3 * len(data) // 4
        data[lo:hi] = _garbage(hi - lo)
        path.write_bytes(bytes(data))
    return setup


def truncated(rel: str) -> Setup:
    """The file cut to its first half (a crash or a full disk mid-copy)."""
    def setup(home: Path, _inputs: Path) -> None:
        path = home / rel
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    return setup


def replaced_by_text(rel: str) -> Setup:
    def setup(home: Path, _inputs: Path) -> None:
        (home / rel).write_text("these are my notes, not a database\n" * 40)
    return setup


def emptied(rel: str) -> Setup:
    def setup(home: Path, _inputs: Path) -> None:
        (home / rel).write_bytes(b"")
    return setup


def removed(rel: str) -> Setup:
    def setup(home: Path, _inputs: Path) -> None:
        (home / rel).unlink()
    return setup


def journal_garbage_line(home: Path, _inputs: Path) -> None:
    """A line of garbage between two good lines of the venue journal (not a torn last line)."""
    path = home / JOURNAL
    lines = path.read_text().splitlines(keepends=True)
    mid = len(lines) // 2
    path.write_text("".join(lines[:mid] + ["{\"op\": \"order\", \x00\x01 garbage\n"] + lines[mid:]))


def journal_missing_keys(home: Path, _inputs: Path) -> None:
    """The journal's first order line (a valid JSON object) lost every key but its op."""
    path = home / JOURNAL
    lines = path.read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if json.loads(line)["op"] == "order")
    assert i < len(lines) - 1, "the order line is the last line: pick another"
    lines[i] = json.dumps({"op": "order"}) + "\n"
    path.write_text("".join(lines))


def meta_risk_wrong(home: Path, _inputs: Path) -> None:
    """The run's paper.json is valid JSON, but its risk limits are not limits."""
    path = home / META
    doc = json.loads(path.read_text())
    doc["risk"] = {**doc["risk"], "max_order_qty": "lots"}
    path.write_text(json.dumps(doc, indent=1))


def write(name: str, content: str | bytes) -> Setup:
    """A file the case passes in, in its input folder."""
    def setup(_home: Path, inputs: Path) -> None:
        path = inputs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return setup


def checkpoint(name: str, cut: bool) -> Setup:
    """A file in foxhunt's checkpoint format (a small network, no training spec), whole or cut
    to its first half."""
    def setup(_home: Path, inputs: Path) -> None:
        from torch import nn

        from foxhunt.training.checkpoint import save_checkpoint

        path = save_checkpoint(inputs / name, nn.Linear(4, 3), {}, {})
        if cut:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
    return setup


def mkdir(name: str) -> Setup:
    def setup(_home: Path, inputs: Path) -> None:
        (inputs / name).mkdir(parents=True)
        (inputs / name / "notes.txt").write_text("not a run\n")
    return setup


def continuous_es(home: Path, inputs: Path) -> None:
    """ES's four synthetic contract months (tests/data/contract_set.py) imported and stitched
    into a continuous ES 1d series (three rolls: the last month is ESZ24)."""
    from ..data.contract_set import write_contract_csvs

    paths = write_contract_csvs(inputs)
    cli_ok(home, "data", "import", *map(str, paths), "--symbol", "ES")
    assert cli_ok(home, "data", "continuous", "ES", "--roll", "volume")["rolls"]


def a1_in(state: str) -> Setup:
    """a1 brought to `state` (HALTED or ACTIVE) by an operator through the CLI, unless it is in
    it already (the run on a1 may end HALTED by a breaker)."""
    def setup(home: Path, _inputs: Path) -> None:
        if cli_ok(home, "risk", "status", *A1)["trading_state"] != state:
            action = "halt" if state == "HALTED" else "resume"
            assert cli_ok(home, "risk", action, *A1, "--reason", "setup")["trading_state"] == state
    return setup


def bars_csv(name: str, bad_row: int | None = None) -> Setup:
    """One-minute bars on the 0.25 grid; `bad_row` has its high below its low."""
    def setup(_home: Path, inputs: Path) -> None:
        rows = ["ts,open,high,low,close,volume"]
        price, start = 4000.0, 1_800_000_000_000_000_000
        for i in range(60):
            o, c = price, price + (0.25 if i % 2 else -0.25)
            h, low = max(o, c) + 0.25, min(o, c) - 0.25
            if bad_row is not None and i == bad_row - 1:
                h = low - 1.0
            rows.append(f"{start + i * 60_000_000_000},{o},{h},{low},{c},{10 + i}")
            price = c
        (inputs / name).write_text("\n".join(rows) + "\n")
    return setup


# ----------------------------------------------------------------------------- the cases

CASES: list[Case] = []


def case(id: str, argv: tuple[str, ...], names: str, *setup: Setup, env=None, secret=None):
    CASES.append(Case(id, tuple(argv), names, tuple(setup), dict(env or {}), secret))


# Damaged event log: every command that reads it refuses it, and writes nothing into it.
_LOG_READERS = {
    "orders": ("orders", *A1),
    "positions": ("positions", *A1),
    "risk status": ("risk", "status", *A1),
    "risk halt": ("risk", "halt", *A1),
    "risk kill": ("risk", "kill", *A1),
    "paper --resume": RESUME_A1,
}
_LOG_DAMAGE = {
    "garbage over its middle": garbage_middle(LOG),
    "truncated to half": truncated(LOG),
    "replaced by text": replaced_by_text(LOG),
    "empty": emptied(LOG),
}
for _what, _damage in _LOG_DAMAGE.items():
    for _cmd, _argv in _LOG_READERS.items():
        case(f"{_cmd}: the account's event log is {_what}", _argv, "a1.sqlite", _damage)

# The venue's journal and the run's paper.json.
case("paper --resume: the venue journal has a garbage line in its middle", RESUME_A1,
     "a1.venue.jsonl", journal_garbage_line)
case("paper --resume: a venue journal line is JSON missing its keys", RESUME_A1,
     "a1.venue.jsonl", journal_missing_keys)
case("paper --resume: the run's paper.json is truncated", RESUME_A1, "a1.paper.json",
     truncated(META))
case("risk status: the run's paper.json is truncated", ("risk", "status", *A1), "a1.paper.json",
     truncated(META))
case("risk halt: the run's paper.json is truncated", ("risk", "halt", *A1), "a1.paper.json",
     truncated(META))
case("risk status: the run's paper.json holds risk limits that are not limits",
     ("risk", "status", *A1), "a1.paper.json", meta_risk_wrong)

# The market store.
_STORE_READERS = {
    "data list": ("data", "list"),
    "backtest": ("backtest", *SYN, *SMA),
    "paper": ("paper", *SYN, *SMA, "--account", "s1"),
}
for _what, _damage in {"garbage over its middle": garbage_middle(STORE),
                       "truncated to half": truncated(STORE)}.items():
    for _cmd, _argv in _STORE_READERS.items():
        case(f"{_cmd}: the market store is {_what}", _argv, "store.duckdb", _damage)
case("data import: a bar file with a high below its low names the row and stores nothing",
     ("data", "import", "{in}/bad.csv", "--symbol", "SYN", "--bars", "1min"), "row 7",
     bars_csv("bad.csv", bad_row=7))
case("data import: the file does not exist",
     ("data", "import", "{in}/missing.csv", "--symbol", "SYN"), "missing.csv")

# Checkpoints.
for _cmd, _argv in {"backtest": ("backtest", *SYN),
                    "paper": ("paper", *SYN, "--account", "k1")}.items():
    case(f"{_cmd} --checkpoint: the file is garbage", (*_argv, "--checkpoint", "{in}/garbage.pt"),
         "garbage.pt", write("garbage.pt", _garbage(50_000)))
    case(f"{_cmd} --checkpoint: the checkpoint is truncated",
         (*_argv, "--checkpoint", "{in}/cut.pt"), "cut.pt", checkpoint("cut.pt", cut=True))
    case(f"{_cmd} --checkpoint: the file does not exist",
         (*_argv, "--checkpoint", "{in}/missing.pt"), "missing.pt")
    case(f"{_cmd} --checkpoint: a foxhunt checkpoint with no training spec",
         (*_argv, "--checkpoint", "{in}/nospec.pt"), "nospec.pt", checkpoint("nospec.pt", cut=False))
case("paper --run: the directory is not a run", ("paper", *SYN, "--run", "{in}/notarun",
                                                  "--account", "k2"), "notarun", mkdir("notarun"))
case("backtest --run: the directory is not a run", ("backtest", *SYN, "--run", "{in}/notarun"),
     "notarun", mkdir("notarun"))

# --config FILE.
_CONFIG_USERS = {
    "paper": ("paper", *SYN, *SMA, "--account", "g1"),
    "backtest": ("backtest", *SYN, *SMA),
}
for _cmd, _argv in _CONFIG_USERS.items():
    case(f"{_cmd}: --config has a TOML syntax error", ("--config", "{in}/cfg.toml", *_argv),
         "cfg.toml", write("cfg.toml", "[env]\nwindow = = 4\n"))
    case(f"{_cmd}: --config has an unknown key", ("--config", "{in}/cfg.toml", *_argv),
         "windw", write("cfg.toml", "[env]\nwindw = 4\n"))
    case(f"{_cmd}: --config gives a key a value of the wrong type",
         ("--config", "{in}/cfg.toml", *_argv), "window", write("cfg.toml", "[env]\nwindow = \"four\"\n"))
case("data list: --config is binary garbage", ("--config", "{in}/cfg.toml", "data", "list"),
     "cfg.toml", write("cfg.toml", b"\xff\xfe\x00garbage\x81\x82" * 20))
case("data list: --config does not exist", ("--config", "{in}/nope.toml", "data", "list"),
     "nope.toml")

# paper --risk FILE: every limit checked before anything is written.
_RISK_ARGV = ("paper", *SYN, *SMA, "--account", "r1", "--risk", "{in}/risk.toml")


def risk_case(id: str, body: str, names: str) -> None:
    case(f"paper --risk: {id}", _RISK_ARGV, names, write("risk.toml", body))


risk_case("order_rate_window_s = inf", "[risk]\norder_rate_window_s = inf\n", "order_rate_window_s")
risk_case("order_rate_window_s = nan", "[risk]\norder_rate_window_s = nan\n", "order_rate_window_s")
risk_case("order_rate_window_s = -1", "[risk]\norder_rate_window_s = -1\n", "order_rate_window_s")
risk_case("order_rate_window_s = 0", "[risk]\norder_rate_window_s = 0\n", "order_rate_window_s")
risk_case("max_position = true", "[risk]\nmax_position = true\n", "max_position")
risk_case("max_order_qty = \"7\" (text)", "[risk]\nmax_order_qty = \"7\"\n", "max_order_qty")
risk_case("max_order_qty = 0", "[risk]\nmax_order_qty = 0\n", "max_order_qty")
risk_case("max_order_qty = 2.5", "[risk]\nmax_order_qty = 2.5\n", "max_order_qty")
risk_case("max_order_rate = 1e3 (a float for a count)", "[risk]\nmax_order_rate = 1e3\n",
          "max_order_rate")
# flatten_on_breach (a bool) may have become on_breach = "flatten" | "reduce": either way a
# "yes" under either name is an error naming the key (a wrong value, or an unknown key).
risk_case("flatten_on_breach = \"yes\"", "[risk]\nflatten_on_breach = \"yes\"\n", "flatten_on_breach")
risk_case("on_breach = \"yes\"", "[risk]\non_breach = \"yes\"\n", "on_breach")
risk_case("daily_loss_limit = -5", "[risk]\ndaily_loss_limit = -5\n", "daily_loss_limit")
risk_case("max_drawdown = nan", "[risk]\nmax_drawdown = nan\n", "max_drawdown")
risk_case("max_gross_notional = \"lots\"", "[risk]\nmax_gross_notional = \"lots\"\n",
          "max_gross_notional")
risk_case("price_collar_pct = 0", "[risk]\nprice_collar_pct = 0\n", "price_collar_pct")
risk_case("var_confidence = 1.5", "[risk]\nvar_confidence = 1.5\n", "var_confidence")
risk_case("day_tz = \"Mars/Olympus\"", "[risk]\nday_tz = \"Mars/Olympus\"\n", "day_tz")
risk_case("day_close = \"25:00\"", "[risk]\nday_close = \"25:00\"\n", "day_close")
risk_case("an unknown key", "[risk]\nmax_lots = 3\n", "max_lots")
risk_case("risk.instruments.NOPE names no instrument",
          "[risk]\n[risk.instruments.NOPE]\nmax_order_qty = 1\n", "NOPE")
risk_case("risk.instruments.SYN max_order_qty = 0",
          "[risk]\n[risk.instruments.SYN]\nmax_order_qty = 0\n", "max_order_qty")
risk_case("no risk table", "[limits]\nmax_order_qty = 1\n", "[risk]")
risk_case("the file is not TOML", "max_order_qty: 5\nthis is = = not toml\n", "risk.toml")
case("paper --risk: the file is binary garbage", _RISK_ARGV, "risk.toml",
     write("risk.toml", _garbage(300)))
case("paper --risk: the file does not exist",
     ("paper", *SYN, *SMA, "--account", "r1", "--risk", "{in}/nope.toml"), "nope.toml")

# Values on the command line.
_P = ("paper", *SYN, *SMA)
case("paper --speed garbage", (*_P, "--account", "v1", "--speed", "warp"), "--speed")
case("paper --speed 0x", (*_P, "--account", "v1", "--speed", "0x"), "--speed")
case("paper --speed -1x", (*_P, "--account", "v1", "--speed", "-1x"), "--speed")
case("paper --account with a slash", (*_P, "--account", "a/b"), "--account")
case("paper --account ../a1 (out of the trading folder)", (*_P, "--account", "../a1"), "--account")
case("paper --account empty", (*_P, "--account", ""), "--account")
case("paper --account of 65 characters", (*_P, "--account", "x" * 65), "--account")
case("orders --account with a slash", ("orders", "--account", "a/b"), "--account")
case("risk kill --account empty", ("risk", "kill", "--account", ""), "--account")
case("orders --status NOPE", ("orders", *A1, "--status", "NOPE"), "--status")
case("orders --last -1", ("orders", *A1, "--last", "-1"), "--last")
case("paper --from garbage", (*_P, "--account", "v1", "--from", "yesterday-ish"), "--from")
case("backtest --from garbage", ("backtest", *SYN, *SMA, "--from", "yesterday-ish"), "--from")
case("paper --from after --to", (*_P, "--account", "v1", "--from", "2024-01-04T15:00:00Z",
                                 "--to", "2024-01-03T15:00:00Z"), "--from")
case("backtest --from after --to", ("backtest", *SYN, *SMA, "--from", "2024-01-04T15:00:00Z",
                                    "--to", "2024-01-03T15:00:00Z"), "--from")
case("data synth --bars 7parsecs", ("data", "synth", "--symbol", "SYN", "--bars", "7parsecs"),
     "--bars")
case("backtest --bars 7parsecs", ("backtest", "SYN", "--bars", "7parsecs", *SMA), "7parsecs")
case("paper --bars 7parsecs", ("paper", "SYN", "--bars", "7parsecs", *SMA, "--account", "v1"),
     "7parsecs")
case("paper on an unknown symbol", ("paper", "NOPE", *SMA, "--account", "v1"), "NOPE")
case("backtest on an unknown symbol", ("backtest", "NOPE", *SMA), "NOPE")
case("paper on a symbol with no stored bars", ("paper", "ES", *SMA, "--account", "v1"), "ES")
case("backtest on a symbol with no stored bars", ("backtest", "ES", *SMA), "ES")
case("backtest --device quantum", ("backtest", *SYN, *SMA, "--device", "quantum"), "quantum")
case("paper with --strategy and --checkpoint", (*_P, "--checkpoint", "{in}/x.pt",
                                                "--account", "v1"), "--checkpoint")
case("paper with --run and --strategy", (*_P, "--run", "{in}", "--account", "v1"), "--run")
case("paper with none of --run, --checkpoint, --strategy", ("paper", *SYN, "--account", "v1"),
     "--strategy")
case("paper --strategy sma:30,10 (fast above slow)", ("paper", *SYN, "--strategy", "sma:30,10",
                                                      "--account", "v1"), "sma:30,10")
case("paper --strategy sma:x", ("paper", *SYN, "--strategy", "sma:x", "--account", "v1"), "sma:x")
case("paper --strategy nope:1", ("paper", *SYN, "--strategy", "nope:1", "--account", "v1"),
     "nope:1")
case("backtest --strategy sma:30,10", ("backtest", *SYN, "--strategy", "sma:30,10"), "sma:30,10")
case("paper --resume on an account with no run", (*_P, "--account", "fresh", "--resume"), "fresh")
case("paper --resume: the log holds a run but its paper.json is missing", RESUME_A1,
     "a1.paper.json", removed(META))
case("paper --resume: the log is gone but the venue journal is still there", RESUME_A1,
     "a1.venue.jsonl", removed(LOG))
case("paper without --resume on an account that already has a log", PAPER_A1, "--resume")
case("paper --resume with another strategy than the run's",
     ("paper", *SYN, "--strategy", "sma:5,30", *A1, "--resume"), "policy")
case("paper --resume with another window than the run's",
     (*RESUME_A1, "--to", "2024-01-03T20:00:00Z"), "window")
case("risk halt on an account already HALTED", ("risk", "halt", *A1), "a1", a1_in("HALTED"))
case("risk resume on an account already ACTIVE", ("risk", "resume", *A1), "a1", a1_in("ACTIVE"))
case("orders for an account that does not exist", ("orders", "--account", "nobody"), "nobody")
case("positions for an account that does not exist", ("positions", "--account", "nobody"), "nobody")
case("risk kill for an account that does not exist", ("risk", "kill", "--account", "nobody"),
     "nobody")
# foxhunt live, foxhunt venue, risk adopt.
LIVE = ("live", *SYN, *SMA)
case("live --venue of no known kind", (*LIVE, "--venue", "tcp:1.2.3.4:5"), "--venue")
case("live --venue fix: with no file", (*LIVE, "--venue", "fix:{in}/none.cfg"), "none.cfg")
case("live --venue ib: without a port", (*LIVE, "--venue", "ib:127.0.0.1"), "ib:HOST:PORT")
case("live --venue ib: port out of range", (*LIVE, "--venue", "ib:127.0.0.1:70000"), "70000")
case("live --venue ib: without --ib-contracts", (*LIVE, "--venue", "ib:127.0.0.1:7497"),
     "--ib-contracts")
case("live --on-mismatch of no known kind",
     (*LIVE, "--venue", "ib:127.0.0.1:7497", "--on-mismatch", "ignore"), "--on-mismatch")
case("live with a FIX session file that is not one", (*LIVE, "--venue", "fix:{in}/s.cfg"),
     "s.cfg", write("s.cfg", "[SESSION]\nBeginString=FIX.4.2\n"))
case("live --feed of no known kind", (*LIVE, "--venue", "ib:127.0.0.1:7497", "--feed", "tv"),
     "--feed")
case("live --feed replay without --history-to",
     (*LIVE, "--venue", "ib:127.0.0.1:7497", "--feed", "replay:10x"), "--history-to")
case("live --feed replay at a speed of no known kind",
     (*LIVE, "--venue", "ib:127.0.0.1:7497", "--feed", "replay:fast"), "replay:fast")
case("live --feed databento without the package",
     (*LIVE, "--venue", "ib:127.0.0.1:7497", "--feed", "databento:GLBX.MDP3:ES.c.0"), "databento")
case("live on a continuous series (it would trade the stitched prices, never rolled)",
     ("live", "ES", "--bars", "1d", *SMA, "--venue", "ib:127.0.0.1:7497"),
     "ES 1d is a continuous series, and foxhunt live does not roll a position yet",
     continuous_es)
case("venue --speed of no known kind", ("venue", "SYN", "--speed", "warp"), "warp")
case("risk adopt on an account that is not live",
     ("risk", "adopt", "SYN", "--venue", "ib:127.0.0.1:7497", "--reason", "r", *A1), "a1")
case("risk adopt without a reason",
     ("risk", "adopt", "SYN", "--venue", "ib:127.0.0.1:7497", "--reason", " ", *A1), "--reason")
case("FOXHUNT_STORE_WAIT_S is not a number", ("data", "list"), "FOXHUNT_STORE_WAIT_S",
     env={"FOXHUNT_STORE_WAIT_S": "soon"})
case("FOXHUNT_GPU_PROFILE names no profile", ("config", "show"), "FOXHUNT_GPU_PROFILE",
     env={"FOXHUNT_GPU_PROFILE": "quantum9000"})

# --log URL.
_PG_DOWN = "postgresql+psycopg://nobody@127.0.0.1:1/db"  # nothing listens on port 1
_PG_SECRET = "postgresql+psycopg://bob:hunter2sekrit@127.0.0.1:1/db"
for _cmd, _argv in {"orders": ("orders", "--account", "u1"),
                    "paper": ("paper", *SYN, *SMA, "--account", "u1")}.items():
    case(f"{_cmd} --log mysql://x/y (not a supported database)", (*_argv, "--log", "mysql://x/y"),
         "mysql")
    case(f"{_cmd} --log notaurl", (*_argv, "--log", "notaurl"), "notaurl")
    case(f"{_cmd} --log sqlite in a folder that cannot be created",
         (*_argv, "--log", "sqlite:////proc/foxhunt-no-such-dir/x.sqlite"), "foxhunt-no-such-dir")
    case(f"{_cmd} --log postgresql where nothing listens (fails fast)",
         (*_argv, "--log", _PG_DOWN), "127.0.0.1")
    case(f"{_cmd} --log postgresql with a password does not print it",
         (*_argv, "--log", _PG_SECRET), "127.0.0.1", secret="hunter2sekrit")
