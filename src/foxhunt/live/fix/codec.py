"""Our orders and reports as FIX 4.4 messages, and back: the one place that knows the tags.

Both ends of the stack use it: the gateway (`FixVenue`) writes orders and reads execution
reports, the local exchange reads orders and writes reports. Prices cross the wire as exact
decimals of the contract's tick grid (`Contract.price(ticks)`), never as floats, and come back
as ticks; times are UTC timestamps at nanosecond precision (QuickFIX 1.15 reads 0, 3, 6 or 9
fraction digits).

A message is read once into `Fields` (its tags in order, from the wire text): cheaper than
QuickFIX's typed getters and the same for every message type, repeating groups included.

Client order ids: FIX wants a fresh ClOrdID for every cancel or replace. The OMS's id `<cid>`
stays the order's name; its n-th request goes out as `<cid>/c<n>` (cancel) or `<cid>/r<n>`
(replace), with OrigClOrdID=<cid>, and every answer is mapped back to `<cid>` (`root_id`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from foxhunt.execution import venue as v
from foxhunt.live.feed import LiveBar
from foxhunt.orders.contract import Contract
from foxhunt.orders.enums import OrderType, Side, TimeInForce

SOH = "\x01"
SIDE = {Side.BUY: "1", Side.SELL: "2"}
ORD_TYPE = {OrderType.MARKET: "1", OrderType.LIMIT: "2", OrderType.STOP: "3"}
TIF = {TimeInForce.DAY: "0", TimeInForce.GTC: "1", TimeInForce.IOC: "3", TimeInForce.ATC: "7"}
SIDE_OF = {c: s for s, c in SIDE.items()}
ORD_TYPE_OF = {c: t for t, c in ORD_TYPE.items()}
TIF_OF = {c: t for t, c in TIF.items()}
STATUS_OF = {"0": "working", "1": "working", "3": "working", "5": "working", "6": "working",
             "7": "working", "9": "working", "A": "working", "E": "working", "D": "working",
             "2": "filled", "4": "canceled", "8": "rejected", "C": "expired"}  # fmt: skip
"""OrdStatus (39) -> `OrderStatusReport.state`. Done for day (3), stopped (7) and suspended (9)
are still orders the venue holds: working."""
ORD_STATUS = {"working": "0", "filled": "2", "canceled": "4", "rejected": "8", "expired": "C"}

MD_ENTRIES = (("4", "open"), ("7", "high"), ("8", "low"), ("5", "close"))
"""The bar's prices as market data entries (MDEntryType): opening, session high, session low,
closing price; the volume is a trade volume entry (B)."""
MD_VOLUME = "B"
END_OF_DATA = "18"
"""SecurityTradingStatus (326) of the SecurityStatus the exchange sends when a symbol's data
ends: 18, not available for trading. The feed turns it into `FeedEnded`."""

_ALIAS = re.compile(r"^(.+)/([cr])(\d+)$")


class FixFieldError(ValueError):
    """A message lacks a field it needs, or a field's value cannot be read."""


@dataclass(frozen=True, slots=True)
class Fields:
    """A message's tags in wire order (`pairs`) and the first value of each (`first`)."""

    pairs: tuple[tuple[int, str], ...]
    first: dict[int, str]

    @classmethod
    def parse(cls, text: str) -> Fields:
        pairs = []
        for part in text.split(SOH):
            tag, eq, value = part.partition("=")
            if eq and tag.isdigit():
                pairs.append((int(tag), value))
        first: dict[int, str] = {}
        for tag, value in pairs:
            first.setdefault(tag, value)
        return cls(tuple(pairs), first)

    @classmethod
    def of(cls, message: Any) -> Fields:
        return cls.parse(message.toString())

    def get(self, tag: int, default: str | None = None) -> str | None:
        return self.first.get(tag, default)

    def req(self, tag: int) -> str:
        value = self.first.get(tag)
        if value is None or value == "":
            raise FixFieldError(f"tag {tag} is missing")
        return value

    @property
    def msg_type(self) -> str:
        return self.first.get(35, "")

    @property
    def poss_dup(self) -> bool:
        """A resend: PossDupFlag (43) or PossResend (97) is Y."""
        return self.first.get(43) == "Y" or self.first.get(97) == "Y"

    def groups(self, delimiter: int) -> list[dict[int, str]]:
        """The entries of a repeating group, each starting at its `delimiter` tag."""
        out: list[dict[int, str]] = []
        for tag, value in self.pairs:
            if tag == delimiter:
                out.append({})
            if out and tag not in out[-1]:
                out[-1][tag] = value
        return out

    def __str__(self) -> str:
        return "|".join(f"{t}={v}" for t, v in self.pairs)


