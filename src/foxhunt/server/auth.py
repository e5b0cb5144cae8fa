"""Who may call the server: users with roles, API keys, short-lived tokens, and the audit trail.

Passwords and API keys are stored only as argon2id hashes (argon2-cffi). A caller trades a
password or an API key for a token (`TokenIssuer`: an HS256 JWT, 15 minutes by default) and
sends the token with every request; the token carries the caller's name and role, so a request
costs one HMAC, not an argon2 verification. The signing key is made once per database and kept
in it, so every server process on one database accepts the others' tokens.

Roles are ordered: a viewer reads, a trader also trades (orders, sessions, the kill switch,
jobs), an admin also manages users and keys. Every mutating call is written to the `audit`
table with who made it; secrets never are.

An API key reads `fhk_<key id>_<secret>`: the id finds its row, the secret is checked against
the row's hash, and the id alone (never the secret) names the key in listings and the audit.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from foxhunt.configbase import StrictConfig
from foxhunt.db import create_tables, write_transaction
from foxhunt.errors import FoxhuntError


class AuthError(FoxhuntError):
    """A user, key or token command could not be done (unknown user, a name taken, ...)."""


class Role(IntEnum):
    viewer = 1
    trader = 2
    admin = 3

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.strip().lower()]
        except KeyError:
            raise AuthError(f"role {text!r}: use viewer, trader or admin") from None


@dataclass(frozen=True)
class Principal:
    """The caller of one request, as its token names it."""

    name: str
    role: Role
    via: str  # "password" or "key:<id>"

    def may(self, role: Role) -> bool:
        return self.role >= role


class Argon2Settings(StrictConfig):
    """argon2id cost: the library's defaults (RFC 9106's second recommendation) unless a test
    asks for less."""

    time_cost: int = 3
    memory_kib: int = 65536
    parallelism: int = 4


_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_KEY = re.compile(r"^fhk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
MIN_PASSWORD = 12

metadata = sa.MetaData()
users = sa.Table(
    "users", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("password_hash", sa.Text, nullable=True),
    sa.Column("created_ns", sa.BigInteger, nullable=False),
)
api_keys = sa.Table(
    "api_keys", metadata,
    sa.Column("key_id", sa.String(12), primary_key=True),
    sa.Column("user_name", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"),
              nullable=False),
    sa.Column("label", sa.String(100), nullable=False),
    sa.Column("secret_hash", sa.Text, nullable=False),
    sa.Column("created_ns", sa.BigInteger, nullable=False),
    sa.Column("revoked_ns", sa.BigInteger, nullable=True),
)
audit = sa.Table(
    "audit", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts_ns", sa.BigInteger, nullable=False),
    sa.Column("actor", sa.String(80), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("detail", sa.Text, nullable=False, default=""),
)
server_keys = sa.Table(
    "server_keys", metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
)


def _check_user(name: str) -> str:
    if not isinstance(name, str) or not _USER.match(name):
        raise AuthError(f"user name {name!r}: use 1-64 letters, digits or _ . @ -")
    return name


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise AuthError(f"a password has at least {MIN_PASSWORD} characters")


class AuthStore:
    """Users, API keys, the audit trail and the token signing key in the SQL database."""

    def __init__(self, engine: sa.Engine, argon2: Argon2Settings | None = None):
        a = argon2 or Argon2Settings()
        self.engine = engine
        self.hasher = PasswordHasher(time_cost=a.time_cost, memory_cost=a.memory_kib,
                                     parallelism=a.parallelism)
        create_tables(engine, metadata)

    # users ------------------------------------------------------------------------------
    def add_user(self, name: str, role: Role, password: str | None = None) -> None:
        """A user who signs in with `password`, or (None) only with API keys."""
        _check_user(name)
        if password is not None:
            _check_password(password)
        digest = None if password is None else self.hasher.hash(password)
        with write_transaction(self.engine) as conn:
            if conn.execute(sa.select(users.c.name).where(users.c.name == name)).first():
                raise AuthError(f"user {name!r} exists")
            conn.execute(users.insert().values(name=name, role=role.name, password_hash=digest,
                                               created_ns=time.time_ns()))

    def set_password(self, name: str, password: str) -> None:
        _check_password(password)
        self._update(name, password_hash=self.hasher.hash(password))

    def set_role(self, name: str, role: Role) -> None:
        self._update(name, role=role.name)

    def _update(self, name: str, **values: Any) -> None:
        with write_transaction(self.engine) as conn:
            if conn.execute(users.update().where(users.c.name == name).values(**values)).rowcount != 1:
                raise AuthError(f"no user {name!r}")

    def remove_user(self, name: str) -> None:
        with write_transaction(self.engine) as conn:
            conn.execute(api_keys.delete().where(api_keys.c.user_name == name))
            if conn.execute(users.delete().where(users.c.name == name)).rowcount != 1:
                raise AuthError(f"no user {name!r}")

    def users(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(users.c.name, users.c.role, users.c.created_ns,
                                          users.c.password_hash.is_not(None))
                                .order_by(users.c.name)).all()
        return [{"name": n, "role": r, "created_ns": c, "password": bool(p)} for n, r, c, p in rows]

    def current(self, who: Principal) -> Principal | None:
        """The token's caller as the database has them now: their role today, or None when the
        user was removed or the API key the token came from was revoked."""
        q = sa.select(users.c.role).where(users.c.name == who.name)
        key_id = who.via[4:] if who.via.startswith("key:") else None
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
            if row is None:
                return None
            if key_id is not None and conn.execute(sa.select(api_keys.c.key_id).where(
                    (api_keys.c.key_id == key_id) & (api_keys.c.user_name == who.name)
                    & api_keys.c.revoked_ns.is_(None))).first() is None:
                return None
        return Principal(who.name, Role[row[0]], who.via)

    def role_of(self, name: str) -> Role | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(users.c.role).where(users.c.name == name)).first()
        return None if row is None else Role[row[0]]

    def check_password(self, name: str, password: str) -> Principal | None:
        """The user if `password` is theirs. An unknown name costs one hash too, so the answer's
        time does not tell which names exist."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(users.c.role, users.c.password_hash)
                               .where(users.c.name == name)).first()
        digest = row[1] if row is not None and row[1] else None
        if not self._verify(digest, password):
            return None
        return Principal(name, Role[row[0]], "password")

    def _verify(self, digest: str | None, secret: str) -> bool:
        if digest is None:
            self.hasher.hash(secret)
            return False
        try:
            return self.hasher.verify(digest, secret)
        except (VerificationError, InvalidHashError):
            return False

    # API keys ---------------------------------------------------------------------------
    def create_key(self, user: str, label: str) -> tuple[str, str]:
        """A new key of `user`: (key id, the full key). The key is shown once: only its hash
        is kept."""
        if not 1 <= len(label) <= 100:
            raise AuthError("a key's label has 1-100 characters")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        with write_transaction(self.engine) as conn:
            if not conn.execute(sa.select(users.c.name).where(users.c.name == user)).first():
                raise AuthError(f"no user {user!r}")
            conn.execute(api_keys.insert().values(
                key_id=key_id, user_name=user, label=label, secret_hash=self.hasher.hash(secret),
                created_ns=time.time_ns()))
        return key_id, f"fhk_{key_id}_{secret}"

    def revoke_key(self, key_id: str) -> None:
        with write_transaction(self.engine) as conn:
            done = conn.execute(api_keys.update().where(
                (api_keys.c.key_id == key_id) & api_keys.c.revoked_ns.is_(None))
                .values(revoked_ns=time.time_ns())).rowcount
        if done != 1:
            raise AuthError(f"no active key {key_id!r}")

    def list_keys(self, user: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(api_keys.c.key_id, api_keys.c.user_name, api_keys.c.label,
                      api_keys.c.created_ns, api_keys.c.revoked_ns).order_by(api_keys.c.created_ns)
        if user is not None:
            q = q.where(api_keys.c.user_name == user)
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [{"key_id": k, "user": u, "label": lb, "created_ns": c, "revoked": r is not None}
                for k, u, lb, c, r in rows]

    def check_key(self, key: str) -> Principal | None:
        m = _KEY.match(key or "")
        digest, row = None, None
        if m:
            with self.engine.connect() as conn:
                row = conn.execute(
                    sa.select(api_keys.c.secret_hash, users.c.name, users.c.role)
                    .join(users, users.c.name == api_keys.c.user_name)
                    .where((api_keys.c.key_id == m.group(1)) & api_keys.c.revoked_ns.is_(None))
                ).first()
            digest = row[0] if row is not None else None
        if not self._verify(digest, m.group(2) if m else (key or "x")):
            return None
        return Principal(row[1], Role[row[2]], f"key:{m.group(1)}")

    # audit ------------------------------------------------------------------------------
    def record(self, actor: str, action: str, status: int, detail: str = "") -> None:
        with write_transaction(self.engine) as conn:
            conn.execute(audit.insert().values(ts_ns=time.time_ns(), actor=actor[:80],
                                               action=action[:200], status=status,
                                               detail=detail[:2000]))

    def audit_trail(self, last: int = 100) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(audit).order_by(audit.c.id.desc()).limit(last)).all()
        return [dict(r._mapping) for r in reversed(rows)]

    # the token signing key ---------------------------------------------------------------
    def signing_key(self) -> str:
        """This database's token signing key, made by the first server that asks."""
        with write_transaction(self.engine) as conn:
            row = conn.execute(sa.select(server_keys.c.value)
                               .where(server_keys.c.name == "token")).first()
            if row is not None:
                return row[0]
            value = secrets.token_hex(32)
            conn.execute(server_keys.insert().values(name="token", value=value))
            return value


