"""QuickFIX session settings: the initiator's file read and checked, the acceptor's built.

A `FixVenue` is configured by a standard QuickFIX settings file (INI: a `[DEFAULT]` section and
one `[SESSION]`), so the file a broker's onboarding sheet asks for works unchanged. QuickFIX
itself reports a bad file as a C++ exception deep inside `SocketInitiator`; here the file is
read first and every key the session needs is checked, so a mistake ends as one line naming the
file and the key. Relative paths (FileStorePath, FileLogPath, DataDictionary) are taken from
the file's own folder, not from wherever the trader happens to start.

Sequence numbers reset when a QuickFIX session's time range ends (StartTime/EndTime, and
StartDay/EndDay for a weekly session). The sample files make the session weekly (Sunday 00:00
to Saturday 23:59:59 UTC), as futures venues do, so a rehearsal that runs over midnight keeps
its sequence numbers and its resend store.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foxhunt.execution.venue import VenueError

BEGIN_STRING = "FIX.4.4"
DEFAULT_PORT = 9878
EXCHANGE_COMP_ID = "FOXHUNT-EX"
CLIENT_COMP_ID = "FOXHUNT"
WEEK = {"StartDay": "sunday", "StartTime": "00:00:00", "EndDay": "saturday",
        "EndTime": "23:59:59"}  # fmt: skip
"""A weekly session (UTC): sequence numbers reset once a week, when the session starts."""

REQUIRED = ("BeginString", "SenderCompID", "TargetCompID", "ConnectionType", "SocketConnectHost",
            "SocketConnectPort", "HeartBtInt", "FileStorePath", "StartTime", "EndTime")
_PATHS = ("FileStorePath", "FileLogPath", "DataDictionary")
_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$")
_DAYS = {"su", "mo", "tu", "we", "th", "fr", "sa"}
_COMP_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class SessionFileError(VenueError):
    """A session file is missing, unreadable, or lacks or misstates a key."""


def data_dictionary() -> Path:
    """The FIX 4.4 data dictionary installed with quickfix (`<prefix>/share/quickfix`)."""
    import quickfix

    here = Path(quickfix.__file__).resolve()
    candidates = [Path(sys.prefix) / "share" / "quickfix" / "FIX44.xml",
                  Path(sys.base_prefix) / "share" / "quickfix" / "FIX44.xml"]
    candidates += [p / "share" / "quickfix" / "FIX44.xml" for p in here.parents]
    for path in candidates:
        if path.is_file():
            return path
    raise VenueError("the FIX 4.4 data dictionary (share/quickfix/FIX44.xml) is not installed "
                     "with quickfix; reinstall quickfix-ssl")


_EXEC_TYPE = "<field number='150' name='ExecType' type='CHAR'>"
EXTENDED = "FIX44-foxhunt.xml"


def extended_dictionary(folder: Path) -> Path:
    """FIX 4.4's dictionary plus ExecType L (triggered or activated by the system, from FIX
    5.0; FIX 4.4 has no way to say a stop order triggered), written into `folder` once. Both
    ends use it unless a session file names its own DataDictionary: it accepts every
    standard FIX 4.4 message, and the exchange's trigger reports."""
    target = folder / EXTENDED
    text = data_dictionary().read_text(encoding="utf-8")
    if _EXEC_TYPE not in text:
        raise VenueError(f"{data_dictionary()}: no ExecType field; reinstall quickfix-ssl")
    text = text.replace(_EXEC_TYPE, _EXEC_TYPE + "\n   <value enum='L' "
                        "description='TRIGGERED_OR_ACTIVATED_BY_SYSTEM' />", 1)
    try:
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{EXTENDED}.{os.getpid()}")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
    except OSError as exc:
        raise VenueError(f"cannot write the FIX dictionary {target}: "
                         f"{exc.strerror or exc}") from None
    return target


