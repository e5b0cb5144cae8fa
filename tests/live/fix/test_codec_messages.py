"""`codec.message` writes a message as one string parsed once by QuickFIX: the message is the
one that setting each field through QuickFIX gives, for every message the stack sends."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.live.fix import codec
from foxhunt.live.fix.codec import FixFieldError
from foxhunt.orders.enums import OrderType, Side, TimeInForce

from .helpers import ES, T0


def field_by_field(msg_type: str, body: list[tuple[int, str | None]]):
    """The reference: each field set through QuickFIX's typed API."""
    import quickfix as fix

    m = fix.Message()
    m.getHeader().setField(fix.BeginString("FIX.4.4"))
    m.getHeader().setField(fix.MsgType(msg_type))
    for tag, value in body:
        if value is not None:
            m.setField(fix.StringField(tag, value))
    return m


def order(**kw):
    base = {"client_order_id": "P12", "symbol": "ES", "side": Side.SELL, "leaves_qty": 3,
            "quantity": 3, "order_type": OrderType.LIMIT, "limit_ticks": 20_001,
            "stop_ticks": None, "time_in_force": TimeInForce.GTC, "requests": 2}
    return SimpleNamespace(**{**base, **kw})


def same(built, msg_type: str, body: list[tuple[int, str | None]]) -> None:
    assert built.toString() == field_by_field(msg_type, body).toString()
    assert built.getHeader().getField(35) == msg_type


@pytest.mark.parametrize("o", [
    order(), order(order_type=OrderType.MARKET, limit_ticks=None, side=Side.BUY),
    order(order_type=OrderType.STOP, limit_ticks=None, stop_ticks=19_990,
          time_in_force=TimeInForce.DAY),
])  # fmt: skip
def test_orders_cancels_and_replaces_are_the_field_by_field_messages(o):
    ts = T0 + 123_456_789
    limit = None if o.limit_ticks is None else codec.price_text(ES, o.limit_ticks)
    stop = None if o.stop_ticks is None else codec.price_text(ES, o.stop_ticks)
    same(codec.new_order_single(o, ES, ts), "D", [
        (11, o.client_order_id), (55, "ES"), (54, codec.SIDE[o.side]), (38, str(o.leaves_qty)),
        (40, codec.ORD_TYPE[o.order_type]), (44, limit), (99, stop),
        (59, codec.TIF[o.time_in_force]), (60, codec.fix_time(ts))])  # fmt: skip
    same(codec.cancel_request(o, ts), "F", [
        (41, "P12"), (11, "P12/c2"), (55, "ES"), (54, codec.SIDE[o.side]), (38, "3"),
        (60, codec.fix_time(ts))])  # fmt: skip
    replace = codec.replace_request(o, ES, 5, None, None, ts)
    same(replace, "G", [
        (41, "P12"), (11, "P12/r2"), (55, "ES"), (54, codec.SIDE[o.side]), (38, "5"),
        (40, codec.ORD_TYPE[o.order_type]), (44, limit), (99, stop),
        (59, codec.TIF[o.time_in_force]), (60, codec.fix_time(ts))])  # fmt: skip


def test_reports_and_requests_are_the_field_by_field_messages():
    body = [(37, "ES-1"), (11, "P1"), (41, None), (17, "ES-9"), (150, "F"), (39, "2"),
            (55, "ES"), (54, "1"), (38, "2"), (40, "1"), (59, "1"), (44, None), (99, None),
            (32, "2"), (31, "5000.25"), (151, "0"), (14, "2"), (6, "5000.25"),
            (60, codec.fix_time(T0)), (103, None), (58, "a text = with an equals sign")]
    same(codec.message("8", body), "8", body)
    same(codec.status_request("P1", "ES", "2"), "H", [(11, "P1"), (55, "ES"), (54, "2")])
    same(codec.message("5", [(58, "")]), "5", [(58, "")])  # an empty value is kept
    same(codec.message("0", []), "0", [])


def test_a_tag_given_twice_keeps_its_last_value_as_setting_it_twice_does():
    body = [(58, "first"), (11, "P1"), (58, "second")]
    same(codec.message("j", body), "j", body)


def test_a_value_holding_the_delimiter_is_refused():
    with pytest.raises(FixFieldError, match="tag 58"):
        codec.message("j", [(11, "P1"), (58, f"two{codec.SOH}fields")])


def reference_parse_time(text: str) -> int:
    head, _, frac = text.partition(".")
    stamp = datetime.strptime(head, "%Y%m%d-%H:%M:%S").replace(tzinfo=UTC)
    if frac and (not frac.isdigit() or len(frac) > 9):
        raise ValueError(frac)
    return int(stamp.timestamp()) * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


@settings(max_examples=300, deadline=None)
@given(ts=st.integers(0, 4_102_444_800 * 10**9), ms=st.booleans())
def test_times_written_and_read_back_are_the_strptime_ones(ts, ms):
    ts = ts - ts % 1_000_000 if ms else ts
    text = codec.fix_time(ts)
    exact_ms = ts % 1_000_000 == 0
    assert text == (datetime.fromtimestamp(ts // 10**9, tz=UTC).strftime("%Y%m%d-%H:%M:%S")
                    + (f".{ts % 10**9 // 10**6:03d}" if exact_ms else f".{ts % 10**9:09d}"))
    assert codec.parse_time(text) == reference_parse_time(text) == ts


@pytest.mark.parametrize("text", [
    "20240230-10:00:00", "20241301-10:00:00", "20240305-24:00:00", "20240305-14:01:60",
    "20240305-14:01:00.1234567890", "20240305-14:01:00.12a", "2024035-14:01:00", "junk", "",
    "20240305 14:01:00", "20240305-14:01:00.", "20240305-4:01:00",
])  # fmt: skip
def test_a_bad_time_is_refused_as_strptime_refuses_it(text):
    try:
        expected = reference_parse_time(text)
    except ValueError:
        with pytest.raises(FixFieldError):
            codec.parse_time(text)
    else:
        assert codec.parse_time(text) == expected
