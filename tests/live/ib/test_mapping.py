"""Our orders <-> IB's: every order type and time in force, prices in ticks both ways, the
contract mapping's errors as one line."""

from __future__ import annotations

from decimal import Decimal

import ib_async
import pytest

from foxhunt.errors import ConfigError
from foxhunt.live.ib import mapping as m
from foxhunt.live.ib.config import IbFuture, check_endpoint, parse_futures
from foxhunt.live.ib.journal import SentOrder
from foxhunt.orders import OrderType, Side, TimeInForce

from .conftest import CL, ES


def sent(kind=OrderType.MARKET, tif=TimeInForce.GTC, limit=None, stop=None, side=Side.BUY):
    return SentOrder(client_order_id="P123", order_id=41, symbol="ES", side=side, quantity=3,
                     order_type=kind, time_in_force=tif, limit_ticks=limit, stop_ticks=stop)


@pytest.mark.parametrize(("kind", "tif", "limit", "stop", "ib_type", "ib_tif", "lmt", "aux"), [
    (OrderType.MARKET, TimeInForce.DAY, None, None, "MKT", "DAY", None, None),
    (OrderType.MARKET, TimeInForce.IOC, None, None, "MKT", "IOC", None, None),
    (OrderType.LIMIT, TimeInForce.GTC, 18001, None, "LMT", "GTC", 4500.25, None),
    (OrderType.LIMIT, TimeInForce.IOC, 18001, None, "LMT", "IOC", 4500.25, None),
    (OrderType.STOP, TimeInForce.DAY, None, 17990, "STP", "DAY", None, 4497.5),
    (OrderType.MARKET, TimeInForce.ATC, None, None, "MOC", "DAY", None, None),
])  # fmt: skip
def test_ib_order_of_each_type(kind, tif, limit, stop, ib_type, ib_tif, lmt, aux):
    o = m.ib_order(sent(kind, tif, limit, stop, Side.SELL), ES, "DU1", outside_rth=True)
    assert (o.orderId, o.action, o.totalQuantity, o.orderRef, o.account) == (41, "SELL", 3.0,
                                                                             "P123", "DU1")
    assert (o.orderType, o.tif, o.outsideRth, o.transmit) == (ib_type, ib_tif, True, True)
    assert (o.lmtPrice if lmt else None, o.auxPrice if aux else None) == (lmt, aux)
    assert not m.set_price(o.lmtPrice) if lmt is None else o.lmtPrice == lmt
    assert m.order_terms(o, ES) == (3, limit, stop)
    assert m.our_kind(o) == (kind, tif)


def test_prices_and_sizes_from_ib():
    assert m.price_ticks(CL, 78.43000000000001, "fill") == 7843  # float noise is no error
    assert m.price_ticks(ES, 4500.3, "fill") == 18001  # off grid: nearest tick, logged
    assert m.whole(2.0, "x") == 2
    with pytest.raises(ValueError, match="not a whole number"):
        m.whole(1.5, "execution size")
    assert m.side_of("BOT") is m.side_of("BUY") is Side.BUY
    assert m.side_of("SLD") is Side.SELL


def test_commission_from_ib():
    assert m.commission(4.1, "USD", ES) == Decimal("4.1")
    assert m.commission(1.7976931348623157e308, "USD", ES) is None  # IB's unset double
    assert m.commission(4.1, "EUR", ES) is None  # another currency: the contract's own


def test_status_states_and_execution_revisions():
    assert [m.status_state(s) for s in ("PreSubmitted", "Submitted", "Filled", "Cancelled",
                                        "ApiCancelled", "Inactive", "PendingSubmit")] == [
        "working", "working", "filled", "canceled", "canceled", "rejected", None]
    assert m.exec_base("0000e0d5.65f1a2.01.02") == m.exec_base("0000e0d5.65f1a2.01.01")
    assert m.exec_base("plain") == "plain"


def test_ib_contract_from_config():
    c = m.ib_contract("ES", IbFuture(exchange="CME", expiry="202406"))
    assert (c.secType, c.symbol, c.exchange, c.lastTradeDateOrContractMonth, c.currency) == (
        "FUT", "ES", "CME", "202406", "USD")
    c = m.ib_contract("MYM", IbFuture(root="MYM", con_id=123, exchange="CBOT"))
    assert (c.conId, c.symbol) == (123, "MYM")
    assert isinstance(c, ib_async.Future)


@pytest.mark.parametrize(("data", "message"), [
    ({"ES": {"exchange": "CME", "expiry": "202406"}},
     "ib contracts: no IB contract for CL; add [ib.contracts.CL] with exchange and expiry"),
    ({"ES": {"exchange": "CME", "expiry": "202406"}, "CL": {"con_id": 1}, "NQ": {"con_id": 2}},
     "ib contracts: NQ is not a symbol this account trades (CL, ES)"),
    ({"ES": {"exchange": "CME"}, "CL": {"con_id": 1}},
     "ib contracts [ES]: Value error, give con_id, or exchange with expiry or local_symbol"),
    ({"ES": {"exchange": "CME", "expiry": "2024-06"}, "CL": {"con_id": 1}},
     "ib contracts [ES]: key 'expiry': Value error, expected YYYYMM or YYYYMMDD"),
    ({"ES": {"exchange": "CME", "expiry": "202406", "month": 6}, "CL": {"con_id": 1}},
     "ib contracts [ES]: unknown key 'month'"),
])  # fmt: skip
def test_contract_mapping_errors_are_one_line(data, message):
    with pytest.raises(ConfigError) as err:
        parse_futures(data, ["ES", "CL"])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(("host", "port", "client_id", "message"), [
    ("", 7497, 1, "IB host '' is not a host name or address"),
    ("127.0.0.1", 0, 1, "IB port 0 is not a TCP port (TWS paper 7497"),
    ("127.0.0.1", "7497", 1, "IB port '7497' is not a TCP port"),
    ("127.0.0.1", 7497, -1, "IB client id -1 must be a whole number >= 0"),
])  # fmt: skip
def test_bad_endpoint(host, port, client_id, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        check_endpoint(host, port, client_id)