# --- values ---------------------------------------------------------------------------------


_last_second: tuple[int, str] = (0, "19700101-00:00:00")
"""The last second `fix_time` wrote (orders and reports come many to a second); one tuple,
replaced whole, so threads never see half of it."""
_STAMP = re.compile(r"^[0-9]{8}-[0-9]{2}:[0-9]{2}:[0-9]{2}$")


def fix_time(ts_ns: int) -> str:
    """UTCTimestamp: milliseconds when exact, else nanoseconds."""
    global _last_second
    sec, ns = divmod(int(ts_ns), 1_000_000_000)
    last, stamp = _last_second
    if sec != last:
        stamp = datetime.fromtimestamp(sec, tz=UTC).strftime("%Y%m%d-%H:%M:%S")
        _last_second = (sec, stamp)
    return f"{stamp}.{ns // 1_000_000:03d}" if ns % 1_000_000 == 0 else f"{stamp}.{ns:09d}"


def parse_time(text: str) -> int:
    """UTCTimestamp (YYYYMMDD-HH:MM:SS[.fff[fff[fff]]]) to int64 ns. The fixed layout is read
    by hand (a fifth of `strptime`'s cost); anything else goes to `strptime`."""
    try:
        head, _, frac = text.partition(".")
        if frac and (not frac.isdigit() or len(frac) > 9):
            raise ValueError(frac)
        if _STAMP.match(head):
            stamp = datetime(int(head[:4]), int(head[4:6]), int(head[6:8]), int(head[9:11]),
                             int(head[12:14]), int(head[15:17]), tzinfo=UTC)
            seconds = calendar.timegm(stamp.utctimetuple())
        else:
            seconds = int(datetime.strptime(head, "%Y%m%d-%H:%M:%S")
                          .replace(tzinfo=UTC).timestamp())
    except ValueError:
        raise FixFieldError(f"{text!r} is not a UTC timestamp") from None
    return seconds * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


def md_date_time(ts_ns: int) -> tuple[str, str]:
    """MDEntryDate (UTCDateOnly) and MDEntryTime (UTCTimeOnly) of a bar's close time."""
    date, _, time = fix_time(ts_ns).partition("-")
    return date, time


def price_text(contract: Contract, ticks: int) -> str:
    return format(contract.price(ticks).normalize(), "f")


def ticks_of(contract: Contract, text: str) -> int:
    """Ticks of a price from the wire; FixFieldError when it is not a number on the grid."""
    try:
        return contract.ticks_exact(Decimal(text))
    except (InvalidOperation, ArithmeticError):
        raise FixFieldError(f"{contract.symbol} price {text!r} is not a number") from None
    except v.TradingError as exc:
        raise FixFieldError(str(exc)) from None


def qty_of(text: str, tag: int = 38) -> int:
    """A whole quantity of contracts (FIX sends Qty as a decimal: `2` or `2.0`)."""
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise FixFieldError(f"tag {tag} {text!r} is not a quantity") from None
    if not d.is_finite() or d != d.to_integral_value() or d < 0:
        raise FixFieldError(f"tag {tag} {text!r} is not a whole number of contracts")
    return int(d)


def number_text(x: float) -> str:
    d = Decimal(repr(float(x)))
    return format(d.quantize(Decimal(1)) if d == d.to_integral_value() else d.normalize(), "f")


def root_id(cl_ord_id: str, aliases: dict[str, str] | None = None) -> str:
    """The OMS's order id behind a ClOrdID: the id itself, or the order a `<cid>/c<n>`,
    `<cid>/r<n>` request was for."""
    if aliases and cl_ord_id in aliases:
        return aliases[cl_ord_id]
    m = _ALIAS.match(cl_ord_id)
    return m.group(1) if m else cl_ord_id


def request_number(cl_ord_id: str) -> int | None:
    m = _ALIAS.match(cl_ord_id)
    return int(m.group(3)) if m else None


