"""The API server (`foxhunt serve`) under load: REST read latency at a fixed request rate, and
the account WebSocket's fan-out latency to many clients while another process writes events.

The server is the real one: `python -m foxhunt serve --port P` (uvicorn, the shipped settings:
`stream_poll_s` 0.02 s) in a process of its own over a fresh FOXHUNT_HOME on 127.0.0.1, with a
viewer made by `foxhunt user add --password-stdin`, and one paper account (`foxhunt data synth`
+ `foxhunt paper`, as tests/server/test_accounts_api.py makes it; the session has ended).

1. REST: an open-loop load of `--rate` requests/s (default 200) for `--rest-s` seconds over a
   mix of read routes (the account's positions, orders, risk; /runs; /me), with a bearer token,
   from this process (httpx, asyncio, kept-alive connections). Request i is due at
   t0 + i / rate whether or not the ones before it came back, and its latency is measured from
   that due time to its answer (no coordinated omission: a stall counts against every request
   it delayed). p50 / p99 / max; every answer must be 200. Target: p99 <= 20 ms.
2. Fan-out: `--clients` WebSocket clients (the `websockets` asyncio client, compression offered
   as a browser does) subscribe to /api/v1/ws/accounts/A (first message `{"token": ...}`), in
   `--client-procs` processes of their own. Then a writer process appends `PriceMarked` events
   to the account's SQLite event log (the log `foxhunt paper` wrote: WAL, synchronous=FULL) at
   `--events-per-s` (default 1,000), open loop, a batch every `--batch-ms` (5 ms: 5 events),
   and stamps `time.time_ns()` when each batch's append has committed: the moment the event
   is written. Each client stamps `time.time_ns()` (the same clock, the same host) when a
   message arrives; a sample is receive - written, for every event at every client. p50 / p99
   / max, and events lost (an event some client never got within 10 s of the last write:
   must be 0). Target: p99 <= 50 ms.
   The CPU time each process used over the run (from /proc) is reported beside it: where the
   time goes.

Prints one JSON document on stdout (`--out FILE` also writes it), a table on stderr; targets are
reported as `target_met`, never as the exit status. `--quick` (CI): 2 s of REST at 100/s, 20
clients for 2 s of events.

    .venv/bin/python benchmarks/bench_api.py --out results.json
    .venv/bin/python benchmarks/bench_api.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ACCOUNT = "a1"
USER, PASSWORD = "bench", "a long enough bench secret"
REST_ROUTES = (f"/api/v1/accounts/{ACCOUNT}/positions", f"/api/v1/accounts/{ACCOUNT}/orders",
               f"/api/v1/accounts/{ACCOUNT}/risk", "/api/v1/runs", "/api/v1/me")
FULL = {"rest_s": 20.0, "clients": 100, "events_s": 20.0, "rate": 200.0}
QUICK = {"rest_s": 2.0, "clients": 20, "events_s": 2.0, "rate": 100.0}
TARGETS = {"rest_p99_ms": 20.0, "delivery_p99_ms": 50.0}
DRAIN_S = 10.0
"""How long the clients wait for the last event after the writer stopped: later is lost."""


def quantiles_ms(ns: np.ndarray) -> dict[str, Any]:
    if ns.size == 0:
        return {"n": 0}
    ms = ns.astype(np.float64) / 1e6
    p50, p90, p99, p999 = np.percentile(ms, [50, 90, 99, 99.9])
    return {"n": int(ms.size), "p50_ms": round(float(p50), 3), "p90_ms": round(float(p90), 3),
            "p99_ms": round(float(p99), 3), "p999_ms": round(float(p999), 3),
            "max_ms": round(float(ms.max()), 3), "mean_ms": round(float(ms.mean()), 3)}


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process (and its reaped children) used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def foxhunt(home: Path, *argv: str, stdin: str | None = None, timeout: float = 300) -> str:
    done = subprocess.run([sys.executable, "-m", "foxhunt", *argv], input=stdin, text=True,
                          capture_output=True, timeout=timeout, check=False,
                          env={**os.environ, "FOXHUNT_HOME": str(home)})
    if done.returncode != 0:
        raise RuntimeError(f"foxhunt {' '.join(argv)} exited {done.returncode}: "
                           f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout


def prepare_home(home: Path) -> None:
    """A paper account that has traded (and ended), and a viewer."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # the user while the account trades
        user = pool.submit(foxhunt, home, "user", "add", USER, "--role", "viewer",
                           "--password-stdin", stdin=PASSWORD + "\n")
        foxhunt(home, "data", "synth", "--symbol", "SYN", "--bars", "600", "--seed", "3",
                "--json")
        foxhunt(home, "paper", "SYN", "--bars", "1min", "--strategy", "sma:5,20", "--account",
                ACCOUNT, "--json", "--to", "2024-01-02T18:00:00Z")
        user.result()


