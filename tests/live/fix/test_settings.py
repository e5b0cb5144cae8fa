"""Session files: a bad one ends as one line naming the file and the key."""

from __future__ import annotations

import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.live.fix.settings import (
    SessionFileError,
    load_session_file,
    write_session_file,
)

GOOD = """[DEFAULT]
ConnectionType=initiator
HeartBtInt=30
FileStorePath=store
StartTime=00:00:00
EndTime=00:00:00
[SESSION]
BeginString=FIX.4.4
SenderCompID=ME
TargetCompID=THEM
SocketConnectHost=127.0.0.1
SocketConnectPort=9878
"""


def test_a_written_sample_reads_back_with_paths_from_its_folder(tmp_path):
    path = write_session_file(tmp_path / "a" / "s.cfg", port=9999, sender="ME", target="EX")
    config = load_session_file(path)
    assert (config.sender, config.target, config.address) == ("ME", "EX", "127.0.0.1:9999")
    assert config.store == (tmp_path / "a" / "fix-store").resolve()
    assert config.keys["DataDictionary"].endswith("FIX44-foxhunt.xml")


@pytest.mark.parametrize("edit,expected", [
    (lambda t: t.replace("SocketConnectPort=9878\n", ""), "missing SocketConnectPort"),
    (lambda t: t.replace("9878", "99999"), "SocketConnectPort='99999': expected a whole number"),
    (lambda t: t.replace("FIX.4.4", "FIX.4.2"), "BeginString='FIX.4.2': this venue speaks FIX.4.4"),
    (lambda t: t.replace("HeartBtInt=30", "HeartBtInt=soon"), "HeartBtInt='soon'"),
    (lambda t: t.replace("=initiator", "=acceptor"), "ConnectionType='acceptor'"),
    (lambda t: t.replace("EndTime=00:00:00", "EndTime=25:00"), "EndTime='25:00': expected HH:MM:SS"),
    (lambda t: t + t[t.index("[SESSION]"):], "has 2 [SESSION] sections"),
    (lambda t: t.replace("[DEFAULT]", "[DEFAULTS]"), "line 1: unknown section [DEFAULTS]"),
    (lambda t: t.replace("HeartBtInt=30", "HeartBtInt"), "line 3: expected key=value"),
    (lambda t: t + "DataDictionary=nowhere.xml\n", "DataDictionary="),
    (lambda t: t.replace("SenderCompID=ME", "SenderCompID=M E"), "SenderCompID='M E'"),
])  # fmt: skip
def test_a_bad_session_file_is_one_line_naming_the_file_and_the_key(tmp_path, edit, expected):
    path = tmp_path / "session.cfg"
    path.write_text(edit(GOOD))
    with pytest.raises(SessionFileError) as info:
        load_session_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and expected in message
    assert isinstance(info.value, FoxhuntError)


def test_a_missing_file(tmp_path):
    with pytest.raises(SessionFileError, match=r"session file .*nope.cfg: no such file"):
        load_session_file(tmp_path / "nope.cfg")


def test_the_gateway_refuses_a_bad_file_before_starting_quickfix(tmp_path):
    from foxhunt.live.fix.gateway import FixVenue

    path = tmp_path / "session.cfg"
    path.write_text(GOOD.replace("TargetCompID=THEM\n", ""))
    with pytest.raises(SessionFileError, match="missing TargetCompID"):
        FixVenue(path, {})