def alias(client_order_id: str, kind: str, request: int) -> str:
    return f"{client_order_id}/{kind}{request}"


# --- building messages ----------------------------------------------------------------------


BAR_DONE = "bar-done:"
"""A client's TestRequest (TestReqID `bar-done:SYMBOL:TS`) that it is done with that bar: the
local exchange in lockstep plays the next bar only then. Any FIX engine answers a TestRequest
with a Heartbeat, so it costs a real venue nothing."""


def bar_done(symbol: str, ts_ns: int) -> Any:
    return message("1", [(112, f"{BAR_DONE}{symbol}:{ts_ns}")])


def message(msg_type: str, body: list[tuple[int, str | None]]) -> Any:
    """A FIX 4.4 message of `msg_type` with the `body` tags that have a value (a tag given
    twice: its last value).

    Written as one string and parsed once by QuickFIX (unvalidated: its fields are ours), a
    tenth of the cost of setting each field through SWIG and the same message: QuickFIX orders
    the body by tag either way and writes BodyLength and CheckSum when it sends."""
    import quickfix as fix

    fields = {tag: value for tag, value in body if value is not None}
    text = "".join([f"8=FIX.4.4{SOH}9=0{SOH}35={msg_type}{SOH}",
                    *[f"{tag}={value}{SOH}" for tag, value in fields.items()], f"10=000{SOH}"])
    if text.count(SOH) != len(fields) + 4:
        bad = next(tag for tag, value in fields.items() if SOH in value)
        raise FixFieldError(f"tag {bad}: a value cannot hold the FIX delimiter (SOH)")
    return fix.Message(text, False)


def _group(m: Any, group: Any, entries: list[list[tuple[int, str | None]]]) -> None:
    """Add `entries` to `m` as instances of the quickfix44 group class `group` (which knows
    the group's delimiter and field order)."""
    import quickfix as fix

    for entry in entries:
        g = group()
        for tag, value in entry:
            if value is not None:
                g.setField(fix.StringField(tag, value))
        m.addGroup(g)


def _groups() -> Any:
    import quickfix44 as fix44

    return fix44


def new_order_single(order: Any, contract: Contract, ts_ns: int) -> Any:
    """NewOrderSingle (D) of an OMS order."""
    limit = None if order.limit_ticks is None else price_text(contract, order.limit_ticks)
    stop = None if order.stop_ticks is None else price_text(contract, order.stop_ticks)
    return message("D", [
        (11, order.client_order_id), (55, order.symbol), (54, SIDE[order.side]),
        (38, str(order.leaves_qty)), (40, ORD_TYPE[order.order_type]), (44, limit), (99, stop),
        (59, TIF[order.time_in_force]), (60, fix_time(ts_ns)),
    ])  # fmt: skip


def cancel_request(order: Any, ts_ns: int) -> Any:
    """OrderCancelRequest (F) for the order's latest request (`order.requests`)."""
    return message("F", [
        (41, order.client_order_id), (11, alias(order.client_order_id, "c", order.requests)),
        (55, order.symbol), (54, SIDE[order.side]), (38, str(order.quantity)),
        (60, fix_time(ts_ns)),
    ])  # fmt: skip


def replace_request(order: Any, contract: Contract, quantity: int | None, limit_ticks: int | None,
                    stop_ticks: int | None, ts_ns: int) -> Any:  # fmt: skip
    """OrderCancelReplaceRequest (G): the order as it should become (FIX restates every term;
    what the OMS leaves unchanged is the order's own)."""
    limit = limit_ticks if limit_ticks is not None else order.limit_ticks
    stop = stop_ticks if stop_ticks is not None else order.stop_ticks
    return message("G", [
        (41, order.client_order_id), (11, alias(order.client_order_id, "r", order.requests)),
        (55, order.symbol), (54, SIDE[order.side]),
        (38, str(quantity if quantity is not None else order.quantity)),
        (40, ORD_TYPE[order.order_type]),
        (44, None if limit is None else price_text(contract, limit)),
        (99, None if stop is None else price_text(contract, stop)),
        (59, TIF[order.time_in_force]), (60, fix_time(ts_ns)),
    ])  # fmt: skip


