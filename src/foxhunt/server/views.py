"""What the server reads from a foxhunt home: stored series, runs, studies, accounts and their
bars. Every name that becomes a path is checked first, and the path is checked to stay inside
its folder, so `../` or a symlink cannot lead a request elsewhere."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from foxhunt.errors import FoxhuntError

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]{0,159}$")


class NotFound(FoxhuntError):
    """The named run, study, account or series does not exist (HTTP 404)."""


def inside(folder: Path, name: str, what: str) -> Path:
    """`folder/name`, refused unless `name` is a plain name and the path stays in `folder`."""
    if not isinstance(name, str) or not NAME.match(name) or ".." in name:
        raise FoxhuntError(f"{what} {name!r}: a name of letters, digits and _ . = + - "
                           "(at most 160), not a path")
    path = (folder / name).resolve()
    if path.parent != folder.resolve():
        raise FoxhuntError(f"{what} {name!r}: not inside {folder.name}/")
    return path


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise FoxhuntError(f"{path.name}: cannot be read ({exc})") from None


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written now
            break
    return out


class HomeViews:
    """Read-only views of one FOXHUNT_HOME."""

    def __init__(self, home: Path, store_path: Path, instruments_file: Path):
        self.home, self.store_path, self.instruments_file = home, store_path, instruments_file
        self._contracts: tuple[float | None, dict[str, Any]] | None = None

    # instruments and stored series ----------------------------------------------------------
    def registry(self):
        from foxhunt.data.instruments import InstrumentRegistry

        return InstrumentRegistry.load(self.instruments_file)

    def contracts(self) -> dict[str, Any]:
        """The contracts of the instruments file, read again only when the file changed."""
        from foxhunt.orders.contract import Contract

        try:
            stamp = self.instruments_file.stat().st_mtime_ns
        except OSError:
            stamp = None
        if self._contracts is None or self._contracts[0] != stamp:
            reg = self.registry()
            self._contracts = (stamp, {s: Contract.from_instrument(reg.get(s))
                                       for s in reg.symbols})
        return self._contracts[1]

    def instruments(self) -> list[dict[str, Any]]:
        reg = self.registry()
        return [reg.get(s).model_dump(mode="json") for s in reg.symbols]

    def _store(self):
        from foxhunt.data.store import MarketStore

        if not self.store_path.exists():
            raise NotFound("no market data stored yet (`foxhunt data import` or `data sample`)")
        return MarketStore(self.store_path, read_only=True)

    def series(self) -> list[dict[str, Any]]:
        if not self.store_path.exists():
            return []
        with self._store() as store:
            return [{"symbol": s.symbol, "kind": s.kind, "bars": s.spec or "ticks (raw)",
                     "first_ts": s.first_ts, "last_ts": s.last_ts, "rows": s.rows}
                    for s in store.series()]

    def bars(self, symbol: str, spec: str, start_ns: int | None = None,
             end_ns: int | None = None, last: int = 500) -> dict[str, Any]:
        from foxhunt.data.series import BarSpec
        from foxhunt.errors import DataError

        parsed = BarSpec.parse(spec)
        with self._store() as store:
            try:
                bars = store.read_bars(symbol, parsed, start_ns, end_ns)
            except DataError as exc:
                raise NotFound(str(exc)) from None
        n = len(bars.ts)
        lo = max(0, n - last) if last else 0
        cols = {c: getattr(bars, c)[lo:].tolist() for c in ("ts", "open", "high", "low", "close",
                                                              "volume")}
        return {"symbol": symbol, "bars": str(parsed), "rows": n - lo, **cols}

    # runs and studies -----------------------------------------------------------------------
    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    @property
    def studies_dir(self) -> Path:
        return self.home / "studies"

    def runs(self) -> list[dict[str, Any]]:
        if not self.runs_dir.is_dir():
            return []
        out = []
        for d in sorted(self.runs_dir.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
            if not (d.is_dir() and NAME.match(d.name) and (d / "spec.json").exists()):
                continue
            folds = _json(d / "folds.json") or []
            source = _json(d / "source.json") or {}
            out.append({"name": d.name, "symbol": source.get("symbol"), "bars": source.get("bars"),
                        "folds": len(folds), "deployed": sum(bool(f.get("deploy")) for f in folds
                                                             if isinstance(f, dict)),
                        "finished": (d / "phases.json").exists(),
                        "modified_ns": int(d.stat().st_mtime * 1e9)})
        return out

    def run(self, name: str) -> dict[str, Any]:
        d = inside(self.runs_dir, name, "run")
        if not (d / "spec.json").is_file():
            raise NotFound(f"no run {name!r} in {self.runs_dir}")
        return {"name": name, "spec": _json(d / "spec.json"), "source": _json(d / "source.json"),
                "folds": _json(d / "folds.json") or [], "phases": _json(d / "phases.json"),
                "report": (d / "report.html").is_file()}

    def curves(self, name: str) -> list[dict[str, Any]]:
        d = inside(self.runs_dir, name, "run")
        if not (d / "spec.json").is_file():
            raise NotFound(f"no run {name!r} in {self.runs_dir}")
        return _lines(d / "run.jsonl")

    def report(self, name: str) -> Path:
        d = inside(self.runs_dir, name, "run")
        path = d / "report.html"
        if not path.is_file():
            raise NotFound(f"run {name!r} has no report.html (`foxhunt report {d}`)")
        return path

    def studies(self) -> list[dict[str, Any]]:
        if not self.studies_dir.is_dir():
            return []
        out = []
        for d in sorted(self.studies_dir.iterdir()):
            doc = _json(d / "study.json") if d.is_dir() and NAME.match(d.name) else None
            if isinstance(doc, dict):
                out.append({"name": d.name, "trials": len(doc.get("trials") or []),
                            "best": doc.get("best"), "metric": doc.get("metric")})
        return out

    def study(self, name: str) -> dict[str, Any]:
        d = inside(self.studies_dir, name, "study")
        doc = _json(d / "study.json")
        if not isinstance(doc, dict):
            raise NotFound(f"no study {name!r} in {self.studies_dir}")
        return doc

    # accounts and sessions ------------------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        """Each account with a log here, its trader's arguments and whether one runs now."""
        from foxhunt.paper.accounts import account_files, accounts

        out = []
        for account in accounts(self.home):
            files = account_files(self.home, account, None)
            try:
                meta = files.read_meta() or {}
            except FoxhuntError:
                meta = {}
            out.append({"account": account, "mode": meta.get("mode", "paper") if meta else None,
                        "symbol": meta.get("symbol"), "bars": meta.get("bars"),
                        "policy": meta.get("policy"), "venue": meta.get("venue"),
                        "running": _lock_holder(files.lock_path)})
        return out

    def account_bars(self, account: str, last: int = 500) -> dict[str, Any]:
        """The bars an account's trader has seen: a live trader's bar journal, or the stored
        series a paper run replays, up to its last mark."""
        from foxhunt.paper.accounts import account_files, check_account

        files = account_files(self.home, check_account(account), None)
        meta = files.read_meta()
        if not meta:
            raise NotFound(f"account {account!r} has no trader's arguments (never traded here)")
        symbol, spec = meta["symbol"], meta["bars"]
        if meta.get("mode") == "live":
            from foxhunt.server.streams import BarTail

            rows = BarTail(files.folder / f"{files.stem}.bars.jsonl").read_new()
            rows = rows[-last:] if last else rows  # 0: all, as for a paper account
            cols = {c: [r[c] for r in rows] for c in ("open", "high", "low", "close", "volume")}
            return {"symbol": symbol, "bars": spec, "rows": len(rows),
                    "ts": [r["ts_ns"] for r in rows], **cols}
        return self.bars(symbol, spec, None, self._last_mark(account), last)

    def _last_mark(self, account: str) -> int | None:
        from foxhunt.paper.accounts import log_url, sqlite_file

        file = sqlite_file(log_url(self.home, account, None))
        if file is None or not file.exists():
            return None
        import sqlite3

        with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as db:
            row = db.execute("SELECT max(ts_ns) FROM events WHERE kind = 'price_marked'").fetchone()
        return row[0] if row and row[0] is not None else None


def _lock_holder(lock: Path) -> int | None:
    """The pid holding an account's lock now: the flock on the lock file's inode, as the kernel
    lists it in /proc/locks (asking by taking the lock would make a trader starting at that
    moment fail). Where there is no /proc/locks: the pid the file names, if it is alive."""
    try:
        inode = lock.stat().st_ino
    except OSError:
        return None
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return _pid_alive(lock)
    for line in table.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            return int(parts[4]) if parts[4].isdigit() else -1
    return None


def _pid_alive(lock: Path) -> int | None:
    try:
        text = lock.read_text().strip()
        if text.isdigit():
            os.kill(int(text), 0)
            return int(text)
    except (OSError, ProcessLookupError):
        pass
    return None
