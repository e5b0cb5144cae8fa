"""An account as an operator sees it: its log folded into orders, positions and risk, and the
operator's commands (halt, reduce, resume, kill). The CLI (`foxhunt orders|positions|risk`) and
the server answer from these functions and these models, so a `--json` document and a REST
response of the same thing are the same object.

Operator actions are events in the account's log, stamped with the log's own clock (its last
event's time: a replay's trading day is not cut by the wall clock); a trader running on the log
picks them up at its next append (a second writer's append fails on the sequence number, and the
trader folds the log again and goes on).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from foxhunt.errors import ConfigError, DataError, FoxhuntError

ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
OPERATOR_ACTIONS = ("halt", "reduce", "resume", "kill")


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()

    def document(self) -> dict[str, Any]:
        """The JSON object of the `--json` document and of the REST response."""
        return self.model_dump(mode="json", exclude={
            k for k in self.OMITTED_WHEN_NONE if getattr(self, k) is None})


class OrderRow(_Doc):
    client_order_id: str
    symbol: str
    side: str
    quantity: int
    filled: int
    type: str
    tif: str
    limit_ticks: int | None
    stop_ticks: int | None
    status: str
    avg_fill_ticks: float | None
    tag: str
    reason: str
    ts_init: int
    ts_last: int


class OrdersDoc(_Doc):
    """The `orders` document."""

    account: str
    log: str
    orders: list[OrderRow]


class PositionRow(_Doc):
    symbol: str
    root: str  # the instrument (a future's root: ES for ESM24)
    contract: str | None  # the contract month held (ESM24), None for the instrument itself
    position: int
    mark: str | None
    unrealised: str
    realised: str


class PositionsDoc(_Doc):
    """The `positions` document."""

    account: str
    log: str
    currency: str
    balance: str
    equity: str
    realised: str
    commissions: str
    positions: list[PositionRow]
    rolls: list[str]  # each roll of a held position that is open or failed, in one line


class RiskDoc(_Doc):
    """The `risk` document (`flatten` after a kill; `adopted` after `risk adopt`)."""

    account: str
    log: str
    trading_state: str
    cause: str | None
    reason: str
    kill_switch: bool
    day: str | None
    equity: str
    daily_loss: str
    drawdown: str
    orders_today: int
    working_orders: int
    limits: dict[str, Any]
    flatten: str | None = None
    adopted: list[str] | None = None
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"flatten", "adopted"})


def check_account(account: str) -> str:
    if not isinstance(account, str) or not ACCOUNT_NAME.match(account):
        raise ConfigError(f"account {account!r}: use letters, digits, '_', '.' or '-' (at most 64)")
    return account


def log_url(home: Path, account: str, log: str | None) -> str:
    from foxhunt.execution.store import default_log_url

    check_account(account)
    return log or default_log_url(account, home)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite log URL, or None for another database."""
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


def shown(url: str) -> str:
    from foxhunt.execution.store import without_password

    return without_password(url)


def account_files(home: Path, account: str, log: str | None):
    from foxhunt.paper.account_files import AccountFiles

    return AccountFiles.of(home, account, log)


def risk_of(files):
    """The risk limits the account's trader was started with (kept beside its log)."""
    import pydantic

    from foxhunt.configbase import describe_validation_error
    from foxhunt.risk.config import RiskConfig

    meta = files.read_meta()
    if not meta or not meta.get("risk"):
        return RiskConfig()
    try:
        return RiskConfig.model_validate_json(json.dumps(meta["risk"]))
    except pydantic.ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, f"{files.meta} risk")) from None


def account_contracts(files, contracts: Mapping[str, Any]) -> dict[str, Any]:
    """The instruments' contracts, and the contract months the account's run holds: those a
    paper run over a continuous series names in its arguments file, or the one month a run
    trades by its own symbol (`foxhunt live ESU24`), each by its root's spec."""
    from foxhunt.data.contracts import root_of
    from foxhunt.paper.rolling import month_contracts

    meta = files.read_meta() or {}
    symbol, months = meta.get("symbol"), meta.get("contracts") or []
    if months and symbol in contracts:
        return {**contracts, **month_contracts(contracts[symbol], months)}
    root = root_of(symbol) if isinstance(symbol, str) and symbol not in contracts else None
    if root in contracts:
        return {**contracts, **month_contracts(contracts[root], [symbol])}
    return dict(contracts)


def open_account(home: Path, account: str, log: str | None, contracts: Mapping[str, Any]):
    """The account's engine folded from its log, with no venue attached: (engine, the log's
    URL without its password). The caller closes `engine.store`."""
    from foxhunt.execution import SqlEventStore, TradingEngine

    url = log_url(home, account, log)
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise FoxhuntError(f"account {account!r} has no event log ({url}); start one with "
                           "`foxhunt paper ... --account NAME`")
    files = account_files(home, account, log)
    risk = risk_of(files)
    store = SqlEventStore(url)
    try:
        engine = TradingEngine(store, account_contracts(files, contracts), risk)
    except BaseException:
        store.close()
        raise
    if not engine.account.is_open:
        store.close()
        raise FoxhuntError(f"event log {shown(url)} holds no account yet")
    return engine, shown(url)


