"""`foxhunt paper`, `foxhunt orders`, `foxhunt positions`, `foxhunt risk status|halt|resume|kill`.

Every command works on one account's event log: `$FOXHUNT_HOME/trading/<account>.sqlite` by
default, any SQLAlchemy URL with `--log` (PostgreSQL: postgresql+psycopg://...). The state
shown is the log folded, so it is what a restarted trader would rebuild. Operator actions
(halt, resume, kill) are events in the same log, stamped with the log's own clock (its last
event's time: a replay's trading day is not cut by the wall clock); a paper process running on
the log picks them up at its next append (a second writer's append fails on the sequence
number, and the trader folds the log again and goes on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer

from foxhunt import telemetry
from foxhunt.cli.common import (
    ONE_POLICY,
    RUN_DIR_RULE,
    BarsOpt,
    FromOpt,
    JsonOpt,
    ToOpt,
    emit_json,
    err,
    fmt_ts,
    out,
    resolve_bars,
    rich_table,
    settings_of,
    under_home,
)
from foxhunt.errors import ConfigError, FoxhuntError

risk_app = typer.Typer(help="Trading state, limits and the kill switch of an account.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command()(paper)
    app.command()(live)
    app.command()(orders)
    app.command()(positions)
    app.add_typer(risk_app, name="risk")


AccountOpt = Annotated[str, typer.Option("--account", help="Account (one event log each).")]
LogOpt = Annotated[str | None, typer.Option(
    "--log", help="Event log URL (default: sqlite in FOXHUNT_HOME/trading/ACCOUNT.sqlite).")]
_SPEED = re.compile(r"^(\d+(?:\.\d+)?)x$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _checked(account: str) -> str:
    if not _ACCOUNT.match(account):
        raise ConfigError(f"--account {account!r}: use letters, digits, '_', '.' or '-' (at most 64)")
    return account


def _log_url(ctx: typer.Context, account: str, log: str | None) -> str:
    from foxhunt.paper.accounts import log_url

    return log_url(settings_of(ctx).home, _checked(account), log)


def _contracts(ctx: typer.Context) -> dict[str, Any]:
    from foxhunt.cli.data import instrument_registry
    from foxhunt.orders.contract import Contract

    reg = instrument_registry(ctx)
    return {s: Contract.from_instrument(reg.get(s)) for s in reg.symbols}


def _files(ctx: typer.Context, account: str, log: str | None):
    from foxhunt.paper.accounts import account_files

    return account_files(settings_of(ctx).home, account, log)


def _engine(ctx: typer.Context, account: str, log: str | None):
    """The account's engine folded from its log (no venue: operator commands log; `risk kill`
    attaches the paper venue itself when no trader runs)."""
    from foxhunt.paper.accounts import open_account

    return open_account(settings_of(ctx).home, _checked(account), log, _contracts(ctx))


def _shown(url: str) -> str:
    from foxhunt.paper.accounts import shown

    return shown(url)


# ----------------------------------------------------------------------------------- paper


def _parse_speed(speed: str) -> float | None:
    s = speed.strip().lower()
    if s == "max":
        return None
    if s == "realtime":
        return 1.0
    m = _SPEED.match(s)
    if m and float(m.group(1)) > 0:
        return float(m.group(1))
    raise ConfigError(f"--speed {speed!r}: use max, realtime or a factor like 10x")


@dataclass
class _Start:
    store: Any
    notice: str = ""


def _start_paper(url: str, files, meta: dict[str, Any], resume: bool, created_lock: bool) -> _Start:
    """Open the account's log for a run: a fresh start, or the run to resume (its arguments
    must be the same). A start that fails writes nothing: what it created is removed. A start
    killed before its log held an event (it left a lock, its arguments or an empty log) starts
    afresh with --resume too, so a supervisor that always resumes works; --resume on an
    account that never started is refused (a mistyped name must not start a new run)."""
    from foxhunt.execution import SqlEventStore
    from foxhunt.paper.accounts import sqlite_file as file_of

    sqlite_file = file_of(url)
    new_log = sqlite_file is not None and not sqlite_file.exists()
    store = None
    try:
        store = SqlEventStore(url)
        before = files.read_meta()
        if store.last_seq() > 0:
            if not resume:
                raise FoxhuntError(
                    f"account {files.account!r} already has an event log ({_shown(url)}); pass "
                    "--resume to continue its run, or use another --account")
            if before is None:
                raise FoxhuntError(
                    f"account {files.account!r}: its log holds a run but {files.meta} is "
                    "missing; restore that file to resume, or use another --account")
            diff = [k for k in meta if before.get(k) != meta[k]]
            if diff:
                raise FoxhuntError(f"--resume: {', '.join(diff)} differ from the run being "
                                   f"resumed ({files.meta}); give the same arguments")
            return _Start(store)
        if resume and created_lock and before is None:
            raise FoxhuntError(f"account {files.account!r} has no paper run to resume (log "
                               f"{_shown(url)}); start one without --resume")
        if files.journal.exists() and files.journal.stat().st_size:
            raise FoxhuntError(
                f"{files.journal} holds a venue's record but the log {_shown(url)} holds no "
                "run: they do not belong together; move the journal away to start afresh")
        files.write_meta(meta)
        notice = (f"account {files.account!r} has no run to resume: starting one"
                  if resume else "")
        return _Start(store, notice)
    except BaseException:
        if store is not None:
            store.close()
        if new_log:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{sqlite_file}{suffix}").unlink(missing_ok=True)
        if created_lock:
            files.lock_path.unlink(missing_ok=True)
        raise


def paper(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol with stored bars.")],
    run: Annotated[str | None, typer.Option(
        "--run", help="Run directory: its last fold's model. " + RUN_DIR_RULE + ONE_POLICY)] = None,
    checkpoint: Annotated[Path | None, typer.Option(
        help="One checkpoint file." + ONE_POLICY)] = None,
    strategy: Annotated[str | None, typer.Option(
        help="Rule: sma:FAST,SLOW | buy-and-hold | zfade:L,E | random:SEED." + ONE_POLICY)] = None,
    bars: BarsOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    speed: Annotated[str, typer.Option(help="max, realtime or Nx (N times real time).")] = "max",
    risk: Annotated[Path | None, typer.Option(
        "--risk", help="TOML file with a [risk] table (default: the built-in limits).")] = None,
    account: AccountOpt = "paper",
    log: LogOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue this account's run after a stop or crash.")] = False,
    rebuild_venue: Annotated[bool, typer.Option("--rebuild-venue", help="With --resume: write the paper venue's journal afresh from the event log (when the journal is damaged or lost its tail).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Paper-trade a trained agent or a rule strategy over stored bars, behind the risk limits."""
    if not telemetry.enabled():
        telemetry.configure("foxhunt-paper", join_parent_trace=False)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from foxhunt.cli.data import open_store
    from foxhunt.cli.evaluate import _window, load_series
    from foxhunt.execution.sim import SimulatedVenue, rebuild_journal
    from foxhunt.orders.contract import Contract
    from foxhunt.paper import PaperTrader, ReconciliationError, load_agent, load_rule
    from foxhunt.paper.rolling import RollingPaperTrader, stored_plan
    from foxhunt.risk.config import RiskConfig, load_risk_config

    chosen = [x for x in (run, checkpoint, strategy) if x]
    if len(chosen) != 1:
        raise FoxhuntError("paper: give exactly one of --run DIR, --checkpoint FILE or --strategy S")
    factor = _parse_speed(speed)
    bars = resolve_bars(ctx, symbol, bars)
    run = under_home(ctx, run, existing=True)
    limits = load_risk_config(risk) if risk is not None else RiskConfig()
    url = _log_url(ctx, account, log)
    files = _files(ctx, account, log)
    instrument, frame, _ = load_series(ctx, symbol, bars)
    window = _window(frame, start, end, "a paper run")
    if strategy is not None:
        loaded = load_rule(strategy, frame)
    else:
        path, features = agent_checkpoint(run, checkpoint, "paper-trade")
        loaded = load_agent(path, instrument, features)
    env, policy = policy_env(ctx, loaded, strategy, files, path if strategy is None else None)
    contract = Contract.from_instrument(instrument)
    with open_store(ctx) as market:  # a continuous series: held in its months, rolled
        plan = stored_plan(market, instrument, bars, frame)
    traded = {symbol: contract} if plan is None else plan.contracts(contract)
    PaperTrader.validate(frame, contract, loaded.decider, window, limits, traded)
    meta = {"symbol": symbol, "bars": bars, "policy": policy, "window": list(window),
            "log": files.log, "slippage_ticks": env.slippage_ticks,
            "risk": limits.model_dump(mode="json"),
            **({} if plan is None else {"contracts": list(plan.months)})}
    if rebuild_venue and not resume:
        raise FoxhuntError("--rebuild-venue rebuilds a run's venue journal: use it with --resume")
    with files.hold() as created_lock:
        started = _start_paper(url, files, meta, resume, created_lock)
        store = started.store
        try:
            if rebuild_venue:
                kept = rebuild_journal(files.journal, store, traded)
                err.print(f"venue journal {files.journal} rebuilt from the log"
                          + (f"; the old one is {kept}" if kept is not None else ""))
            venue = SimulatedVenue(traded, env.slippage_ticks, journal=files.journal)
        except BaseException:
            store.close()
            raise
        bar_ui = progress = None
        if not as_json and out.is_terminal:
            bar_ui = Progress(TextColumn("paper {task.fields[symbol]}"), BarColumn(),
                              TextColumn("{task.completed:,}/{task.total:,} bars"),
                              TimeRemainingColumn(), console=out, transient=True)
            task = bar_ui.add_task("paper", total=window[1] - window[0], symbol=symbol)

            def progress(done: int, total: int) -> None:
                if done % 256 == 0 or done == total:
                    bar_ui.update(task, completed=done)

        rolling = {} if plan is None else {"plan": plan}
        trader = (PaperTrader if plan is None else RollingPaperTrader)(
            frame, instrument, loaded.decider, window, store=store, venue=venue, env=env,
            risk=limits, account=account, speed=factor, progress=progress, **rolling)
        try:
            if bar_ui is not None:
                with bar_ui:
                    result = trader.run()
            else:
                result = trader.run()
        except ReconciliationError as exc:
            raise ReconciliationError(
                f"{exc}. If the venue's journal {files.journal} lost its tail, rebuild it from "
                "the log: the same command with --resume --rebuild-venue") from None
        finally:
            venue.close()
            store.close()
    trades = trader.trades(result)
    doc = {**result.to_json(), "account": account, "log": _shown(url), "trades": len(trades)}
    if started.notice:
        err.print(started.notice)
    if as_json:
        emit_json("paper", doc)
        return
    out.print(f"paper {symbol} {bars} {result.policy}: bars {result.window[0]}..{result.window[1]}"
              f", {len(trades)} trades, {doc['orders']} orders ({doc['denied']} denied)")
    out.print(f"PnL {result.pnl:+,.2f} {contract.currency}, equity {result.equity:,.2f}, "
              f"position {result.position:+d}")
    if result.position:
        out.print(f"position {result.position:+d} left open: trading is "
                  f"{trader.engine.trading_state} ({trader.engine.risk.state.reason}); "
                  "its fills are in no trade")
    for line in result.rolls or []:
        out.print(line, markup=False)
    if result.resumed_from is not None:
        out.print(f"resumed at bar {result.resumed_from}; reconciled: {result.reconciled}")
    out.print(f"log: {_shown(url)}")


