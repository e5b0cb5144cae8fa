"""`foxhunt serve` (the API and the dashboard), `foxhunt user ...` and `foxhunt key ...`.

Users and keys live in foxhunt's database (`--db`, default FOXHUNT_HOME/foxhunt.db). Whoever
can write that database administers the server, as whoever can run `createuser` administers a
PostgreSQL: the commands here need no token, and each change is in the audit trail as
`cli:<login>`.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import sys
from typing import Annotated

import typer

from foxhunt.cli.common import JsonOpt, emit_json, err, fmt_ts, out, rich_table, settings_of
from foxhunt.errors import ConfigError

user_app = typer.Typer(help="Users of `foxhunt serve` and their roles (viewer, trader, admin).",
                       no_args_is_help=True)
key_app = typer.Typer(help="API keys of `foxhunt serve` users (a key is shown once).",
                      no_args_is_help=True)

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="foxhunt's database URL (default: sqlite FOXHUNT_HOME/foxhunt.db).")]
RoleArg = Annotated[str, typer.Option("--role", help="viewer (reads), trader (also trades), "
                                      "admin (also manages users and keys).")]


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.add_typer(user_app, name="user")
    app.add_typer(key_app, name="key")


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"cli:uid{os.getuid()}"


def _store(ctx: typer.Context, db: str | None):
    from foxhunt.db import default_db_url, open_db
    from foxhunt.server.auth import AuthStore

    return AuthStore(open_db(db or default_db_url(settings_of(ctx).home)))


def _password(stdin: bool, what: str) -> str:
    if stdin:
        text = sys.stdin.readline().rstrip("\n")
        if not text:
            raise ConfigError("--password-stdin: no password on standard input")
        return text
    if not sys.stdin.isatty():
        raise ConfigError(f"{what}: no terminal to ask for the password on; use --password-stdin")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ConfigError(f"{what}: the passwords differ")
    return first


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default; another "
                                      "address exposes the server: put TLS in front).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=0, max=65535)] = 8765,
    db: DbOpt = None,
    token_ttl: Annotated[int, typer.Option("--token-ttl", help="A token's life in seconds.",
                                           min=30, max=86_400)] = 900,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin", help="An origin allowed to call from a browser elsewhere (none by "
        "default; repeat for more).")] = None,
) -> None:
    """Serve the REST + WebSocket API and the dashboard (http://HOST:PORT/)."""
    import uvicorn

    from foxhunt import telemetry
    from foxhunt.configbase import validate_config
    from foxhunt.server.app import create_app
    from foxhunt.server.config import ServerConfig

    config = validate_config(ServerConfig, {
        "host": host, "port": port, "database": db, "token_ttl_s": token_ttl,
        "cors_origins": tuple(cors_origin or ())}, "foxhunt serve options")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    telemetry.configure("foxhunt-serve")
    resolved = settings_of(ctx)
    app = create_app(resolved.home, config, store_path=resolved.store_path,
                     instruments_file=resolved.instruments_file)
    if not app.state.foxhunt.auth.users():
        err.print("note: no users yet: add one with `foxhunt user add NAME --role admin`",
                  markup=False)
    if not loopback:
        err.print(f"warning: serving on {host}, reachable from other machines; use TLS in front",
                  markup=False)
    err.print(f"foxhunt serve: http://{host}:{port}/ (API {host}:{port}/api/v1, home "
              f"{resolved.home})", markup=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@user_app.command("add")
def user_add(ctx: typer.Context, name: Annotated[str, typer.Argument(help="User name.")],
             role: RoleArg = "viewer", db: DbOpt = None,
             password_stdin: Annotated[bool, typer.Option(
                 "--password-stdin", help="Read the password from standard input.")] = False,
             no_password: Annotated[bool, typer.Option(
                 "--no-password", help="Sign in with API keys only.")] = False) -> None:
    """Add a user (asks for the password, at least 12 characters)."""
    from foxhunt.server.auth import Role

    parsed = Role.parse(role)
    store = _store(ctx, db)
    password = None if no_password else _password(password_stdin, f"user add {name}")
    store.add_user(name, parsed, password)
    store.record(_actor(), f"user add {name}", 0, f"role {parsed.name}")
    out.print(f"user {name} added as {parsed.name}", markup=False)


@user_app.command("list")
def user_list(ctx: typer.Context, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """The users and their roles."""
    rows = _store(ctx, db).users()
    if as_json:
        emit_json("users", {"users": rows})
        return
    out.print(rich_table(f"users ({len(rows)})", ["name", "role", "password", "created"],
                         [[r["name"], r["role"], "yes" if r["password"] else "keys only",
                           fmt_ts(r["created_ns"])] for r in rows]))


@user_app.command("role")
def user_role(ctx: typer.Context, name: Annotated[str, typer.Argument(help="User name.")],
              role: Annotated[str, typer.Argument(help="viewer, trader or admin.")],
              db: DbOpt = None) -> None:
    """Change a user's role (a running server applies it within 2 s, to tokens already given)."""
    from foxhunt.server.auth import Role

    parsed = Role.parse(role)
    store = _store(ctx, db)
    store.set_role(name, parsed)
    store.record(_actor(), f"user role {name}", 0, f"role {parsed.name}")
    out.print(f"user {name} is now {parsed.name}", markup=False)


@user_app.command("password")
def user_password(ctx: typer.Context, name: Annotated[str, typer.Argument(help="User name.")],
                  db: DbOpt = None,
                  password_stdin: Annotated[bool, typer.Option(
                      "--password-stdin", help="Read the password from standard input.")] = False,
                  ) -> None:
    """Set a user's password."""
    store = _store(ctx, db)
    store.set_password(name, _password(password_stdin, f"user password {name}"))
    store.record(_actor(), f"user password {name}", 0)
    out.print(f"password of {name} changed", markup=False)


@user_app.command("remove")
def user_remove(ctx: typer.Context, name: Annotated[str, typer.Argument(help="User name.")],
                db: DbOpt = None) -> None:
    """Remove a user and their API keys."""
    store = _store(ctx, db)
    store.remove_user(name)
    store.record(_actor(), f"user remove {name}", 0)
    out.print(f"user {name} removed", markup=False)


@key_app.command("create")
def key_create(ctx: typer.Context, user: Annotated[str, typer.Argument(help="The key's user.")],
               label: Annotated[str, typer.Option(help="What the key is for.")] = "api",
               db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Create an API key; it is printed once (only its argon2 hash is kept)."""
    store = _store(ctx, db)
    key_id, key = store.create_key(user, label)
    store.record(_actor(), f"key create {key_id}", 0, f"user {user}, label {label}")
    if as_json:
        emit_json("key", {"key_id": key_id, "user": user, "label": label, "key": key})
        return
    out.print(key, markup=False, soft_wrap=True)
    err.print(f"key {key_id} of {user}: keep it now, it is not shown again", markup=False)


@key_app.command("list")
def key_list(ctx: typer.Context, user: Annotated[str | None, typer.Option(
        help="Only this user's keys (default: every user's).")] = None, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """API keys (their ids and labels; never the keys)."""
    rows = _store(ctx, db).list_keys(user)
    if as_json:
        emit_json("keys", {"keys": rows})
        return
    out.print(rich_table(f"API keys ({len(rows)})", ["id", "user", "label", "created", "state"],
                         [[r["key_id"], r["user"], r["label"], fmt_ts(r["created_ns"]),
                           "revoked" if r["revoked"] else "active"] for r in rows]))


@key_app.command("revoke")
def key_revoke(ctx: typer.Context, key_id: Annotated[str, typer.Argument(help="The key's id.")],
               db: DbOpt = None) -> None:
    """Revoke an API key (a running server refuses the tokens it gave within 2 s)."""
    store = _store(ctx, db)
    store.revoke_key(key_id)
    store.record(_actor(), f"key revoke {key_id}", 0)
    out.print(f"key {key_id} revoked", markup=False)


__all__ = ["register"]