def status_request(client_order_id: str, symbol: str, side: str) -> Any:
    """OrderStatusRequest (H); Symbol and Side are required by FIX 4.4 ("[N/A]", "1" when the
    gateway no longer knows them: the exchange looks the order up by ClOrdID)."""
    return message("H", [(11, client_order_id), (55, symbol), (54, side)])


def mass_status_request(req_id: str) -> Any:
    """OrderMassStatusRequest (AF) for all orders (MassStatusReqType 7)."""
    return message("AF", [(584, req_id), (585, "7")])


def positions_request(req_id: str, account: str, ts_ns: int) -> Any:
    """RequestForPositions (AN): positions (PosReqType 0) of the account."""
    return message("AN", [(710, req_id), (724, "0"), (1, account), (581, "1"),
                          (715, fix_time(ts_ns)[:8]), (60, fix_time(ts_ns))])


def md_request(req_id: str, symbol: str, subscribe: bool = True) -> Any:
    """MarketDataRequest (V): snapshot plus updates of a symbol's bars (or unsubscribe)."""
    m = message("V", [(262, req_id), (263, "1" if subscribe else "2"), (264, "1"),
                      (265, "1")])
    fix44 = _groups()
    _group(m, fix44.MarketDataRequest.NoMDEntryTypes,
           [[(269, t)] for t, _ in MD_ENTRIES] + [[(269, MD_VOLUME)]])
    _group(m, fix44.MarketDataRequest.NoRelatedSym, [[(55, symbol)]])
    return m


# --- the exchange's messages ----------------------------------------------------------------


def bar_entries(contract: Contract, ts_ns: int, bar: dict[str, float],
                symbol_each: bool) -> list[list[tuple[int, str | None]]]:  # fmt: skip
    """The market data entries of one bar (MDUpdateAction and Symbol in each for X)."""
    date, time = md_date_time(ts_ns)
    head: list[tuple[int, str | None]] = [(279, "0")] if symbol_each else []
    entries = []
    for kind, name in MD_ENTRIES:
        px = price_text(contract, contract.to_ticks(bar[name]))
        entries.append([*head, (269, kind), *([(55, contract.symbol)] if symbol_each else []),
                        (270, px), (272, date), (273, time)])
    entries.append([*head, (269, MD_VOLUME), *([(55, contract.symbol)] if symbol_each else []),
                    (271, number_text(bar.get("volume", 0.0))), (272, date), (273, time)])
    return entries


def md_snapshot(req_id: str, contract: Contract, ts_ns: int | None,
                bar: dict[str, float] | None) -> Any:  # fmt: skip
    """MarketDataSnapshotFullRefresh (W): the last completed bar (no entries before the
    first)."""
    m = message("W", [(262, req_id), (55, contract.symbol)])
    if bar is not None and ts_ns is not None:
        _group(m, _groups().MarketDataSnapshotFullRefresh.NoMDEntries,
               bar_entries(contract, ts_ns, bar, False))
    else:
        import quickfix as fix

        m.setField(fix.StringField(268, "0"))
    return m


def md_incremental(req_id: str, contract: Contract, ts_ns: int, bar: dict[str, float]) -> Any:
    """MarketDataIncrementalRefresh (X): one completed bar."""
    m = message("X", [(262, req_id)])
    _group(m, _groups().MarketDataIncrementalRefresh.NoMDEntries,
           bar_entries(contract, ts_ns, bar, True))
    return m


def md_reject(req_id: str, reason: str, text: str) -> Any:
    return message("Y", [(262, req_id), (281, reason), (58, text)])


def security_status(symbol: str, req_id: str | None, ts_ns: int, text: str) -> Any:
    """SecurityStatus (f) saying the symbol's data ended (no more bars will come)."""
    return message("f", [(324, req_id), (55, symbol), (326, END_OF_DATA), (58, text),
                         (60, fix_time(ts_ns))])


def business_reject(ref: Fields, reason: str, text: str, ref_id: str | None = None) -> Any:
    return message("j", [(45, ref.get(34)), (372, ref.msg_type), (379, ref_id),
                         (380, reason), (58, text)])


# --- reading the exchange's messages (gateway side) -------------------------------------------