def log_clock(engine) -> int:
    last = 0
    for _, event in engine.store.read(max(engine.seq - 1, 0)):
        last = max(last, event.ts_ns)
    return last


def order_row(o) -> OrderRow:
    return OrderRow(
        client_order_id=o.client_order_id, symbol=o.symbol, side=str(o.side),
        quantity=o.quantity, filled=o.filled_qty, type=str(o.order_type),
        tif=str(o.time_in_force), limit_ticks=o.limit_ticks, stop_ticks=o.stop_ticks,
        status=str(o.status), avg_fill_ticks=o.avg_fill_ticks, tag=o.tag, reason=o.reason,
        ts_init=o.ts_init, ts_last=o.ts_last)


def orders_doc(engine, account: str, url: str, status: str = "all", last: int = 50) -> OrdersDoc:
    """Orders of the log, `status` being working, all or one status; the last `last` (0: all)."""
    from foxhunt.orders.state import OrderStatus

    wanted = status.strip().upper()
    if wanted not in ("ALL", "WORKING") and wanted not in OrderStatus.__members__:
        raise ConfigError(f"status {status!r}: use working, all or one of "
                          f"{', '.join(OrderStatus.__members__)}")
    if last < 0:
        raise ConfigError(f"last {last}: a count of orders, 0 for all")
    rows = [order_row(o) for o in engine.book
            if wanted == "ALL" or (wanted == "WORKING" and o.is_working) or str(o.status) == wanted]
    return OrdersDoc(account=account, log=url, orders=rows[-last:] if last else rows)


def _root_month(symbol: str, instruments: Mapping[str, Any]) -> tuple[str, tuple[int, int] | None]:
    """(root, (year, month)) of a contract month of a known root; (symbol, None) otherwise."""
    from foxhunt.data.contracts import parse_symbol

    try:
        root, year, month = parse_symbol(symbol, 2000)
    except DataError:
        return symbol, None
    return (root, (year, month)) if root in instruments and root != symbol else (symbol, None)


def positions_doc(engine, account: str, url: str) -> PositionsDoc:
    """Each position by root and contract month (a month held before a roll stays listed,
    with what it realised), and the account's rolls that did not complete."""
    from foxhunt.orders.contract import money_text

    acct = engine.account
    rows = []
    keyed = {sym: _root_month(sym, acct.contracts) for sym in acct.positions}
    for sym in sorted(keyed, key=lambda s: (keyed[s][0], keyed[s][1] or (0, 0), s)):
        pos, (root, month) = acct.positions[sym], keyed[sym]
        c = acct.contracts[sym]
        mark = acct.marks.get(sym)
        rows.append(PositionRow(
            symbol=sym, root=root, contract=sym if month else None, position=pos.quantity,
            mark=str(c.price(mark)) if mark is not None else None,
            unrealised=money_text(acct.unrealised(sym) if pos.quantity else Decimal(0)),
            realised=money_text(c.money(pos.realised_ticks))))
    rolls = [r.line() for r in engine.rolls if str(r.status) != "COMPLETED"]  # open, failed
    return PositionsDoc(account=account, log=url, currency=acct.currency,
                        balance=money_text(acct.balance), equity=money_text(acct.equity()),
                        realised=money_text(acct.realised),
                        commissions=money_text(acct.commissions), positions=rows,
                        rolls=rolls)


def risk_doc(engine, account: str, url: str, **extra: Any) -> RiskDoc:
    from foxhunt.orders.contract import money_text

    st = engine.risk.state
    equity = engine.account.equity()
    return RiskDoc(account=account, log=url, trading_state=str(engine.trading_state),
                   cause=str(st.cause) if getattr(st, "cause", None) else None,
                   reason=getattr(st, "reason", ""), kill_switch=bool(st.kill_active),
                   day=st.day or None, equity=money_text(equity),
                   daily_loss=money_text(st.day_start_equity - equity),
                   drawdown=money_text(st.peak_equity - equity), orders_today=st.orders_today,
                   working_orders=len(engine.book.working()),
                   limits=engine.risk_config.model_dump(mode="json"), **extra)


def operator_command(home: Path, account: str, log: str | None, contracts: Mapping[str, Any],
                     action: str, reason: str, who: str = "the command line",
                     attempts: int = 20) -> RiskDoc:
    """Halt, reduce, resume or kill an account: an event in its log (a kill also cancels and
    flattens at the venue, see `kill`). Refuses a state the account is already in. A trader
    appending at the same moment now and then takes the log's next sequence number (or its
    lock, or stores an event the command also made, a new trading day's) first: nothing of the
    command was stored, and it is made again on the log as it has become, up to `attempts`
    times."""

    if action not in OPERATOR_ACTIONS:
        raise ConfigError(f"risk action {action!r}: use {', '.join(OPERATOR_ACTIONS)}")
    for attempt in range(attempts):
        try:
            return _operator_once(home, account, log, contracts, action, reason, who)
        except _Retry:
            time.sleep(0.01 * (attempt + 1))
    raise FoxhuntError(f"risk {action}: the log of {account!r} kept moving under {attempts} "
                       "tries (a trader appending without pause); try again")