def _parse_ini(path: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """[DEFAULT] and each [SESSION] as dicts (QuickFIX's INI: repeated [SESSION] sections,
    `key=value`, `#` comments), or SessionFileError naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SessionFileError(f"session file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFileError(f"session file {path}: cannot read it ({exc})") from None
    default: dict[str, str] = {}
    sessions: list[dict[str, str]] = []
    section: dict[str, str] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip().upper()
            if name == "DEFAULT":
                section = default
            elif name == "SESSION":
                section = {}
                sessions.append(section)
            else:
                raise SessionFileError(f"session file {path}: line {n}: unknown section "
                                       f"[{line[1:-1]}] (use [DEFAULT] and [SESSION])")
            continue
        key, eq, value = line.partition("=")
        if not eq or not key.strip():
            raise SessionFileError(f"session file {path}: line {n}: expected key=value, got "
                                   f"{line[:40]!r}")
        if section is None:
            raise SessionFileError(f"session file {path}: line {n}: {key.strip()} is outside "
                                   "a [DEFAULT] or [SESSION] section")
        section[key.strip()] = value.strip()
    return default, sessions


@dataclass(frozen=True)
class SessionConfig:
    """One initiator session, checked: its keys (paths made absolute) and where it goes."""

    path: Path
    keys: dict[str, str]

    @property
    def sender(self) -> str:
        return self.keys["SenderCompID"]

    @property
    def target(self) -> str:
        return self.keys["TargetCompID"]

    @property
    def address(self) -> str:
        return f"{self.keys['SocketConnectHost']}:{self.keys['SocketConnectPort']}"

    @property
    def store(self) -> Path:
        return Path(self.keys["FileStorePath"])

    @property
    def file_log(self) -> Path | None:
        log = self.keys.get("FileLogPath")
        return Path(log) if log else None

    def quickfix_settings(self) -> Any:
        """The `quickfix.SessionSettings` of this session."""
        import quickfix as fix

        settings = fix.SessionSettings()
        d = fix.Dictionary()
        for key, value in self.keys.items():
            d.setString(key, value)
        sid = fix.SessionID(self.keys["BeginString"], self.sender, self.target)
        settings.set(d)  # the defaults too: the global file log reads FileLogPath there
        settings.set(sid, d)
        return settings


def load_session_file(path: Path | str) -> SessionConfig:
    """Read and check an initiator session file; SessionFileError (one line: the file and the
    key) when it cannot serve a FIX 4.4 initiator session."""
    path = Path(path)
    default, sessions = _parse_ini(path)
    where = f"session file {path}"
    if len(sessions) != 1:
        raise SessionFileError(f"{where}: has {len(sessions)} [SESSION] sections; a FIX venue "
                               "is one session: give exactly one")
    keys = {**default, **sessions[0]}
    keys.setdefault("ConnectionType", "initiator")
    keys.setdefault("UseDataDictionary", "Y")
    missing = [k for k in REQUIRED if not keys.get(k)]
    if missing:
        raise SessionFileError(f"{where}: missing {missing[0]} (needs "
                               f"{', '.join(REQUIRED)})")

    def bad(key: str, want: str) -> SessionFileError:
        return SessionFileError(f"{where}: {key}={keys[key]!r}: {want}")

    if keys["BeginString"] != BEGIN_STRING:
        raise bad("BeginString", f"this venue speaks {BEGIN_STRING}")
    if keys["ConnectionType"].lower() != "initiator":
        raise bad("ConnectionType", "a FIX venue connects out: use initiator")
    for key in ("SenderCompID", "TargetCompID"):
        if not _COMP_ID.match(keys[key]):
            raise bad(key, "use 1-64 letters, digits, '_', '.' or '-'")
    for key, low, high in (("SocketConnectPort", 1, 65535), ("HeartBtInt", 1, 3600),
                           ("ReconnectInterval", 1, 3600), ("LogonTimeout", 1, 3600),
                           ("LogoutTimeout", 1, 3600)):
        if key in keys and not (keys[key].isdigit() and low <= int(keys[key]) <= high):
            raise bad(key, f"expected a whole number from {low} to {high}")
    for key in ("StartTime", "EndTime"):
        if not _TIME.match(keys[key]):
            raise bad(key, "expected HH:MM:SS (UTC)")
    for key in ("StartDay", "EndDay"):
        if key in keys and keys[key][:2].lower() not in _DAYS:
            raise bad(key, "expected a day of the week (sunday, monday, ...)")
    if ("StartDay" in keys) != ("EndDay" in keys):
        raise SessionFileError(f"{where}: give both StartDay and EndDay, or neither")
    if keys["UseDataDictionary"].upper() not in ("Y", "N"):
        raise bad("UseDataDictionary", "expected Y or N")
    for key in _PATHS:
        if keys.get(key):
            p = Path(keys[key]).expanduser()
            keys[key] = str(p if p.is_absolute() else (path.parent / p).resolve())
    if keys["UseDataDictionary"].upper() == "Y":
        if not keys.get("DataDictionary"):
            keys["DataDictionary"] = str(extended_dictionary(Path(keys["FileStorePath"])))
        elif not Path(keys["DataDictionary"]).is_file():
            raise bad("DataDictionary", "no such file")
    return SessionConfig(path, keys)


def session_text(keys: dict[str, str]) -> str:
    lines = ["# a QuickFIX session file: foxhunt live SYMBOL --venue fix:THIS_FILE", "[DEFAULT]"]
    lines += [f"{k}={v}" for k, v in keys.items() if k not in _SESSION_KEYS]
    lines += ["", "[SESSION]"]
    lines += [f"{k}={v}" for k, v in keys.items() if k in _SESSION_KEYS]
    return "\n".join(lines) + "\n"


_SESSION_KEYS = ("BeginString", "SenderCompID", "TargetCompID", "SocketConnectHost",
                 "SocketConnectPort")


def write_session_file(
    path: Path | str,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    sender: str = CLIENT_COMP_ID,
    target: str = EXCHANGE_COMP_ID,
    store: Path | str | None = None,
    heartbeat_s: int = 30,
    reconnect_s: int = 2,
) -> Path:
    """Write an initiator session file for the local exchange (`foxhunt venue`) and return its
    path. The store (sequence numbers, messages for resends) defaults to `fix-store/` beside
    the file; the venue's report journal lives there too."""
    path = Path(path)
    keys = {"ConnectionType": "initiator", "HeartBtInt": str(heartbeat_s),
            "ReconnectInterval": str(reconnect_s),
            "FileStorePath": str(store) if store is not None else "fix-store",
            **WEEK, "UseDataDictionary": "Y", "ValidateUserDefinedFields": "N",
            "BeginString": BEGIN_STRING, "SenderCompID": sender, "TargetCompID": target,
            "SocketConnectHost": host, "SocketConnectPort": str(port)}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(session_text(keys), encoding="utf-8")
    return path


def acceptor_settings(comp_id: str, clients: list[str], host: str, port: int, store: Path,
                      heartbeat_s: int = 30, file_log: Path | None = None) -> Any:
    """The local exchange's `quickfix.SessionSettings`: one acceptor session per client CompID
    on one port (QuickFIX C++ has no acceptor templates: each counterparty is provisioned, as
    at a real venue)."""
    import quickfix as fix

    settings = fix.SessionSettings()
    base = fix.Dictionary()
    for key, value in {"ConnectionType": "acceptor", "SocketAcceptPort": str(port),
                       "SocketAcceptHost": host, "FileStorePath": str(store),
                       "HeartBtInt": str(heartbeat_s), **WEEK, "UseDataDictionary": "Y",
                       "DataDictionary": str(extended_dictionary(store)),
                       "SocketReuseAddress": "Y",
                       "ValidateUserDefinedFields": "N", "SocketNodelay": "Y",
                       **({"FileLogPath": str(file_log)} if file_log else {})}.items():
        base.setString(key, value)
    settings.set(base)
    for client in clients:
        settings.set(fix.SessionID(BEGIN_STRING, comp_id, client), fix.Dictionary())
    return settings
