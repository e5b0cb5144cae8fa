"""Every route, enumerated from the app itself, refuses an anonymous caller (401) and a role
below its own (403); expired and forged tokens fail; sign-in is throttled; CORS is closed."""

from __future__ import annotations

import re
import time

import jwt
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocketDisconnect

from foxhunt.server.app import create_app
from foxhunt.server.auth import Role

from .conftest import PASSWORD, server_config, sign_in

PUBLIC = {("GET", "/api/v1/health"), ("POST", "/api/v1/auth/token"), ("GET", "/")}


def _routes(app):
    for r in app.routes:
        if isinstance(r, APIRoute):
            for m in r.methods:
                yield m, r.path
        elif isinstance(r, WebSocketRoute):
            yield "WS", r.path


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: {"action": "halt"}.get(m.group(1), "x1"), path)


def test_every_route_is_public_by_name_or_has_a_role(app):
    roles = app.state.route_roles
    for method, path in _routes(app):
        if method == "WS" or path.startswith("/static"):
            continue
        assert (method, path) in PUBLIC or (method, path) in roles, f"{method} {path} has no role"
    assert len(roles) >= 25


def test_every_route_refuses_the_anonymous_and_too_small_a_role(app, client, headers):
    checked = 0
    for (method, path), role in app.state.route_roles.items():
        url = _concrete(path)
        r = client.request(method, url, json={})
        assert r.status_code == 401, f"anonymous {method} {url}: {r.status_code}"
        assert r.json()["error"].startswith("sign in first")
        for lower in (x for x in Role if x < role):
            r = client.request(method, url, headers=headers[lower.name], json={})
            assert r.status_code == 403, f"{lower.name} {method} {url}: {r.status_code}"
            assert f"this needs {role.name}" in r.json()["error"]
        r = client.request(method, url, headers=headers[role.name], json={})
        assert r.status_code not in (401, 403, 500), f"{role.name} {method} {url}: {r.text}"
        checked += 1
    assert checked == len(app.state.route_roles)


def test_websockets_need_a_token_as_the_first_message(client, headers):
    for path in ("/api/v1/ws/accounts/a1",):
        with client.websocket_connect(path) as ws:
            ws.send_json({"token": "not a token"})
            assert ws.receive_json() == {"type": "error", "error": "invalid token"}
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 4401


def test_expired_and_forged_tokens_are_refused(app, client):
    key = app.state.foxhunt.auth.signing_key()
    now = int(time.time())
    claims = {"sub": "ada", "role": "admin", "via": "password", "iss": "foxhunt"}
    expired = jwt.encode({**claims, "iat": now - 100, "exp": now - 10}, key, algorithm="HS256")
    forged = jwt.encode({**claims, "iat": now, "exp": now + 60}, "0" * 64, algorithm="HS256")
    for token, why in ((expired, "token expired: sign in again"), (forged, "invalid token")):
        r = client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401 and r.json() == {"error": why}


def test_sign_in_is_throttled_even_for_the_right_password(client):
    for _ in range(5):
        r = client.post("/api/v1/auth/token", json={"username": "vic", "password": "wrong one!!"})
        assert r.status_code == 401
    r = client.post("/api/v1/auth/token", json={"username": "vic", "password": PASSWORD})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    assert r.json()["error"].startswith("too many failed sign-ins")


def test_an_api_key_signs_in_and_a_revoked_one_does_not(client, headers):
    made = client.post("/api/v1/keys", headers=headers["admin"],
                       json={"user": "tia", "label": "bot"}).json()
    r = client.post("/api/v1/auth/token", json={"api_key": made["key"]})
    assert r.status_code == 200 and r.json()["role"] == "trader"
    client.delete(f"/api/v1/keys/{made['key_id']}", headers=headers["admin"])
    assert client.post("/api/v1/auth/token", json={"api_key": made["key"]}).status_code == 401


def test_every_mutating_call_is_audited_with_its_caller_and_no_secret(client, headers, caplog):
    caplog.set_level("DEBUG")
    made = client.post("/api/v1/keys", headers=headers["admin"],
                       json={"user": "vic", "label": "x"}).json()
    client.post("/api/v1/users", headers=headers["trader"],
                json={"name": "eve", "role": "admin", "password": PASSWORD})
    trail = client.get("/api/v1/audit", headers=headers["admin"]).json()
    actions = [(a["actor"], a["action"], a["status"]) for a in trail]
    assert ("ada", "POST /api/v1/keys", 201) in actions
    assert ("tia", "POST /api/v1/users", 403) in actions
    assert ("vic", "POST /api/v1/auth/token", 200) in actions
    text = str(trail) + caplog.text
    assert PASSWORD not in text and made["key"] not in text
    assert all(h["Authorization"][7:] not in text for h in headers.values())


def test_cors_is_closed_unless_an_origin_is_named(isolated_home):
    ask = {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
    with TestClient(create_app(isolated_home, server_config())) as c:
        r = c.options("/api/v1/health", headers=ask)
        assert "access-control-allow-origin" not in r.headers
    with TestClient(create_app(isolated_home, server_config(
            cors_origins=("https://desk.example",)))) as c:
        r = c.options("/api/v1/health", headers={**ask, "Origin": "https://desk.example"})
        assert r.headers["access-control-allow-origin"] == "https://desk.example"


def test_the_openapi_schema_lists_every_route(app, client, headers):
    schema = client.get("/api/v1/openapi.json", headers=headers["viewer"]).json()
    documented = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    assert set(app.state.route_roles) <= documented
    assert sign_in(client, "vic")  # the token route is in the schema too
    assert ("POST", "/api/v1/auth/token") in documented


def test_a_removed_user_a_lowered_role_and_a_revoked_key_stop_their_tokens(isolated_home):
    app = create_app(isolated_home, server_config(recheck_s=0))
    auth = app.state.foxhunt.auth
    auth.add_user("ann", Role.admin, PASSWORD)
    auth.add_user("bob", Role.trader, PASSWORD)
    with TestClient(app) as c:
        ann, bob = sign_in(c, "ann"), sign_in(c, "bob")
        key_id, key = auth.create_key("bob", "bot")
        by_key = {"Authorization": "Bearer " + c.post(
            "/api/v1/auth/token", json={"api_key": key}).json()["token"]}
        assert c.get("/api/v1/users", headers=ann).status_code == 200
        auth.set_role("ann", Role.viewer)
        r = c.get("/api/v1/users", headers=ann)
        assert r.status_code == 403 and "ann is a viewer" in r.json()["error"]
        assert c.get("/api/v1/me", headers=by_key).status_code == 200
        auth.revoke_key(key_id)
        assert c.get("/api/v1/me", headers=by_key).status_code == 401
        assert c.get("/api/v1/me", headers=bob).status_code == 200  # his password token stands
        auth.remove_user("bob")
        r = c.get("/api/v1/me", headers=bob)
        assert r.status_code == 401 and "removed" in r.json()["error"]