class TokenError(FoxhuntError):
    pass


class TokenIssuer:
    """Short-lived HS256 tokens naming a caller and their role."""

    ALGORITHM = "HS256"

    def __init__(self, key: str, ttl_s: int = 900, issuer: str = "foxhunt"):
        self.key, self.ttl_s, self.issuer = key, ttl_s, issuer

    def issue(self, who: Principal, now: float | None = None) -> tuple[str, int]:
        import jwt

        now = time.time() if now is None else now
        exp = int(now) + self.ttl_s
        token = jwt.encode({"sub": who.name, "role": who.role.name, "via": who.via,
                            "iat": int(now), "exp": exp, "iss": self.issuer,
                            "jti": secrets.token_hex(8)}, self.key, algorithm=self.ALGORITHM)
        return token, exp

    def check(self, token: str) -> Principal:
        import jwt

        try:
            claims = jwt.decode(token, self.key, algorithms=[self.ALGORITHM], issuer=self.issuer,
                                options={"require": ["exp", "iat", "sub", "iss"]})
            return Principal(_check_user(claims["sub"]), Role[claims["role"]], str(claims["via"]))
        except jwt.ExpiredSignatureError:
            raise TokenError("token expired: sign in again") from None
        except (jwt.InvalidTokenError, KeyError, AuthError, TypeError):
            raise TokenError("invalid token") from None