class Server:
    """`python -m foxhunt serve` on 127.0.0.1 and a free port, in its own process."""

    def __init__(self, home: Path, profile: Path | None = None, poll_s: float | None = None,
                 send_text: bool = False):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        argv = ["-m", "foxhunt", "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        if profile is not None or poll_s is not None or send_text:
            argv = [str(Path(__file__).resolve()), "--_serve", str(home), str(self.port),
                    str(profile or ""), str(poll_s or ""), str(int(send_text))]
        self.proc = subprocess.Popen(
            [sys.executable, *argv], env={**os.environ, "FOXHUNT_HOME": str(home)},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        import httpx

        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"foxhunt serve exited {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().strip()[-300:]}")
            try:
                if httpx.get(self.base + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("foxhunt serve did not answer /health within 60 s")
            time.sleep(0.1)
        r = httpx.post(self.base + "/api/v1/auth/token", timeout=30,
                       json={"username": USER, "password": PASSWORD})
        r.raise_for_status()
        self.token = r.json()["token"]

    def stop(self) -> str:
        """SIGTERM, then SIGKILL after 20 s: what happened, in words."""
        if self.proc.poll() is not None:
            return f"had exited {self.proc.returncode}"
        t = time.perf_counter()
        self.proc.terminate()
        try:
            self.proc.wait(20)
            return f"stopped {time.perf_counter() - t:.2f} s after SIGTERM"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return "did not stop within 20 s of SIGTERM: killed"


def serve(home: Path, port: int, profile: str, poll_s: str, send_text: bool) -> None:
    """Worker: the app `foxhunt serve` builds, under uvicorn as it runs it, with
    `stream_poll_s` set, the event loop's thread under cProfile (stats to `profile` when
    SIGTERM ends it) and/or, `send_text`, the account stream sending each batch's JSON made
    once (`streams.Batch.text`) instead of `json.dumps(batch)` once a client: the app module's
    `json` swapped for one whose `dumps` returns a batch's text (what a one-line change of
    app.py's stream loop would do)."""
    import cProfile
    import signal
    import types

    import uvicorn

    from foxhunt.server import app as app_module
    from foxhunt.server.app import create_app
    from foxhunt.server.config import ServerConfig

    if send_text:
        dumps = json.dumps
        app_module.json = types.SimpleNamespace(**{**vars(json), "dumps": lambda obj, *a, **k: (
            getattr(obj, "text", None) or dumps(obj, *a, **k))})

    config = ServerConfig(host="127.0.0.1", port=port,
                          **({"stream_poll_s": float(poll_s)} if poll_s else {}))
    app = create_app(home, config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    prof = cProfile.Profile() if profile else None
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    if prof is not None:
        prof.enable()
    try:
        asyncio.run(server.serve())
    finally:
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)


def top_functions(stats_file: Path, n: int = 25) -> list[dict[str, Any]]:
    """The n functions with the most cumulative time in a cProfile dump (event loop thread)."""
    import pstats

    st = pstats.Stats(str(stats_file))
    rows = []
    for (file, line, fn), (_cc, ncalls, tt, ct, _callers) in st.stats.items():
        rows.append({"function": f"{Path(file).name}:{line}({fn})", "calls": ncalls,
                     "tottime_s": round(tt, 3), "cumtime_s": round(ct, 3)})
    return sorted(rows, key=lambda r: -r["tottime_s"])[:n]


# -- REST ------------------------------------------------------------------------------------

async def _rest(base: str, token: str, rate: float, seconds: float) -> dict[str, Any]:
    import httpx

    n = max(1, int(rate * seconds))
    lat = np.zeros(n, dtype=np.int64)
    route_of = [REST_ROUTES[i % len(REST_ROUTES)] for i in range(n)]
    statuses: dict[str, int] = {}
    errors: list[str] = []
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"},
                                 limits=limits, timeout=10.0) as client:
        for path in REST_ROUTES:  # warm: connections, imports, caches
            (await client.get(path)).raise_for_status()

        async def one(i: int, due: int) -> None:
            delay = (due - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                r = await client.get(route_of[i])
                key = str(r.status_code)
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            lat[i] = time.perf_counter_ns() - due
            statuses[key] = statuses.get(key, 0) + 1
            if key != "200" and len(errors) < 5:
                errors.append(f"{route_of[i]}: {key}")

        t0 = time.perf_counter_ns() + 50_000_000
        step = 1e9 / rate
        tasks = [asyncio.create_task(one(i, t0 + int(i * step))) for i in range(n)]
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 60)
        wall = (time.perf_counter_ns() - t0) / 1e9
    per_route = {p: quantiles_ms(lat[[i for i in range(n) if route_of[i] == p]])
                 for p in REST_ROUTES}
    return {"rate_per_s": rate, "seconds": seconds, "requests": n,
            "achieved_per_s": round(n / wall, 1), "statuses": statuses,
            "errors": sum(v for k, v in statuses.items() if k != "200"),
            "error_examples": errors, "latency_from_due": quantiles_ms(lat),
            "per_route": per_route}


def rest_service(server: Server, n: int = 20) -> dict[str, Any]:
    """Each route's service time: one request at a time (closed loop), n a route, after one."""
    import httpx

    out = {}
    with httpx.Client(base_url=server.base, timeout=10.0,
                      headers={"Authorization": f"Bearer {server.token}"}) as client:
        for path in REST_ROUTES:
            client.get(path).raise_for_status()
            lat = []
            for _ in range(n):
                t = time.perf_counter_ns()
                client.get(path).raise_for_status()
                lat.append(time.perf_counter_ns() - t)
            out[path] = quantiles_ms(np.asarray(lat))
    return out


def rest_load(server: Server, rate: float, seconds: float) -> dict[str, Any]:
    cpu0, me0 = cpu_s(server.proc.pid), time.process_time()
    doc = asyncio.run(_rest(server.base, server.token, rate, seconds))
    doc["server_cpu_s"] = round(cpu_s(server.proc.pid) - cpu0, 2)
    doc["load_generator_cpu_s"] = round(time.process_time() - me0, 2)
    doc["target"] = f"p99 <= {TARGETS['rest_p99_ms']:g} ms, no errors"
    doc["target_met"] = bool(doc["errors"] == 0 and doc["latency_from_due"]["p99_ms"]
                             <= TARGETS["rest_p99_ms"])
    return doc


# -- fan-out ---------------------------------------------------------------------------------

async def _clients(url: str, token: str, n: int, out: Path, compression: str) -> None:
    """Worker: n clients; 'ready' on stdout once each has its snapshot, then the last seq to
    wait for on stdin; each client's (seq, receive ns) pairs to `out`."""
    from websockets.asyncio.client import connect

    seqs: list[list[int]] = [[] for _ in range(n)]
    recv: list[list[int]] = [[] for _ in range(n)]
    first: list[int] = [0] * n
    ready = [asyncio.Event() for _ in range(n)]

    async def client(k: int) -> None:
        async with connect(url, max_size=None, open_timeout=30, ping_interval=None,
                           compression=None if compression == "none" else "deflate") as ws:
            await ws.send(json.dumps({"token": token}))
            for _ in range(2):  # welcome, snapshot
                doc = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if doc.get("type") == "error":
                    raise RuntimeError(f"client {k}: {doc['error']}")
            first[k] = doc["seq"]
            ready[k].set()
            s, r = seqs[k], recv[k]
            while True:
                text = await ws.recv()
                t = time.time_ns()
                doc = json.loads(text)
                for e in doc.get("events", ()):
                    s.append(e["seq"])
                    r.append(t)

    tasks = [asyncio.create_task(client(k)) for k in range(n)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 120)
    print("ready", min(first), flush=True)
    last = int(await asyncio.to_thread(sys.stdin.readline))
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline and not all(s and s[-1] >= last for s in seqs):
        if all(t.done() for t in tasks):
            break
        await asyncio.sleep(0.02)
    failed = [repr(t.exception()) for t in tasks if t.done() and t.exception() is not None]
    late = sum(1 for s in seqs if not s or s[-1] < last)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    np.savez(out, seqs=np.concatenate([np.asarray(s, np.int64) for s in seqs]),
             recv=np.concatenate([np.asarray(r, np.int64) for r in recv]),
             client=np.concatenate([np.full(len(s), k, np.int64) for k, s in enumerate(seqs)]),
             late=np.asarray(late), failed=np.asarray(failed or [""]))


def writer(home: Path, rate: float, seconds: float, batch_ms: float, out: Path) -> None:
    """Worker: PriceMarked events appended to the account's log at `rate`, open loop; each
    batch's (first seq, count, ns before the append, ns once it committed) to `out`."""
    from foxhunt.execution.store import SqlEventStore, default_log_url
    from foxhunt.portfolio.events import PriceMarked

    store = SqlEventStore(default_log_url(ACCOUNT, home))
    store.sync()
    ticks = next((e.price_ticks for _, e in reversed(list(store.read(0)))
                  if isinstance(e, PriceMarked)), 10_000)
    total = int(rate * seconds)
    rows: list[tuple[int, int, int, int]] = []
    written, last_ts = 0, 0
    t0 = time.perf_counter()
    deadline = t0 + seconds + 30
    while written < total and time.perf_counter() < deadline:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        if due > written:
            before = time.time_ns()
            batch = []
            for i in range(written, due):
                last_ts = max(before, last_ts + 1)
                batch.append(PriceMarked(ts_ns=last_ts, symbol="SYN",
                                         price_ticks=ticks + (i % 3) - 1))
            seq = store.append(batch)
            rows.append((seq - len(batch) + 1, len(batch), before, time.time_ns()))
            written = due
        nxt = t0 + (len(rows) * batch_ms / 1e3)
        time.sleep(max(0.0, min(nxt - time.perf_counter(), batch_ms / 1e3)))
    store.close()
    np.save(out, np.asarray(rows, dtype=np.int64).reshape(-1, 4))


def nudge(home: Path) -> None:
    """One more mark once the clients have gone: a stream's handler waits on its queue, not
    on its socket, so it sees its client left only when it next sends; until then the server
    does not stop on SIGTERM (uvicorn waits for the handler)."""
    from foxhunt.execution.store import SqlEventStore, default_log_url
    from foxhunt.portfolio.events import PriceMarked

    store = SqlEventStore(default_log_url(ACCOUNT, home))
    try:
        store.sync()
        last = next(e for _, e in store.read(store.latest_seq() - 1)
                    if isinstance(e, PriceMarked))
        store.append([PriceMarked(ts_ns=time.time_ns(), symbol=last.symbol,
                                  price_ticks=last.price_ticks)])
    finally:
        store.close()
    time.sleep(0.5)


def fan_out(server: Server, home: Path, folder: Path, clients: int, procs: int, rate: float,
            seconds: float, batch_ms: float, compression: str) -> dict[str, Any]:
    url = f"ws://127.0.0.1:{server.port}/api/v1/ws/accounts/{ACCOUNT}"
    me = str(Path(__file__).resolve())
    shares = [clients // procs + (1 if k < clients % procs else 0) for k in range(procs)]
    workers = []
    try:
        for k, share in enumerate(shares):
            workers.append(subprocess.Popen(
                [sys.executable, me, "--_clients", url, server.token, str(share),
                 str(folder / f"clients{k}.npz"), compression], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        start_seq = None
        for w in workers:
            line = w.stdout.readline()  # bounded: the worker gives up after 120 s
            if not line.startswith("ready"):
                w.wait(30)
                raise RuntimeError(f"client worker: {w.stderr.read().strip()[-300:]}")
            start_seq = int(line.split()[1])
        pids = {"server": server.proc.pid, **{f"clients{k}": w.pid for k, w in
                                              enumerate(workers)}}
        cpu0 = {k: cpu_s(p) for k, p in pids.items()}
        rows_file = folder / "writer.npy"
        t0 = time.perf_counter()
        wr = subprocess.run([sys.executable, me, "--_writer", str(home), str(rate),
                             str(seconds), str(batch_ms), str(rows_file)],
                            capture_output=True, text=True, timeout=seconds + 120, check=False)
        if wr.returncode != 0:
            raise RuntimeError(f"writer: {wr.stderr.strip()[-300:]}")
        rows = np.load(rows_file)
        last = int(rows[-1, 0] + rows[-1, 1] - 1)
        cpu = {k: round(cpu_s(p) - cpu0[k], 2) for k, p in pids.items()}
        for w in workers:
            w.stdin.write(f"{last}\n")
            w.stdin.flush()
        for w in workers:
            w.wait(DRAIN_S + 60)
        wall = time.perf_counter() - t0
        for w in workers:
            if w.returncode != 0:
                raise RuntimeError(f"client worker exited {w.returncode}: "
                                   f"{w.stderr.read().strip()[-300:]}")
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(5)
    written = np.zeros(last + 1, dtype=np.int64)
    for first, count, _before, after in rows:
        written[first:first + count] = after
    expected = np.arange(int(rows[0, 0]), last + 1)
    lat, lost, dup, late, failed = [], 0, 0, 0, []
    for k in range(len(workers)):
        z = np.load(folder / f"clients{k}.npz")
        late += int(z["late"])
        failed += [f for f in z["failed"].tolist() if f]
        keep = (z["seqs"] >= expected[0]) & (z["seqs"] <= last)
        seqs, recv, who = z["seqs"][keep], z["recv"][keep], z["client"][keep]
        lat.append(recv - written[seqs])
        for c in range(shares[k]):
            got = np.unique(seqs[who == c])
            dup += int((who == c).sum()) - got.size
            lost += expected.size - got.size
    nudge(home)
    lat_ns = np.concatenate(lat)
    sizes = rows[:, 1]
    doc = {
        "clients": clients, "client_processes": procs, "compression": compression, "events_per_s": rate,
        "seconds": seconds, "events": int(expected.size), "start_seq": start_seq,
        "writer": {"batches": int(rows.shape[0]), "events_per_batch_mean": round(float(
            sizes.mean()), 2), "achieved_per_s": round(float(expected.size / max(
                (rows[-1, 3] - rows[0, 2]) / 1e9, 1e-9)), 1),
            "append_ms": quantiles_ms(rows[:, 3] - rows[:, 2])},
        "deliveries": int(lat_ns.size), "expected_deliveries": int(expected.size * clients),
        "lost": lost, "duplicates": dup, "clients_late": late, "clients_failed": failed,
        "delivery_latency": quantiles_ms(lat_ns), "wall_s": round(wall, 2),
        "cpu_s_while_writing": cpu,
        "server_cpu_share": round(cpu["server"] / max((rows[-1, 3] - rows[0, 2]) / 1e9, 1e-9),
                                  3),
    }
    doc["target"] = f"p99 <= {TARGETS['delivery_p99_ms']:g} ms, none lost"
    doc["target_met"] = bool(lost == 0 and not failed and doc["delivery_latency"]["p99_ms"]
                             <= TARGETS["delivery_p99_ms"])
    return doc


def table(results: dict[str, Any]) -> str:
    r, f = results["rest"], results["fan_out"]
    if "skipped" in r:
        r = {"rate_per_s": 0, "errors": 0, "target_met": None,
             "latency_from_due": {"n": 0, "p50_ms": "-", "p99_ms": "-", "max_ms": "-"}}
    lr, lf = r["latency_from_due"], f["delivery_latency"]
    return "\n".join([
        "figure                                   n        p50 ms   p99 ms   max ms  met",
        f"REST at {r['rate_per_s']:g}/s (errors {r['errors']})".ljust(40)
        + f" {lr['n']:>7} {lr['p50_ms']:>9} {lr['p99_ms']:>8} {lr['max_ms']:>8}  "
        f"{r['target_met']}",
        f"fan-out {f['clients']} clients, {f['events_per_s']:g} ev/s (lost {f['lost']})"
        .ljust(40) + f" {lf['n']:>7} {lf['p50_ms']:>9} {lf['p99_ms']:>8} {lf['max_ms']:>8}  "
        f"{f['target_met']}"])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_clients":
        url, token, n, out, compression = sys.argv[2:7]
        asyncio.run(_clients(url, token, int(n), Path(out), compression))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--_serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6] == "1")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--_writer":
        home, rate, seconds, batch_ms, out = sys.argv[2:7]
        writer(Path(home), float(rate), float(seconds), float(batch_ms), Path(out))
        return
    import torch
    from _common import emit, log

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, help=f"REST requests per second (default "
                    f"{FULL['rate']:g}; quick {QUICK['rate']:g})")
    ap.add_argument("--rest-s", type=float, help=f"seconds of REST load (default "
                    f"{FULL['rest_s']:g}; quick {QUICK['rest_s']:g})")
    ap.add_argument("--clients", type=int, help=f"WebSocket clients (default {FULL['clients']}; "
                    f"quick {QUICK['clients']})")
    ap.add_argument("--client-procs", type=int, default=1,
                    help="processes the clients are spread over (1)")
    ap.add_argument("--events-per-s", type=float, default=1000.0, help="events written a "
                    "second (1,000)")
    ap.add_argument("--events-s", type=float, help=f"seconds of writing (default "
                    f"{FULL['events_s']:g}; quick {QUICK['events_s']:g})")
    ap.add_argument("--batch-ms", type=float, default=5.0, help="the writer appends a batch "
                    "this often (5 ms)")
    ap.add_argument("--compression", choices=("deflate", "none"), default="deflate",
                    help="the clients offer permessage-deflate, as browsers do (default), or "
                    "not")
    ap.add_argument("--poll-s", type=float, help="the server's stream_poll_s (default: the "
                    "shipped 0.02; set, the app runs under uvicorn from this script)")
    ap.add_argument("--profile", action="store_true", help="the server's event loop under "
                    "cProfile (from this script): its top functions in the document")
    ap.add_argument("--send-batch-text", action="store_true", help="the stream sends each "
                    "batch's JSON made once (streams.Batch.text) rather than json.dumps once a "
                    "client: a preview of a one-line change to app.py (from this script)")
    ap.add_argument("--skip-rest", action="store_true", help="the fan-out only")
    ap.add_argument("--out", help="also write the JSON document to this file")
    ap.add_argument("--quick", action="store_true", help="2 s of REST at 100/s, 20 clients for 2 s (CI)")
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.rate, args.rest_s, args.clients, args.client_procs, args.events_per_s,
           args.events_s, args.batch_ms) <= 0 or args.client_procs > args.clients:
        ap.error("every figure must be > 0, --client-procs <= --clients")
    from importlib import metadata

    with tempfile.TemporaryDirectory(prefix="foxhunt-bench-api-") as tmp:
        folder = Path(tmp)
        home = folder / "home"
        home.mkdir()
        log("preparing FOXHUNT_HOME: synthetic bars, a paper account, a viewer")
        prepare_home(home)
        profile = folder / "server.prof" if args.profile else None
        server = Server(home, profile, args.poll_s, args.send_batch_text)
        try:
            results: dict[str, Any] = {
                "quick": args.quick,
                "versions": {p: metadata.version(p) for p in
                             ("fastapi", "uvicorn", "starlette", "websockets", "httpx")},
                "server": "python -m foxhunt serve on 127.0.0.1, its own process, shipped "
                          "settings (stream_poll_s 0.02)" if profile is None and args.poll_s
                          is None and not args.send_batch_text else f"create_app under "
                          f"uvicorn from bench_api.py on 127.0.0.1, its own process, "
                          f"stream_poll_s {args.poll_s or 0.02}"
                          f"{', cProfile on its event loop' if profile else ''}"
                          f"{', batches sent as Batch.text' if args.send_batch_text else ''}",
            }
            results["rest_service"] = rest_service(server)
            if args.skip_rest:
                results["rest"] = {"skipped": "--skip-rest"}
            else:
                log(f"REST: {args.rate:g} requests/s for {args.rest_s:g} s")
                results["rest"] = rest_load(server, args.rate, args.rest_s)
            log(f"fan-out: {args.clients} clients, {args.events_per_s:g} events/s for "
                f"{args.events_s:g} s")
            results["fan_out"] = fan_out(server, home, folder, args.clients, args.client_procs,
                                         args.events_per_s, args.events_s, args.batch_ms,
                                         args.compression)
        finally:
            stopped = server.stop()
        results["server_stop"] = stopped
        if profile is not None:
            results["server_profile"] = top_functions(profile)
    print(table(results), file=sys.stderr)
    emit("bench_api", torch.device("cpu"), results, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _run import run_main

    run_main(main, "bench_api")
