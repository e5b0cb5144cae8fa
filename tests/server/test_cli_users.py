"""`foxhunt user` and `foxhunt key`: users and keys in foxhunt's database, every change audited,
a key printed once, bad input one line and nothing written."""

from __future__ import annotations

import io
import json
import sys

import pytest

from foxhunt import schemas
from foxhunt.cli import main
from foxhunt.db import default_db_url, open_db
from foxhunt.server.auth import AuthStore

from .conftest import PASSWORD


def run(capsys, monkeypatch, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_users_and_keys_from_the_command_line(capsys, monkeypatch, isolated_home):
    code, out, _ = run(capsys, monkeypatch, "user", "add", "ann", "--role", "admin",
                       "--password-stdin", stdin=PASSWORD + "\n")
    assert code == 0 and out.strip() == "user ann added as admin"
    code, out, _ = run(capsys, monkeypatch, "user", "list", "--json")
    doc = json.loads(out)
    schemas.validate(doc)
    assert [(u["name"], u["role"], u["password"]) for u in doc["users"]] == [("ann", "admin", True)]
    code, out, err = run(capsys, monkeypatch, "key", "create", "ann", "--label", "ci")
    key = out.strip()
    assert key.startswith("fhk_") and "not shown again" in err
    code, out, _ = run(capsys, monkeypatch, "key", "list", "--json")
    listed = json.loads(out)
    schemas.validate(listed)
    assert key not in out and listed["keys"][0]["label"] == "ci"
    store = AuthStore(open_db(default_db_url(isolated_home)))
    assert store.check_key(key).name == "ann"
    assert store.check_password("ann", PASSWORD).role.name == "admin"
    run(capsys, monkeypatch, "key", "revoke", listed["keys"][0]["key_id"])
    assert store.check_key(key) is None
    trail = [a["action"] for a in store.audit_trail()]
    assert trail[0] == "user add ann" and trail[-1].startswith("key revoke ")
    assert all(a["actor"].startswith("cli:") for a in store.audit_trail())


@pytest.mark.parametrize(("argv", "stdin", "message"), [
    (("user", "add", "bob", "--role", "root", "--password-stdin"), PASSWORD,
     "error: role 'root': use viewer, trader or admin"),
    (("user", "add", "bob", "--password-stdin"), "short", "error: a password has at least 12"),
    (("user", "add", "../bob", "--password-stdin"), PASSWORD, "error: user name '../bob'"),
    (("user", "add", "bob"), "", "error: user add bob: no terminal to ask for the password on"),
    (("user", "role", "ghost", "admin"), "", "error: no user 'ghost'"),
    (("key", "create", "ghost"), "", "error: no user 'ghost'"),
    (("key", "revoke", "nope"), "", "error: no active key 'nope'"),
    (("user", "list", "--db", "mysql://x/y"), "", "error: database mysql://x/y"),
])
def test_bad_user_and_key_commands_are_one_line(capsys, monkeypatch, isolated_home, argv,
                                                stdin, message):
    code, _, err = run(capsys, monkeypatch, *argv, stdin=stdin + "\n" if stdin else "")
    assert code != 0 and err.startswith(message) and err.count("\n") == 1, err
    if (isolated_home / "foxhunt.db").exists():
        assert AuthStore(open_db(default_db_url(isolated_home))).users() == []