# ----------------------------------------------------------------------------- orders, positions


def _order_row(o) -> dict[str, Any]:
    return {"client_order_id": o.client_order_id, "symbol": o.symbol, "side": str(o.side),
            "quantity": o.quantity, "filled": o.filled_qty, "type": str(o.order_type),
            "tif": str(o.time_in_force), "limit_ticks": o.limit_ticks, "stop_ticks": o.stop_ticks,
            "status": str(o.status), "avg_fill_ticks": o.avg_fill_ticks, "tag": o.tag,
            "reason": o.reason, "ts_init": o.ts_init, "ts_last": o.ts_last}


def orders(
    ctx: typer.Context,
    account: AccountOpt = "paper",
    log: LogOpt = None,
    status: Annotated[str, typer.Option(help="working, all or a status (FILLED, DENIED, ...).")] = "all",
    last: Annotated[int, typer.Option(help="Show the last N orders (0: all).", min=0)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Orders of an account, folded from its event log."""
    from foxhunt.paper.accounts import orders_doc

    engine, url = _engine(ctx, account, log)
    try:
        rows = orders_doc(engine, account, url, status, last).document()["orders"]
    except ConfigError as exc:
        raise ConfigError(f"--{exc}") from None
    finally:
        engine.store.close()
    if as_json:
        emit_json("orders", {"account": account, "log": url, "orders": rows})
        return
    out.print(rich_table(f"orders of {account} ({len(rows)})",
                         ["id", "symbol", "side", "qty", "filled", "type", "status", "tag", "time"],
                         [[r["client_order_id"], r["symbol"], r["side"], r["quantity"], r["filled"],
                           r["type"], r["status"], r["tag"], fmt_ts(r["ts_last"])] for r in rows]))


def positions(ctx: typer.Context, account: AccountOpt = "paper", log: LogOpt = None,
              as_json: JsonOpt = False) -> None:
    """Positions, marks and PnL of an account, folded from its event log."""
    from foxhunt.paper.accounts import positions_doc

    engine, url = _engine(ctx, account, log)
    engine.store.close()
    acct = engine.account
    doc = positions_doc(engine, account, url).document()
    rows = doc["positions"]
    if as_json:
        emit_json("positions", doc)
        return
    out.print(rich_table(f"positions of {account}",
                         ["root", "contract", "position", "mark", "unrealised", "realised"],
                         [[r["root"], r["contract"] or "—", f"{r['position']:+d}", r["mark"],
                           r["unrealised"], r["realised"]] for r in rows]))
    for line in doc.get("rolls") or []:
        out.print(line, markup=False)
    out.print(f"balance {acct.balance:,.2f} {acct.currency}, equity {acct.equity():,.2f}, "
              f"realised {acct.realised:+,.2f}, commissions {acct.commissions:,.2f}")


# ----------------------------------------------------------------------------------- risk


def _risk_doc(engine, account: str, url: str) -> dict[str, Any]:
    from foxhunt.paper.accounts import risk_doc

    return risk_doc(engine, account, url).document()


def _print_risk(doc: dict[str, Any]) -> None:
    out.print(f"[bold]{doc['account']}[/] {doc['trading_state']}"
              + (f" ({doc['cause']}: {doc['reason']})" if doc["cause"] else "")
              + (" kill switch active" if doc["kill_switch"] else ""))
    out.print(f"equity {doc['equity']}, daily loss {doc['daily_loss']}, drawdown "
              f"{doc['drawdown']}, orders today {doc['orders_today']}, working orders "
              f"{doc['working_orders']}")


@risk_app.command("status")
def risk_status(ctx: typer.Context, account: AccountOpt = "paper", log: LogOpt = None,
                as_json: JsonOpt = False) -> None:
    """Trading state, breakers' figures and limits of an account."""
    engine, url = _engine(ctx, account, log)
    doc = _risk_doc(engine, account, url)
    emit_json("risk", doc) if as_json else _print_risk(doc)


def _operator(ctx, account, log, as_json, action: str, reason: str) -> None:
    from foxhunt.paper.accounts import operator_command

    doc = operator_command(settings_of(ctx).home, _checked(account), log, _contracts(ctx), action,
                           reason).document()
    if as_json:
        emit_json("risk", doc)
        return
    _print_risk(doc)
    if doc.get("flatten"):
        out.print(doc["flatten"])


ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (kept in the log).")]


def live(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument symbol (its stored bars warm the features up).")],
    venue: Annotated[str, typer.Option(
        "--venue", help="fix:FILE (a FIX 4.4 session: QuickFIX settings file) or ib:HOST:PORT[:CLIENT_ID] "
        "(TWS / IB Gateway).")],
    run: Annotated[str | None, typer.Option(
        "--run", help="Run directory: its last fold's model. " + RUN_DIR_RULE + ONE_POLICY)] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="One checkpoint file." + ONE_POLICY)] = None,
    strategy: Annotated[str | None, typer.Option(
        help="Rule: sma:FAST,SLOW | buy-and-hold | zfade:L,E | random:SEED." + ONE_POLICY)] = None,
    bars: BarsOpt = None,
    history_to: Annotated[str | None, typer.Option(
        "--history-to", help="Warm up on stored bars up to this time (default: all of them); "
        "live bars not after the history are skipped.")] = None,
    risk: Annotated[Path | None, typer.Option(
        "--risk", help="TOML file with a [risk] table (default: the built-in limits).")] = None,
    ib_contracts: Annotated[Path | None, typer.Option(
        "--ib-contracts", help="With --venue ib: TOML file with an [ib.contracts.SYMBOL] table "
        "per symbol (exchange and expiry, or con_id; default: none).")] = None,
    feed_spec: Annotated[str, typer.Option(
        "--feed", help="Where bars come from: venue (its market data), replay:max|replay:Nx (the "
        "stored bars after --history-to) or databento:DATASET:SYMBOL (needs the databento "
        "package and DATABENTO_API_KEY).")] = "venue",
    account: AccountOpt = "live",
    log: LogOpt = None,
    on_mismatch: Annotated[str, typer.Option(
        "--on-mismatch", help="When the venue and the log disagree at a start or reconnect: "
        "reduce (only reducing orders pass) or halt.")] = "reduce",
    stale_after: Annotated[float | None, typer.Option(
        "--stale-after", help="Seconds without a bar before the price is stale (adding orders are "
        "denied); default three bars.")] = None,
    max_bars: Annotated[int | None, typer.Option("--max-bars", help="Stop after this many live bars (default: until the feed ends or Ctrl-C).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Trade a trained agent or a rule live: the paper engine with a FIX or IB venue and its
    market data, behind the risk limits. A start or reconnect reconciles with the venue first."""
    if not telemetry.enabled():
        telemetry.configure("foxhunt-live", join_parent_trace=False)

    from foxhunt.backtest.strategies import parse_strategy
    from foxhunt.cli.evaluate import load_traded_series, refuse_continuous
    from foxhunt.live.trader import LiveRuleDecider, LiveTrader
    from foxhunt.live.venues import (
        check_venue,
        close_venue,
        open_venue,
        owner_of,
        parse_feed,
        parse_venue,
    )
    from foxhunt.orders.contract import Contract
    from foxhunt.paper import load_agent
    from foxhunt.risk.config import RiskConfig, load_risk_config

    chosen = [x for x in (run, checkpoint, strategy) if x]
    if len(chosen) != 1:
        raise FoxhuntError("live: give exactly one of --run DIR, --checkpoint FILE or --strategy S")
    if on_mismatch not in ("reduce", "halt"):
        raise ConfigError(f"--on-mismatch {on_mismatch!r}: use reduce or halt")
    if stale_after is not None and not stale_after > 0:
        raise ConfigError(f"--stale-after {stale_after}: give seconds > 0")
    spec, source = parse_venue(venue), parse_feed(feed_spec)
    if source.kind == "replay" and history_to is None:
        raise ConfigError("--feed replay: give --history-to: the bars after it are replayed")
    if source.kind == "databento":
        import importlib.util

        if importlib.util.find_spec("databento") is None:
            raise ConfigError("--feed databento: needs the databento package (pip install "
                              "databento) and DATABENTO_API_KEY")
    bars = resolve_bars(ctx, symbol, bars)
    run = under_home(ctx, run, existing=True)
    limits = load_risk_config(risk) if risk is not None else RiskConfig()
    url = _log_url(ctx, account, log)
    files = _files(ctx, account, log)
    refuse_continuous(ctx, symbol, bars, "foxhunt live")
    instrument, frame = load_traded_series(ctx, symbol, bars)
    replayed = None
    if history_to is not None:
        from foxhunt.cli.evaluate import _window

        cut = _window(frame, None, history_to, "the live history")[1]
        frame, replayed = frame.slice(0, cut), frame.slice(cut, len(frame))
    if strategy is not None:
        decider, env, policy = (LiveRuleDecider(parse_strategy(strategy)),
                                settings_of(ctx).settings.env, f"strategy:{strategy}")
    else:
        path, features = agent_checkpoint(run, checkpoint, "trade")
        loaded = load_agent(path, instrument, features)
        decider, (env, policy) = loaded.decider, policy_env(ctx, loaded, None, files, path)
    contract = Contract.from_instrument(instrument)
    check_venue(spec, {symbol: contract}, ib_contracts,  # before any file is written
                owner_of(account, files.folder / f"{files.stem}.venue"))
    meta = {"mode": "live", "symbol": symbol, "bars": bars, "policy": policy,
            "venue": spec.label, "feed": feed_spec, "log": files.log, "risk": limits.model_dump(mode="json")}
    events: list[dict[str, Any]] = []

    def on_event(kind: str, doc: dict[str, Any]) -> None:
        if as_json:
            if kind != "bar":
                events.append({"event": kind, **doc})
            return
        if kind == "bar":
            out.print(f"{symbol} {fmt_ts(doc['ts'])}: close {doc['close']:g}, position "
                      f"{doc['position']:+d}, {doc['state']}", markup=False)
        elif kind == "reconciled":
            (out if not doc["differences"] else err).print(doc["line"])
        else:
            err.print(f"{kind}: {doc}")

    with files.hold() as created_lock:
        # a live account goes on where it stopped: the same arguments, or a clear refusal
        before = files.read_meta()
        diff = [k for k in meta if before is not None and before.get(k) != meta[k]]
        if diff:
            raise FoxhuntError(
                f"account {account!r} trades {before.get('symbol')} with {before.get('policy')} "
                f"on {before.get('venue')} ({', '.join(diff)} differ): give the same arguments "
                "to go on, or use another --account")
        started = _start_paper(url, files, meta, before is not None, created_lock)
        store = started.store
        try:
            live_venue, feed = open_venue(spec, {symbol: contract},
                                          files.folder / f"{files.stem}.venue", account,
                                          ib_contracts)  # fmt: skip
            if source.kind != "venue":
                from foxhunt.live.replay import DatabentoFeed, ReplayFeed

                feed.close()
                feed = (ReplayFeed(replayed, symbol, source.speed) if source.kind == "replay"
                        else DatabentoFeed(source.dataset, {symbol: source.symbol}))
        except BaseException:
            store.close()
            raise
        trader = LiveTrader(frame, instrument, decider, store=store, venue=live_venue, feed=feed,
                            env=env, risk=limits, account=account, venue_label=spec.label,
                            journal=files.folder / f"{files.stem}.bars.jsonl",
                            starting_cash=Decimal(100_000), on_mismatch=on_mismatch,
                            stale_after_s=stale_after, on_event=on_event)  # fmt: skip
        import signal

        def stop(signum, frame):  # SIGTERM (a supervisor's stop) ends the session like Ctrl-C
            raise KeyboardInterrupt

        if not as_json:
            warm = (f"warm-up on {len(frame):,} stored bars to {fmt_ts(int(frame.ts[-1]))}"
                    if len(frame) else "no stored bars to warm up on")
            out.print(f"live {symbol}: {policy} on {spec.label} ({source.kind} bars), account "
                      f"{account}; {warm}", markup=False)
        previous = signal.signal(signal.SIGTERM, stop)
        try:
            result = trader.run(max_bars=max_bars)
        finally:
            signal.signal(signal.SIGTERM, previous)
            feed.close()
            close_venue(live_venue)
            store.close()
    doc = {**result.to_json(), "account": account, "log": _shown(url)}
    if as_json:
        emit_json("live", {**doc, "events": events})
        return
    out.print(f"live {symbol} on {spec.label} ({result.policy}): {result.bars} bars, "
              f"{result.orders} orders ({result.denied} denied), {result.fills} fills"
              + (f", {result.refused_reports} venue reports refused" if result.refused_reports else ""))
    out.print(f"PnL {result.pnl:+,.2f} {contract.currency}, equity {result.equity:,.2f}, "
              f"position {result.position:+d}, {result.trading_state}"
              + (f"; ended: {result.ended}" if result.ended else ""))


def agent_checkpoint(run: Path | None, checkpoint: Path | None, doing: str
                     ) -> tuple[Path, Any]:  # fmt: skip
    """The checkpoint to trade and its feature settings: a run's last fold, or one file."""
    if run is None:
        assert checkpoint is not None
        return checkpoint, None
    from foxhunt.features.config import FeatureConfig
    from foxhunt.report.run import SOURCE_FILE, read_run

    docs = read_run(run)
    fold = docs["folds.json"][-1]
    if fold.get("deployed") == "flat":
        raise FoxhuntError(f"{run}: its last fold deployed flat (no edge on validation); "
                           f"nothing to {doing}")
    return Path(fold["checkpoint"]), FeatureConfig.model_validate(docs[SOURCE_FILE]["features"])


def policy_env(ctx: typer.Context, loaded, strategy: str | None, files, path: Path | None):
    """The env settings a policy trades by (a checkpoint's own, else the config's) and the
    label the account's arguments file keeps."""
    if strategy is not None:
        return settings_of(ctx).settings.env, f"strategy:{strategy}"
    return loaded.env, f"checkpoint:{files.relative(path)}"


def _operator_command(action: str, doc: str):
    """One operator command of `foxhunt risk`: an event in the account's log."""

    def command(ctx: typer.Context, account: AccountOpt = "paper", log: LogOpt = None,
                reason: ReasonOpt = "", as_json: JsonOpt = False) -> None:
        _operator(ctx, account, log, as_json, action, reason)

    command.__doc__ = doc
    command.__name__ = f"risk_{action}"
    return command


for _action, _doc in (
    ("halt", "Stop new risk (HALTED): only orders that reduce a position pass; working orders stay."),
    ("reduce", "Only orders that reduce a position pass (REDUCING); working orders stay."),
    ("resume", "Back to ACTIVE (an operator's decision; ends the kill switch)."),
    ("kill", "Halt, cancel every working order and flatten every position, at the venue."),
):
    risk_app.command(_action)(_operator_command(_action, _doc))


@risk_app.command("adopt")
def risk_adopt(
    ctx: typer.Context,
    symbol: Annotated[str, typer.Argument(help="Instrument whose orders and position to adopt.")],
    venue: Annotated[str, typer.Option(
        "--venue", help="fix:FILE or ib:HOST:PORT[:CLIENT_ID]: the live account's venue.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the log with each change).")],
    ib_contracts: Annotated[Path | None, typer.Option(
        "--ib-contracts", help="With --venue ib: TOML file with [ib.contracts.SYMBOL] tables "
        "(default: none).")] = None,
    account: AccountOpt = "live",
    log: LogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a live account's log take the venue's view of SYMBOL (working orders, position)
    after a reconciliation found them apart; every change is an event. Trading stays REDUCING
    or HALTED until `foxhunt risk resume`."""
    from foxhunt.execution.venue import VenueError
    from foxhunt.live.reconcile import adopt_venue
    from foxhunt.live.venues import close_venue, open_venue, parse_venue
    from foxhunt.orders.errors import TradingError
    from foxhunt.paper.account_files import AccountBusyError
    from foxhunt.paper.accounts import log_clock

    if not reason.strip():
        raise ConfigError("risk adopt: give --reason (it is kept in the log)")
    spec = parse_venue(venue)
    files = _files(ctx, account, log)
    meta = files.read_meta()
    if meta is None or meta.get("mode") != "live":
        raise FoxhuntError(f"account {account!r} is not a live account (no `foxhunt live` has run "
                           "on it); adopt is for a live account's venue")
    if meta.get("venue") != spec.label:
        raise FoxhuntError(f"account {account!r} trades on {meta.get('venue')}, not {spec.label}")
    engine, url = _engine(ctx, account, log)
    try:
        with files.hold():
            live_venue, feed = open_venue(spec, {symbol: engine._contract(symbol)},
                                          files.folder / f"{files.stem}.venue", account,
                                          ib_contracts)  # fmt: skip
            feed.close()
            try:
                engine.venue = live_venue
                live_venue.connect(10.0)
                lines = adopt_venue(engine, live_venue, symbol, ts_ns=log_clock(engine),
                                    reason=reason)  # fmt: skip
            finally:
                engine.venue = None
                close_venue(live_venue)
    except AccountBusyError:
        raise FoxhuntError(f"account {account!r} is trading (foxhunt live runs on it): stop it "
                           "first, then adopt") from None
    except (TradingError, VenueError) as exc:
        raise FoxhuntError(f"risk adopt: {exc}") from None
    finally:
        engine.store.close()
    doc = {**_risk_doc(engine, account, url), "adopted": lines}
    if as_json:
        emit_json("risk", doc)
        return
    for line in lines or ["the log already agrees with the venue: nothing adopted"]:
        out.print(line, markup=False)
    out.print(f"trading state {engine.trading_state}: `foxhunt risk resume --account {account}` "
              "when ready", markup=False)