class _Retry(Exception):
    pass


def _operator_once(home, account, log, contracts, action, reason, who) -> RiskDoc:
    from foxhunt.execution.store import DuplicateEventError, LogBusyError, SeqTakenError
    from foxhunt.orders.errors import TradingError
    from foxhunt.risk.events import TradingState

    engine, url = open_account(home, account, log, contracts)
    note = None
    try:
        engine.follow()  # what a trader appended while the log was folded: a short race left
        ts = log_clock(engine)
        if action == "kill":
            note = kill(home, engine, account, log, ts, reason or f"kill switch from {who}")
        else:
            state = {"halt": TradingState.HALTED, "reduce": TradingState.REDUCING,
                     "resume": TradingState.ACTIVE}[action]  # fmt: skip
            if engine.trading_state is state:
                raise FoxhuntError(f"account {account!r} is already {state}")
            engine.set_trading_state(state, ts, reason or f"{action} from {who}")
    except TradingError as exc:
        if isinstance(exc, SeqTakenError | LogBusyError | DuplicateEventError):
            raise _Retry from exc
        raise FoxhuntError(f"risk {action}: {exc}") from None
    finally:
        engine.store.close()
    return risk_doc(engine, account, url, flatten=note)


def kill(home: Path, engine, account: str, log: str | None, ts: int, reason: str) -> str:
    """Fire the kill switch. When no trader runs on the account, its paper venue is attached
    here, so that the cancels and the flatten orders reach the venue now (they fill at once when
    the run's bars have ended, else at the next bar when the run resumes). A running trader
    meets the kill at its next append and sends them itself."""
    from foxhunt.execution.sim import SimulatedVenue
    from foxhunt.paper.account_files import AccountBusyError
    from foxhunt.paper.runner import reconcile

    files = account_files(home, account, log)
    meta = files.read_meta()
    if meta is not None and meta.get("mode") == "live":
        sent = engine.kill(ts, reason)
        return (f"flatten orders {', '.join(o.client_order_id for o in sent) or 'none'} logged; "
                "a running `foxhunt live` sends them and the cancels within a second, else its "
                "next start does after reconciling")
    if meta is None or not files.journal.exists():
        sent = engine.kill(ts, reason)
        return (f"flatten orders {', '.join(o.client_order_id for o in sent) or 'none'} logged; "
                "no venue is attached to this account: they go out when its trader next runs")
    try:
        with files.hold():
            symbol = meta["symbol"]
            held = [symbol, *(meta.get("contracts") or [])]  # and the months of a rolling run
            venue = SimulatedVenue({s: engine.contracts[s] for s in held},
                                   float(meta.get("slippage_ticks", 1.0)), journal=files.journal)
            try:
                engine.venue = venue
                reconcile(engine, venue, held)
                sent = engine.kill(ts, reason)
                for report in venue.reports():
                    engine.on_report(report)
            finally:
                engine.venue = None
                venue.close()
    except AccountBusyError:
        sent = engine.kill(ts, reason)
        return (f"flatten orders {', '.join(o.client_order_id for o in sent) or 'none'} logged; "
                "the running trader sends them at its next bar")
    ids = ", ".join(o.client_order_id for o in sent) or "none"
    open_ = [f"{engine.account.position(s):+d} {s}" for s in held if engine.account.position(s)]
    if open_:
        return (f"flatten orders {ids} are at the venue; position {', '.join(open_)} closes "
                "at the next bar when the paper run resumes (--resume)")
    return f"flatten orders {ids} sent; {symbol} is flat"


def equity_curve(home: Path, account: str, log: str | None, contracts: Mapping[str, Any],
                 points: int = 2000) -> dict[str, Any]:
    """Equity and drawdown at each mark, as the log folds them (every `k`-th mark and the last
    when there are more than `points`)."""
    from foxhunt.execution import SqlEventStore
    from foxhunt.portfolio.account import Account
    from foxhunt.portfolio.events import PriceMarked

    acct = Account(account_contracts(account_files(home, account, log), contracts))
    ts: list[int] = []
    equity: list[float] = []
    store = SqlEventStore(log_url(home, account, log))
    try:
        for _, event in store.read():
            acct.apply(event)
            if isinstance(event, PriceMarked) and acct.is_open:
                ts.append(event.ts_ns)
                equity.append(float(acct.equity()))
    finally:
        store.close()
    peak, drawdown = float("-inf"), []
    for e in equity:
        peak = max(peak, e)
        drawdown.append(e - peak)
    step = max(1, -(-len(ts) // points))
    keep = list(range(0, len(ts), step))
    if ts and keep[-1] != len(ts) - 1:
        keep.append(len(ts) - 1)
    return {"account": account, "currency": acct.currency if acct.is_open else None,
            "ts": [ts[i] for i in keep], "equity": [equity[i] for i in keep],
            "drawdown": [drawdown[i] for i in keep]}


def accounts(home: Path) -> list[str]:
    """The accounts with a default (SQLite) log in this home."""
    folder = home / "trading"
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.sqlite") if ACCOUNT_NAME.match(p.stem))
