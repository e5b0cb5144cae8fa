"""An app over the test's FOXHUNT_HOME with one user of each role, argon2 made cheap."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from foxhunt.server.app import create_app
from foxhunt.server.auth import Argon2Settings, Role
from foxhunt.server.config import ServerConfig

CHEAP = Argon2Settings(time_cost=1, memory_kib=64, parallelism=1)
PASSWORD = "a long enough secret"
USERS = {"vic": Role.viewer, "tia": Role.trader, "ada": Role.admin}


def server_config(**kw) -> ServerConfig:
    return ServerConfig(argon2=CHEAP, **kw)


@pytest.fixture
def app(isolated_home):
    app = create_app(isolated_home, server_config())
    for name, role in USERS.items():
        app.state.foxhunt.auth.add_user(name, role, PASSWORD)
    return app


@pytest.fixture
def client(app):
    with TestClient(app) as c:
        yield c


def sign_in(client, name: str, password: str = PASSWORD) -> dict[str, str]:
    r = client.post("/api/v1/auth/token", json={"username": name, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


@pytest.fixture
def headers(client) -> dict[str, dict[str, str]]:
    """A bearer header per role name."""
    return {role.name: sign_in(client, name) for name, role in USERS.items()}
