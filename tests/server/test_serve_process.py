"""`foxhunt serve` as a process: it starts on loopback, answers, and stops promptly on SIGTERM
with a dashboard's WebSocket still connected to a quiet account."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from websockets.sync.client import connect

from foxhunt.cli import main

from .conftest import PASSWORD
from .test_dashboard_browser import free_port


def test_serve_stops_on_sigterm_with_a_stream_open(isolated_home, capsys):
    main(["data", "synth", "--symbol", "SYN", "--bars", "300", "--seed", "3", "--json"])
    main(["paper", "SYN", "--bars", "1min", "--strategy", "sma:5,20", "--account", "a1",
          "--json", "--to", "2024-01-02T16:00:00Z"])
    env = {**os.environ, "FOXHUNT_HOME": str(isolated_home)}
    subprocess.run([sys.executable, "-m", "foxhunt", "user", "add", "vic", "--role", "viewer",
                    "--password-stdin"], input=PASSWORD + "\n", env=env, check=True,
                   capture_output=True, text=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "foxhunt", "serve", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    assert json.load(r)["status"] == "ok"
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        req = urllib.request.Request(base + "/auth/token", method="POST",
                                     data=json.dumps({"username": "vic",
                                                      "password": PASSWORD}).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            token = json.load(r)["token"]
        with connect(f"ws://127.0.0.1:{port}/api/v1/ws/accounts/a1", open_timeout=10) as ws:
            ws.send(json.dumps({"token": token}))
            assert json.loads(ws.recv(timeout=10))["type"] == "welcome"
            assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
            assert time.monotonic() - stopped < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
