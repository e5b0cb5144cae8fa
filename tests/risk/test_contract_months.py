"""Risk limits of contract months: a root's `[risk.instruments.ES]` reaches each month of ES
(ESH24, ESM24), a month's own entry wins key by key, and the months of one root meet the root's
`max_position` together, on their net position, so a roll (its out leg closes the old month
before its in leg opens the new one) is never blocked by it while a decision in the new month
during a roll is measured with the position being rolled."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.data.contracts import root_of
from foxhunt.errors import ConfigError
from foxhunt.orders import Order, OrderBook, OrderFilled, OrderType, Side
from foxhunt.portfolio import Account
from foxhunt.risk import RiskConfig, RiskEngine

from .desk import CL, CL_80, ES, ES_4500, Desk, months

BUY, SELL = Side.BUY, Side.SELL


def es_desk(**limits) -> Desk:
    """An account as `foxhunt paper ES` holds a continuous series: the root, two months, CL."""
    desk = Desk(contracts={"ES": ES, **months("ESH24", "ESM24"), "CL": CL}, **limits)
    for symbol in ("ES", "ESH24", "ESM24"):
        desk.mark(symbol, ES_4500)
    desk.mark("CL", CL_80)
    return desk


def fill(desk: Desk, order: Order) -> None:
    """The working `order` fills whole at 4500.00."""
    desk.apply(OrderFilled(
        ts_ns=1, client_order_id=order.client_order_id, fill_id=f"f-{order.client_order_id}",
        symbol=order.symbol, side=order.side, quantity=order.leaves_qty, price_ticks=ES_4500,
        commission=Decimal(0)))  # fmt: skip


def test_a_contract_months_root_is_read_from_its_symbol():
    assert [root_of(s) for s in ("ESH24", "ESM4", "ES H24", "CLZ2025")] == ["ES", "ES", "ES", "CL"]
    assert [root_of(s) for s in ("ES", "MES", "6E", "SYN", "CL")] == [None] * 5


def test_a_roots_limits_reach_each_of_its_months():
    desk = es_desk(max_order_qty=5, max_position=5,
                   instruments={"ES": {"max_order_qty": 2, "max_position": 2,
                                       "price_collar_pct": 1}})  # fmt: skip
    for month in ("ESH24", "ESM24"):
        denial = desk.check(3, symbol=month)
        assert (denial.check, denial.limit, denial.value) == ("max_order_qty", "2", "3")
        assert denial.message == f"max order quantity 2 {month}: order is 3"
        assert desk.check(2, symbol=month) is None
        off = desk.check(1, symbol=month, order_type=OrderType.LIMIT, limit=ES_4500 * 102 // 100)
        assert off.check == "price_collar_pct" and off.limit == "1%"
    desk.hold(2, "ESH24")
    denial = desk.check(1, symbol="ESH24")
    assert denial.message == "max position 2 ESH24: order would take the position to +3"
    assert desk.check(3, symbol="CL") is None  # another root keeps the account-wide limits


def test_a_months_own_entry_wins_key_by_key():
    desk = es_desk(max_order_qty=5, max_position=5,
                   instruments={"ES": {"max_order_qty": 2, "price_collar_pct": 1},
                                "ESH24": {"max_order_qty": 4}})  # fmt: skip
    assert desk.check(4, symbol="ESH24") is None  # its own max_order_qty
    assert desk.check(3, symbol="ESM24").message == "max order quantity 2 ESM24: order is 3"
    # ESH24's entry sets no collar: the root's 1% reaches it, not the account-wide 5%
    off = desk.check(1, symbol="ESH24", order_type=OrderType.LIMIT, limit=ES_4500 * 102 // 100)
    assert off.check == "price_collar_pct" and off.limit == "1%"


def test_without_months_an_instrument_keeps_its_own_limits_and_no_aggregate():
    desk = Desk(max_position=3, instruments={"CL": {"max_position": 1}})
    desk.mark("ES", ES_4500)
    desk.mark("CL", CL_80)
    assert desk.risk.limits.root_of == {}
    desk.hold(3)
    desk.hold(1, "CL", CL_80)
    assert desk.check(1).message == "max position 3 ES: order would take the position to +4"
    assert desk.check(1, symbol="CL").message == (
        "max position 1 CL: order would take the position to +2")


def test_the_months_of_a_root_share_its_max_position_on_their_net():
    desk = es_desk(max_position=5, instruments={"ES": {"max_position": 3}})
    desk.hold(2, "ESH24")
    denial = desk.check(2, symbol="ESM24")  # ESM24 alone would hold 2 of its 3
    assert (denial.check, denial.limit, denial.value) == ("max_position", "3", "4")
    assert denial.message == ("max position 3 ES across its contract months: order would take "
                              "ES's net position to +4 (held ESH24 +2)")
    assert desk.check(1, symbol="ESM24") is None
    desk.send(1, symbol="ESM24")  # working buys count, as for one instrument
    assert desk.check(1, symbol="ESH24").message == (
        "max position 3 ES across its contract months: order would take ES's net position to "
        "+4 (held ESH24 +2, working buys 1)")
    # net: a short in the other month offsets (a calendar spread holds its legs, not twice)
    assert desk.check(3, SELL, symbol="ESM24") is None
    desk.hold(-3, "ESM24")
    assert desk.check(1, symbol="ESH24") is None  # net +2 - 3, + 1 working + 1 = +1
    # the short side: ESH24 closed, -3 ESM24; selling 1 ESH24 takes the net to -4
    desk.hold(-2, "ESH24")
    assert desk.check(1, SELL, symbol="ESH24").message == (
        "max position 3 ES across its contract months: order would take ES's net position to "
        "-4 (held ESM24 -3)")


def test_the_roots_own_position_counts_with_its_months():
    desk = es_desk(instruments={"ES": {"max_position": 3}})
    desk.hold(2, "ES")
    assert desk.check(2, symbol="ESH24").message == (
        "max position 3 ES across its contract months: order would take ES's net position to "
        "+4 (held ES +2)")


def test_without_a_root_entry_the_months_share_the_account_wide_max_position():
    desk = es_desk(max_position=3)
    desk.hold(3, "ESH24")
    assert desk.check(1, symbol="ESM24").message.startswith(
        "max position 3 ES across its contract months: order would take ES's net position to +4")
    # a month's own larger max_position is its own; the root's net still caps both months
    desk = es_desk(max_position=3, instruments={"ESM24": {"max_position": 6}})
    assert desk.check(3, symbol="ESM24") is None
    desk.hold(3, "ESM24")
    denial = desk.check(1, symbol="ESM24")
    assert (denial.check, denial.limit, denial.value) == ("max_position", "3", "4")
    assert "across its contract months" in denial.message


def test_a_roll_at_the_roots_limit_is_not_blocked_by_the_aggregate():
    desk = es_desk(instruments={"ES": {"max_position": 3, "max_order_qty": 3}})
    for held in (3, -3):  # a long and a short position at the root's limit
        desk = es_desk(instruments={"ES": {"max_position": 3, "max_order_qty": 3}})
        desk.hold(held, "ESH24")
        out_side, in_side = (SELL, BUY) if held > 0 else (BUY, SELL)
        assert desk.check(3, out_side, "ESH24", reduce_only=True, tag="roll") is None  # an exit
        fill(desk, desk.send(3, out_side, "ESH24", reduce_only=True, tag="roll"))
        # the in leg goes out only once the out leg has ended: the root's net is 0 here
        assert desk.check(3, in_side, "ESM24", tag="roll") is None
        fill(desk, desk.send(3, in_side, "ESM24", tag="roll"))
        assert (desk.account.position("ESH24"), desk.account.position("ESM24")) == (0, held)
        assert desk.check(1, in_side, "ESM24").value == str(held + (1 if held > 0 else -1))


def test_a_decision_in_the_new_month_during_a_roll_counts_the_position_being_rolled():
    desk = es_desk(instruments={"ES": {"max_position": 3}})
    desk.hold(3, "ESH24")
    out_leg = desk.send(3, SELL, "ESH24", reduce_only=True, tag="roll")  # working
    # ESM24 alone would pass (2 of 3): with the +3 still in ESH24 the root would hold +5
    denial = desk.check(2, symbol="ESM24")
    assert denial.message == ("max position 3 ES across its contract months: order would take "
                              "ES's net position to +5 (held ESH24 +3)")
    fill(desk, out_leg)
    in_leg = desk.send(3, BUY, "ESM24", tag="roll")  # working
    assert desk.check(1, symbol="ESM24").value == "4"  # the in leg and a decision: over 3
    assert desk.check(3, SELL, "ESM24") is None  # a decision to go flat passes
    fill(desk, in_leg)
    assert desk.check(1, symbol="ESH24").message == (
        "max position 3 ES across its contract months: order would take ES's net position to "
        "+4 (held ESM24 +3)")


def test_a_root_entry_is_known_through_its_months_and_an_unknown_one_is_refused():
    # `foxhunt live ESZ24` trades the month alone: [risk.instruments.ES] reaches it
    account = Account(months("ESZ24"))
    engine = RiskEngine(RiskConfig(instruments={"ES": {"max_position": 1}}), account, OrderBook())
    assert engine.limits.max_position == {"ESZ24": 1}
    assert engine.limits.root_members == {"ES": ("ESZ24",)}
    with pytest.raises(ConfigError, match=r"names unknown instrument\(s\) NQ; known: ES, ESZ24"):
        RiskEngine(RiskConfig(instruments={"NQ": {"max_position": 1}}), account, OrderBook())


def test_a_modification_replaces_its_own_leaves_in_the_roots_net():
    desk = es_desk(instruments={"ES": {"max_position": 3}})
    desk.hold(1, "ESH24")
    order = desk.send(2, symbol="ESM24")
    assert desk.risk.check_update(order, 2, None, None, 1) is None  # 1 + 2, its own 2 set aside
    denial = desk.risk.check_update(order, 3, None, None, 1)
    assert (denial.check, denial.value) == ("max_position", "4")
    assert Decimal(denial.limit) == 3


@st.composite
def rolling_desks(draw):
    """ES's root and two months with random limits (the root's own and a month's override),
    random positions in both months and random working orders of both months, both sides."""
    instruments = {"ES": {"max_position": draw(st.integers(0, 4))}}
    if draw(st.booleans()):
        instruments["ESM24"] = {"max_position": draw(st.integers(0, 6))}
    desk = es_desk(max_order_qty=draw(st.integers(1, 8)), max_position=draw(st.integers(0, 6)),
                   max_gross_notional=Decimal(0), instruments=instruments)  # fmt: skip
    for month in ("ESH24", "ESM24"):
        if pos := draw(st.integers(-6, 6)):
            desk.hold(pos, month)
        for side in (BUY, SELL):
            for _ in range(draw(st.integers(0, 2))):
                desk.send(draw(st.integers(1, 3)), side, month)
    return desk


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(desk=rolling_desks(), month=st.sampled_from(["ESH24", "ESM24"]),
       side=st.sampled_from([BUY, SELL]), qty=st.integers(1, 10))  # fmt: skip
def test_exits_pass_and_an_opening_order_that_passes_keeps_the_roots_net_in_its_limit(
        desk, month, side, qty):
    account, book, lim = desk.account, desk.book, desk.risk.limits
    pos = account.position(month)
    working = book.working_buy_qty if side is BUY else book.working_sell_qty
    closable = max(0, abs(pos) - working(month)) if (pos < 0 if side is BUY else pos > 0) else 0
    denial = desk.check(qty, side, month)
    if qty <= closable:
        assert denial is None, f"an exit of {qty} {month} was denied: {denial}"
        return
    if denial is not None:
        assert denial.closing == closable
        return
    sign = 1 if side is BUY else -1
    net = sum(account.position(s) + sign * working(s) for s in ("ES", "ESH24", "ESM24"))
    assert abs(net + sign * qty) <= lim.root_max_position["ES"]
    assert abs(pos + sign * (working(month) + qty)) <= lim.max_position[month]