def bar_of(fields: Fields, delimiter: int, symbol: str | None = None) -> LiveBar | None:
    """The bar in a W (delimiter 269) or X (delimiter 279) message, None when it has none."""
    entries = fields.groups(delimiter)
    if not entries:
        return None
    values: dict[str, float] = {}
    names = dict(MD_ENTRIES)
    volume = 0.0
    stamp = None
    sym = symbol
    for e in entries:
        kind = e.get(269)
        sym = e.get(55, sym)
        if stamp is None and e.get(272) and e.get(273):
            stamp = parse_time(f"{e[272]}-{e[273]}")
        try:
            if kind in names:
                values[names[kind]] = float(Decimal(e[270]))
            elif kind == MD_VOLUME:
                volume = float(Decimal(e.get(271, "0")))
        except (KeyError, InvalidOperation):
            raise FixFieldError(f"market data entry {kind} has no number") from None
    missing = [n for n in ("open", "high", "low", "close") if n not in values]
    if missing or stamp is None or sym is None:
        raise FixFieldError(f"market data lacks {', '.join(missing) or 'its time or symbol'}")
    return LiveBar(sym, stamp, values["open"], values["high"], values["low"], values["close"],
                   volume)


def _ts(fields: Fields) -> int:
    """The report's time: TransactTime (60), else the header's SendingTime (52)."""
    for tag in (60, 52):
        text = fields.get(tag)
        if text:
            return parse_time(text)
    raise FixFieldError("tag 60 (TransactTime) is missing")


def _contract(contracts: dict[str, Contract], fields: Fields) -> Contract:
    symbol = fields.req(55)
    contract = contracts.get(symbol)
    if contract is None:
        raise FixFieldError(f"symbol {symbol!r} is not one this venue trades")
    return contract


IGNORED_EXEC_TYPES = {
    "A": "pending new", "6": "pending cancel", "E": "pending replace",
    "3": "done for day", "7": "stopped", "9": "suspended",
    "G": "trade correct", "H": "trade cancel", "B": "calculated",
}  # fmt: skip
"""ExecTypes that hand the OMS nothing: the pending states are the OMS's own requests (it is
already pending: the answer that ends them comes as New, Canceled, Replaced or a reject); done
for day, stopped and suspended leave the order working (expiry comes as C, Expired); trade
corrections and busts have no OMS event (logged for the operator: a known gap)."""


def exec_report(fields: Fields, contracts: dict[str, Contract],
                aliases: dict[str, str] | None = None) -> v.VenueReport | None:  # fmt: skip
    """The `VenueReport` an ExecutionReport (8) stands for; None for the ExecTypes that hand
    the OMS nothing (IGNORED_EXEC_TYPES). FixFieldError when it cannot be read."""
    exec_type = fields.req(150)
    if exec_type in IGNORED_EXEC_TYPES:
        return None
    cl = fields.get(41) or fields.req(11) if exec_type in ("4", "5") else fields.req(11)
    base = {"client_order_id": root_id(cl, aliases), "ts_ns": _ts(fields)}
    text = fields.get(58, "")
    if exec_type == "0":
        return v.Accepted(**base, venue_order_id=fields.req(37))
    if exec_type == "8":
        return v.Rejected(**base, reason=text or f"rejected (OrdRejReason {fields.get(103)})")
    if exec_type == "L":
        return v.Triggered(**base)
    if exec_type == "F":
        contract = _contract(contracts, fields)
        commission = None
        if fields.get(12) and fields.get(13) in ("1", "3"):
            commission = Decimal(fields.req(12))
            if fields.get(13) == "1":  # per unit
                commission *= qty_of(fields.req(32), 32)
        return v.Filled(**base, fill_id=fields.req(17), quantity=qty_of(fields.req(32), 32),
                        price_ticks=ticks_of(contract, fields.req(31)), commission=commission)
    if exec_type == "4":
        return v.Canceled(**base, reason=text)
    if exec_type == "C":
        return v.Expired(**base)
    if exec_type in ("5", "D"):  # replaced on request, or restated by the venue unasked
        contract = _contract(contracts, fields)
        ord_type = fields.get(40)
        return v.Updated(
            **base, update_id=fields.req(17), quantity=qty_of(fields.req(38)),
            limit_ticks=ticks_of(contract, fields.req(44)) if ord_type == "2" else None,
            stop_ticks=ticks_of(contract, fields.req(99)) if ord_type == "3" else None,
        )  # fmt: skip
    if exec_type == "I":
        if fields.get(103) == "5":  # unknown order
            return v.UnknownOrder(**base, reason=text)
        status = STATUS_OF.get(fields.req(39))
        if status is None:
            raise FixFieldError(f"OrdStatus {fields.get(39)!r} is not one FIX 4.4 knows")
        return v.OrderStatusReport(**base, venue_order_id=fields.get(37, ""), state=status,
                                   filled=qty_of(fields.req(14), 14),
                                   leaves=qty_of(fields.req(151), 151))  # fmt: skip
    raise FixFieldError(f"ExecType {exec_type!r} is not one FIX 4.4 knows")


