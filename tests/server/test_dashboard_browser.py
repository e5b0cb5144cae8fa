"""The dashboard in a real headless Chromium against a real server: sign in, watch candles and
fills arrive from a running paper session, press the kill switch, see HALTED on the page and in
the API."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from foxhunt.cli import main
from foxhunt.report.browser import find_chromium
from foxhunt.server.app import create_app
from foxhunt.server.auth import Role

from .conftest import PASSWORD, server_config

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="headless Chromium not "
                                "installed (Debian: apt-get install chromium; .ci/run does)")
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "dashboard.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(isolated_home):
    app = create_app(isolated_home, server_config(stream_poll_s=0.05))
    app.state.foxhunt.auth.add_user("tia", Role.trader, PASSWORD)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", app
    srv.should_exit = True
    thread.join(10)


@pytest.fixture
def paper_session(isolated_home):
    """A paper session trading in another process, a bar every 50 ms."""
    main(["data", "synth", "--symbol", "SYN", "--bars", "3000", "--seed", "5", "--json"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "foxhunt", "paper", "SYN", "--bars", "1min", "--strategy",
         "sma:3,8", "--account", "desk", "--speed", "1200x"],
        env={**os.environ, "FOXHUNT_HOME": str(isolated_home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = isolated_home / "trading" / "desk.sqlite"
    deadline = time.monotonic() + 60
    while not (log.exists() and (isolated_home / "trading" / "desk.paper.json").exists()):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the paper session did not start"
        time.sleep(0.1)
    time.sleep(1.0)  # a few bars in the log
    yield proc
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_sign_in_watch_the_session_and_press_the_kill_switch(server, paper_session):
    from .cdp import Browser

    url, app = server
    browser = Browser(1400, 1250)
    try:
        browser.goto(url + "/")
        browser.wait("document.documentElement.dataset.ready === 'login'", what="the login form")
        browser.js(f"""document.getElementById('user').value = 'tia';
                       document.getElementById('password').value = {PASSWORD!r};
                       document.getElementById('sign-in').click(); true""")
        browser.wait("document.documentElement.dataset.ready === '1'", what="signed in")
        start = int(browser.wait("Number(document.documentElement.dataset.candles) > 0",
                                 what="the first candles") and browser.js(
            "Number(document.documentElement.dataset.candles)"))
        fills = browser.js("Number(document.documentElement.dataset.fills || 0)")
        browser.wait(f"Number(document.documentElement.dataset.candles) >= {start + 20}",
                     what="candles arriving over the stream")
        browser.wait(f"Number(document.documentElement.dataset.fills || 0) > {fills}",
                     what="new fills over the stream")
        assert browser.js("document.getElementById('stream').textContent") == "stream: live"
        assert browser.js("document.documentElement.dataset.state") == "ACTIVE"
        if os.environ.get("FOXHUNT_SCREENSHOT"):
            SCREENSHOT.parent.mkdir(exist_ok=True)
            browser.screenshot(SCREENSHOT)
        browser.js("document.getElementById('kill').click(); "
                   "document.getElementById('kill-confirm').click(); true")
        browser.wait("document.documentElement.dataset.state === 'HALTED'", what="HALTED")
        assert "HALTED" in browser.js("document.getElementById('state').textContent")
        assert browser.js("document.documentElement.dataset.errors") == ""
        assert browser.console == []
    finally:
        browser.close()
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        token = c.post("/api/v1/auth/token", json={"username": "tia", "password": PASSWORD})
        h = {"Authorization": f"Bearer {token.json()['token']}"}
        risk = c.get("/api/v1/accounts/desk/risk", headers=h).json()
    assert risk["trading_state"] == "HALTED" and risk["kill_switch"]
    assert risk["reason"] == "kill switch from the dashboard"
