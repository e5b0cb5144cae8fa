"""Users, API keys and tokens: secrets kept only as argon2 hashes, tokens that expire and cannot
be forged, sign-in throttled."""

from __future__ import annotations

import time

import jwt
import pytest
import sqlalchemy as sa

from foxhunt.db import open_db
from foxhunt.server.auth import (
    AuthError,
    AuthStore,
    LoginThrottle,
    Principal,
    Role,
    TokenError,
    TokenIssuer,
)

from .conftest import CHEAP, PASSWORD


@pytest.fixture
def store(tmp_path):
    return AuthStore(open_db(f"sqlite:///{tmp_path / 'foxhunt.db'}"), CHEAP)


def test_a_password_is_stored_only_as_an_argon2id_hash(store, tmp_path):
    store.add_user("ann", Role.trader, PASSWORD)
    with store.engine.connect() as conn:
        digest = conn.execute(sa.text("SELECT password_hash FROM users")).scalar()
    assert digest.startswith("$argon2id$") and PASSWORD not in digest
    store.engine.dispose()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("foxhunt.db*"))
    assert PASSWORD.encode() not in raw
    assert store.check_password("ann", PASSWORD) == Principal("ann", Role.trader, "password")
    assert store.check_password("ann", PASSWORD + "x") is None
    assert store.check_password("nobody", PASSWORD) is None


def test_an_api_key_is_shown_once_checked_against_its_hash_and_revocable(store):
    store.add_user("bot", Role.viewer)  # keys only
    assert store.check_password("bot", "") is None
    key_id, key = store.create_key("bot", "grafana")
    assert key.startswith(f"fhk_{key_id}_")
    with store.engine.connect() as conn:
        digest = conn.execute(sa.text("SELECT secret_hash FROM api_keys")).scalar()
    assert digest.startswith("$argon2id$") and key.split("_", 2)[2] not in digest
    assert store.check_key(key) == Principal("bot", Role.viewer, f"key:{key_id}")
    assert store.check_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert store.check_key("fhk_nothing") is None
    assert [k["revoked"] for k in store.list_keys()] == [False]
    store.revoke_key(key_id)
    assert store.check_key(key) is None
    with pytest.raises(AuthError, match="no active key"):
        store.revoke_key(key_id)


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.add_user("../x", Role.viewer, PASSWORD), "user name '../x'"),
    (lambda s: s.add_user("ok", Role.viewer, "short"), "at least 12 characters"),
    (lambda s: s.set_role("ghost", Role.admin), "no user 'ghost'"),
    (lambda s: s.create_key("ghost", "x"), "no user 'ghost'"),
    (lambda s: Role.parse("root"), "role 'root': use viewer, trader or admin"),
])
def test_bad_user_and_key_commands_are_one_line_and_write_nothing(store, call, message):
    before = store.users()
    with pytest.raises(AuthError, match=message.replace("(", r"\(").replace(".", r"\.")) as e:
        call(store)
    assert "\n" not in str(e.value)
    assert store.users() == before and store.list_keys() == []


def test_a_second_user_of_one_name_is_refused(store):
    store.add_user("ann", Role.viewer, PASSWORD)
    with pytest.raises(AuthError, match="user 'ann' exists"):
        store.add_user("ann", Role.admin, PASSWORD)
    assert store.role_of("ann") is Role.viewer


def test_tokens_carry_the_role_expire_and_cannot_be_forged():
    issuer = TokenIssuer("k" * 64, ttl_s=60)
    who = Principal("ann", Role.trader, "password")
    token, exp = issuer.issue(who, now=1_000_000)
    assert exp == 1_000_060
    with pytest.raises(TokenError, match="expired"):
        issuer.check(token)  # issued long ago
    token, _ = issuer.issue(who)
    assert issuer.check(token) == who
    forged = jwt.encode({"sub": "ann", "role": "admin", "via": "password", "iss": "foxhunt",
                         "iat": int(time.time()), "exp": int(time.time()) + 60}, "guess",
                        algorithm="HS256")
    for bad in (forged, token[:-2], "", "a.b.c",
                jwt.encode({"sub": "ann", "role": "admin"}, "k" * 64, algorithm="HS256")):
        with pytest.raises(TokenError):
            issuer.check(bad)
    none_alg = jwt.encode({"sub": "ann", "role": "admin", "via": "x", "iss": "foxhunt",
                           "iat": int(time.time()), "exp": int(time.time()) + 60}, None,
                          algorithm="none")
    with pytest.raises(TokenError):
        issuer.check(none_alg)


def test_the_signing_key_is_made_once_per_database(store):
    assert store.signing_key() == store.signing_key() and len(store.signing_key()) == 64


def test_the_throttle_pauses_a_name_after_repeated_failures_and_then_lets_it_try_again():
    t = LoginThrottle(failures=3, window_s=10)
    keys = ("user:ann", "ip:127.0.0.1")
    for i in range(3):
        assert t.retry_after(keys, now=100 + i) == 0
        t.failed(keys, now=100 + i)
    assert t.retry_after(keys, now=103) == pytest.approx(7)
    assert t.retry_after(("user:bob", "ip:127.0.0.1"), now=103) > 0  # the address too
    assert t.retry_after(("user:bob", "ip:10.0.0.2"), now=103) == 0
    assert t.retry_after(keys, now=110.5) == 0