def cancel_reject(fields: Fields, aliases: dict[str, str] | None = None) -> v.VenueReport:
    """OrderCancelReject (9): a CancelRejected or ModifyRejected (CxlRejResponseTo 1 or 2)
    for the request its ClOrdID numbers."""
    cl = fields.req(11)
    orig = fields.get(41)
    cid = root_id(orig if orig and orig != "NONE" else cl, aliases)
    base = {"client_order_id": cid, "ts_ns": _ts(fields),
            "reason": fields.get(58) or f"CxlRejReason {fields.get(102, '?')}",
            "request": request_number(cl)}  # fmt: skip
    if fields.req(434) == "2":
        return v.ModifyRejected(**base)
    return v.CancelRejected(**base)


def business_rejected(fields: Fields, aliases: dict[str, str] | None = None
                      ) -> v.VenueReport | None:  # fmt: skip
    """BusinessMessageReject (j) of one of our orders or requests: Rejected (an order),
    CancelRejected or ModifyRejected (a cancel or replace); None for anything else."""
    ref_type, ref_id = fields.get(372), fields.get(379)
    if not ref_id or ref_type not in ("D", "F", "G"):
        return None
    reason = fields.get(58) or f"BusinessRejectReason {fields.get(380, '?')}"
    base = {"client_order_id": root_id(ref_id, aliases), "ts_ns": _ts(fields), "reason": reason}
    if ref_type == "D":
        return v.Rejected(**base)
    cls = v.CancelRejected if ref_type == "F" else v.ModifyRejected
    return cls(**base, request=request_number(ref_id))


def report_key(fields: Fields) -> str:
    """What names a report for duplicate detection: its ExecID, or for a reject without one
    the request it answers."""
    t = fields.msg_type
    if t == "8":
        return f"8:{fields.get(17)}"
    if t == "9":
        return f"9:{fields.get(11)}"
    return f"j:{fields.get(372)}:{fields.get(379)}"


def execution_report(
    *,
    cl_ord_id: str,
    order_id: str,
    exec_id: str,
    exec_type: str,
    ord_status: str,
    symbol: str,
    side: str,
    order_qty: int,
    cum_qty: int,
    avg_px: str,
    ts_ns: int,
    orig_cl_ord_id: str | None = None,
    ord_type: str | None = None,
    tif: str | None = None,
    price: str | None = None,
    stop_px: str | None = None,
    last_qty: int | None = None,
    last_px: str | None = None,
    text: str | None = None,
    rej_reason: str | None = None,
    mass_req: tuple[str, int, bool] | None = None,
) -> Any:
    """ExecutionReport (8). `mass_req`: (MassStatusReqID, TotNumReports, LastRptRequested)
    for an answer to a mass status request."""
    leaves = order_qty - cum_qty if ord_status in ("0", "1", "6", "E", "A") else 0
    body: list[tuple[int, str | None]] = [
        (37, order_id), (11, cl_ord_id), (41, orig_cl_ord_id), (17, exec_id),
        (150, exec_type), (39, ord_status), (55, symbol), (54, side), (38, str(order_qty)),
        (40, ord_type), (59, tif), (44, price), (99, stop_px),
        (32, None if last_qty is None else str(last_qty)), (31, last_px),
        (151, str(leaves)), (14, str(cum_qty)), (6, avg_px), (60, fix_time(ts_ns)),
        (103, rej_reason), (58, text),
    ]
    if mass_req is not None:
        body += [(584, mass_req[0]), (911, str(mass_req[1])), (912, "Y" if mass_req[2] else "N")]
    return message("8", body)
