"""`foxhunt venue`: a local FIX 4.4 exchange over stored bars, to rehearse live trading against.

It listens on 127.0.0.1 (unless --host), accepts the configured client CompIDs, fills their
orders with the paper venue's fill model as it plays the bars, and publishes each completed
bar as market data. It writes a session file a `FixVenue` connects with (`--venue fix:FILE`).
Its state (the venues' journals, QuickFIX's store) lives in --state, so an exchange stopped or
killed and started again with the same arguments goes on where it was.
"""

from __future__ import annotations

import signal
import sys
from typing import Annotated, Any

import typer

from foxhunt.cli.common import (
    OUT_DIR_RULE,
    BarsOpt,
    FromOpt,
    JsonOpt,
    ToOpt,
    emit_json,
    err,
    fmt_ts,
    out,
    resolve_bars,
    under_home,
)
from foxhunt.errors import ConfigError


def register(app: typer.Typer) -> None:
    app.command()(venue)


def _markets(ctx: typer.Context, symbols: list[str], bars: str | None, start: str | None,
             end: str | None) -> list[Any]:  # fmt: skip
    from foxhunt.cli.evaluate import _window, load_traded_series, refuse_continuous
    from foxhunt.live.fix.exchange import Market
    from foxhunt.orders.contract import Contract

    markets = []
    for symbol in symbols:
        series = resolve_bars(ctx, symbol, bars)
        refuse_continuous(ctx, symbol, series, "foxhunt venue")
        instrument, frame = load_traded_series(ctx, symbol, series)
        lo, hi = _window(frame, start, end, "the exchange")
        markets.append(Market.of(Contract.from_instrument(instrument), frame.slice(lo, hi),
                                 instrument.session))
    return markets


def venue(
    ctx: typer.Context,
    symbols: Annotated[str, typer.Argument(
        help="Symbols with stored bars, comma-separated (ES or ES,NQ); a stored contract "
        "month (ESU24) plays its own bars by its root's spec.")],
    port: Annotated[int, typer.Option(help="TCP port to listen on.", min=1, max=65535)] = 9878,
    host: Annotated[str, typer.Option(
        help="Address to listen on (another than 127.0.0.1 opens it to the network).")
    ] = "127.0.0.1",
    pause_when_away: Annotated[bool, typer.Option(
        "--pause-when-away", help="Play only while a client is logged on and subscribed (a "
        "rehearsal of a crash then loses no bars; default: the market does not wait).")] = False,
    speed: Annotated[str, typer.Option(
        help="max, realtime, Nx (a bar interval lasts 1/N of its length; gaps between "
        "sessions shrink to one bar) or step (lockstep: the next bar when every trader "
        "subscribed said it is done with the last; none logged on: wait).")] = "60x",
    bars: BarsOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    state: Annotated[str, typer.Option(
        "--state", help="State directory: journals and FIX store, kept across restarts. "
        + OUT_DIR_RULE.format(folder="venue"))] = "local",
    client: Annotated[list[str] | None, typer.Option(
        "--client", help="Client SenderCompID to accept (repeatable; each is an account; "
        "default: FOXHUNT).")] = None,
    comp_id: Annotated[str, typer.Option(help="The exchange's own CompID.")] = "FOXHUNT-EX",
    play: Annotated[str, typer.Option(
        help="When to start playing bars: subscribe (at the first market data subscription) "
        "or now.")] = "subscribe",
    exit_at_end: Annotated[bool, typer.Option(
        "--exit-at-end", help="Stop when the bars end (default: keep answering queries "
        "until Ctrl-C).")] = False,
    fix_log: Annotated[bool, typer.Option(
        "--fix-log", help="Log every FIX message in STATE/fix-log.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a local FIX 4.4 exchange that fills orders against stored bars (for rehearsals)."""
    from foxhunt.cli.trading import _parse_speed
    from foxhunt.live.fix.exchange import LocalExchange
    from foxhunt.live.fix.settings import write_session_file

    names = [s.strip() for s in symbols.split(",") if s.strip()]
    if not names:
        raise ConfigError("venue: give at least one symbol (ES or ES,NQ)")
    if play not in ("subscribe", "now"):
        raise ConfigError(f"--play {play!r}: use subscribe or now")
    lockstep = speed.strip().lower() == "step"
    factor = None if lockstep else _parse_speed(speed)
    clients = client or ["FOXHUNT"]
    folder = under_home(ctx, state, "venue")
    assert folder is not None
    markets = _markets(ctx, names, bars, start, end)

    def say(kind: str, data: dict[str, Any]) -> None:
        if as_json:  # a stream: one document a line
            emit_json("venue.event", {"event": kind, **data})
            sys.stdout.flush()
            return
        if kind == "listening":
            out.print(f"listening on {data['address']} as {data['comp_id']}; clients "
                      f"{', '.join(data['clients'])}", markup=False)
        elif kind == "progress":
            out.print(f"bars {data['bars']:,} to {fmt_ts(data['clock'])}, sessions "
                      f"{data['sessions']}, orders {data['orders']}", markup=False)
        elif kind == "ended":
            out.print(f"the bars ended: {data['bars']:,} played, {data['orders']} orders; "
                      + ("stopping" if exit_at_end else "still answering (Ctrl-C stops)"),
                      markup=False)
        elif kind in ("logon", "logout", "playing", "failed"):
            out.print(f"{kind} {' '.join(f'{k}={v}' for k, v in data.items())}", markup=False)

    exchange = LocalExchange(markets, folder, host=host, port=port, comp_id=comp_id,
                             clients=clients, speed=factor, lockstep=lockstep,
                             pause_when_away=pause_when_away, start=play, file_log=fix_log,
                             on_event=say)  # fmt: skip
    files = {c: write_session_file(folder / f"{c}.session.cfg",
                                   host="127.0.0.1" if host in ("0.0.0.0", "::") else host,
                                   port=port, sender=c, target=comp_id,
                                   store=folder / f"{c}-fix-store")
             for c in clients}  # fmt: skip
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        exchange.start()
        for c, path in files.items():
            say("session_file", {"client": c, "path": str(path)})
            if not as_json:
                out.print(f"session file for {c}: {path} (--venue fix:{path})", markup=False)
        while not (exchange.wait(0.5) and exit_at_end):
            pass
    except KeyboardInterrupt:
        if not as_json:
            err.print("stopping the exchange", markup=False)
    finally:
        signal.signal(signal.SIGTERM, previous)
        exchange.stop()
    summary = exchange.status()
    say("stopped", summary)
    if not as_json:
        out.print(f"stopped after {summary['bars']:,} bars, {summary['orders']} orders; "
                  f"state in {folder}", markup=False)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