class CallerCache:
    """`AuthStore.current` remembered for `ttl_s`, so that a removed user, a lowered role or a
    revoked key stops a token within that time without a database read on every request."""

    def __init__(self, store: AuthStore, ttl_s: float = 2.0):
        self.store, self.ttl_s = store, ttl_s
        self._seen: dict[tuple[str, str], tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def current(self, who: Principal, now: float | None = None) -> Principal | None:
        now = time.monotonic() if now is None else now
        key = (who.name, who.via)
        with self._lock:
            hit = self._seen.get(key)
        if hit is not None and now < hit[0]:
            return hit[1]
        fresh = self.store.current(who)
        with self._lock:
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen[key] = (now + self.ttl_s, fresh)
        return fresh


class LoginThrottle:
    """At most `failures` failed sign-ins per name and per client address within `window_s`;
    past that, sign-ins from them are refused for the rest of the window (HTTP 429), right
    password or not, so guessing costs time."""

    def __init__(self, failures: int = 5, window_s: float = 60.0):
        self.failures, self.window_s = failures, window_s
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        q = self._seen.setdefault(key, deque())
        while q and now - q[0] > self.window_s:
            q.popleft()
        return q

    def retry_after(self, keys: tuple[str, ...], now: float | None = None) -> float:
        """Seconds until these callers may try again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = [self.window_s - (now - q[0]) for k in keys
                     if len(q := self._recent(k, now)) >= self.failures]
        return max(waits, default=0.0)

    def failed(self, keys: tuple[str, ...], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            for k in keys:
                self._recent(k, now).append(now)
            if len(self._seen) > 100_000:  # bounded memory under a spray of names
                for k in [k for k, q in self._seen.items() if not q]:
                    del self._seen[k]

    def succeeded(self, keys: tuple[str, ...]) -> None:
        with self._lock:
            for k in keys[:1]:  # the name's count resets; the address's does not
                self._seen.pop(k, None)
