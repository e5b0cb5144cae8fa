"""An account through the API: the same documents as the CLI's `--json`, the kill switch from a
trader, and the account's events streamed to a WebSocket as another process writes them."""

from __future__ import annotations

import json

import pytest

from foxhunt.cli import main

from .conftest import sign_in

SYN = ("SYN", "--bars", "1min")


def cli_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    main([*argv, "--json"])
    doc = json.loads(capsys.readouterr().out)
    return {k: v for k, v in doc.items() if k not in ("schema_version", "kind")}


@pytest.fixture
def paper_account(capsys):
    main(["data", "synth", "--symbol", "SYN", "--bars", "600", "--seed", "3", "--json"])
    main(["paper", *SYN, "--strategy", "sma:5,20", "--account", "a1", "--json",
          "--to", "2024-01-02T18:00:00Z"])
    capsys.readouterr()
    return "a1"


def test_account_views_are_the_cli_documents(client, headers, paper_account, capsys):
    h = headers["viewer"]
    assert client.get("/api/v1/accounts", headers=h).json() == ["a1"]
    for path, argv in (("orders?last=0", ("orders", "--account", "a1", "--last", "0")),
                       ("positions", ("positions", "--account", "a1")),
                       ("risk", ("risk", "status", "--account", "a1"))):
        api = client.get(f"/api/v1/accounts/a1/{path}", headers=h)
        assert api.status_code == 200, api.text
        assert api.json() == cli_json(capsys, *argv)
    orders = client.get("/api/v1/accounts/a1/orders?last=0", headers=h).json()["orders"]
    assert orders and all(o["status"] == "FILLED" for o in orders)
    bars = client.get("/api/v1/accounts/a1/bars?last=50", headers=h).json()
    assert bars["rows"] == 50 and bars["symbol"] == "SYN"
    sessions = client.get("/api/v1/sessions", headers=h).json()
    assert sessions[0]["account"] == "a1" and sessions[0]["running"] is None


def test_a_trader_kills_an_account_and_the_cli_sees_it(client, headers, paper_account, capsys):
    r = client.post("/api/v1/accounts/a1/risk/kill", headers=headers["trader"],
                    json={"reason": "desk says stop"})
    assert r.status_code == 200, r.text
    assert r.json()["trading_state"] == "HALTED" and r.json()["kill_switch"]
    assert "flatten" in r.json()
    cli = cli_json(capsys, "risk", "status", "--account", "a1")
    assert cli["trading_state"] == "HALTED" and cli["reason"] == "desk says stop"
    again = client.post("/api/v1/accounts/a1/risk/halt", headers=headers["trader"], json={})
    assert again.status_code == 400 and again.json() == {"error": "account 'a1' is already HALTED"}
    trail = client.get("/api/v1/audit", headers=headers["admin"]).json()
    assert {"actor": "tia", "action": "POST /api/v1/accounts/a1/risk/kill", "status": 200,
            "detail": "reason: desk says stop"}.items() <= next(
        a for a in trail if a["action"].endswith("/kill")).items()


def test_the_account_stream_sends_a_snapshot_then_what_the_log_gains(
        client, headers, paper_account, capsys):
    token = sign_in(client, "vic")["Authorization"][7:]
    with client.websocket_connect("/api/v1/ws/accounts/a1") as ws:
        ws.send_json({"token": token})
        assert ws.receive_json()["type"] == "welcome"
        first = ws.receive_json()
        assert first["type"] == "snapshot" and first["risk"]["trading_state"] == "ACTIVE"
        seq = first["seq"]
        main(["risk", "halt", "--account", "a1", "--reason", "from a terminal"])
        batch = ws.receive_json()
        assert batch["type"] == "events" and batch["risk"]["trading_state"] == "HALTED"
        assert [e["seq"] for e in batch["events"]] == list(range(seq + 1, seq + 1 + len(
            batch["events"])))
        assert any(e["kind"] == "trading_state_changed" and e["reason"] == "from a terminal"
                   for e in batch["events"])


def test_unknown_accounts_and_paths_outside_their_folders_are_refused(client, headers):
    h = headers["viewer"]
    for url, codes in (("/api/v1/accounts/nobody/orders", {404}),
                       ("/api/v1/accounts/..%2F..%2Fetc/orders", {400, 404}),
                       ("/api/v1/accounts/a%20b/risk", {400}),
                       ("/api/v1/runs/..", {400, 404}), ("/api/v1/runs/.hidden", {400}),
                       ("/api/v1/runs/%2e%2e", {400, 404}), ("/api/v1/runs/nope", {404}),
                       ("/api/v1/studies/..%2F..", {400, 404}), ("/api/v1/runs/x/report", {404})):
        r = client.get(url, headers=h)
        assert r.status_code in codes, f"{url}: {r.status_code} {r.text}"
        assert set(r.json()) == {"error"} and "\n" not in r.json()["error"]


def test_a_live_traders_journaled_bars_reach_the_stream(client, headers, paper_account, isolated_home):
    token = sign_in(client, "vic")["Authorization"][7:]
    journal = isolated_home / "trading" / "a1.bars.jsonl"
    journal.write_text(json.dumps({"symbol": "SYN", "ts": 1, "ohlcv": [1, 2, 0.5, 1.5, 7]}) + "\n")
    with client.websocket_connect("/api/v1/ws/accounts/a1") as ws:
        ws.send_json({"token": token})
        assert ws.receive_json()["type"] == "welcome"
        assert ws.receive_json()["type"] == "snapshot"  # the bars before it are the REST's
        line = json.dumps({"symbol": "SYN", "ts": 1_704_300_000_000_000_000,
                           "ohlcv": [4000.25, 4001.0, 3999.75, 4000.5, 12]})
        with journal.open("a") as f:
            f.write(line + "\n" + line[:20])  # and half of the next line, still being written
        batch = ws.receive_json()
        assert batch["events"] == [] and batch["bars"] == [
            {"symbol": "SYN", "ts_ns": 1_704_300_000_000_000_000, "open": 4000.25,
             "high": 4001.0, "low": 3999.75, "close": 4000.5, "volume": 12}]


def test_a_live_accounts_bars_are_its_bar_journals(client, headers, paper_account, isolated_home):
    meta = isolated_home / "trading" / "a1.paper.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "mode": "live"}))
    lines = [json.dumps({"symbol": "SYN", "ts": ts, "ohlcv": [ts, ts + 1, ts - 1, ts, 5]})
             for ts in (10, 20, 30)]
    (isolated_home / "trading" / "a1.bars.jsonl").write_text("\n".join(lines) + "\n")
    bars = client.get("/api/v1/accounts/a1/bars?last=2", headers=headers["viewer"]).json()
    assert bars["rows"] == 2 and bars["ts"] == [20, 30] and bars["high"] == [21, 31]
    every = client.get("/api/v1/accounts/a1/bars?last=0", headers=headers["viewer"]).json()
    assert every["ts"] == [10, 20, 30]  # last=0: all of them, as for a paper account
