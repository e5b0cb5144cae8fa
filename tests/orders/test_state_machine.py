"""The order state machine: an explicit table; illegal events raise and change nothing.

Property tests drive one order with random event sequences and check the invariants that
every trading system relies on.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.orders import (
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    Order,
    OrderStatus,
    OrderType,
    Side,
    Trigger,
)
from foxhunt.orders.state import RESTORE

from .builders import CID, accepted, fill, init, simple, submitted

S = OrderStatus


def walk(order: Order, *kinds: str) -> Order:
    request = 0
    for kind in kinds:
        if kind in ("pending_cancel", "pending_update"):
            request += 1
        order.apply(simple(kind, request=max(request, 1)))
    return order


def working(qty: int = 5, order_type: OrderType = OrderType.LIMIT) -> Order:
    order = Order(init(qty, order_type=order_type))
    order.apply(submitted())
    order.apply(accepted())
    return order


def test_the_table_has_no_way_out_of_a_terminal_state():
    assert {s for s, _ in TRANSITIONS} & TERMINAL == set()
    assert TERMINAL == {S.DENIED, S.REJECTED, S.CANCELED, S.EXPIRED, S.FILLED}


def test_a_new_order_is_initialized_then_denied_or_submitted():
    assert walk(Order(init()), "denied").status is S.DENIED
    assert walk(Order(init()), "submitted", "accepted").status is S.ACCEPTED
    assert walk(Order(init()), "submitted", "rejected").status is S.REJECTED


def test_fills_move_an_order_to_partially_filled_then_filled():
    order = working(5)
    order.apply(fill(2, fill_id="a"))
    assert (order.status, order.filled_qty, order.leaves_qty) == (S.PARTIALLY_FILLED, 2, 3)
    order.apply(fill(3, 17999, fill_id="b"))
    assert (order.status, order.filled_qty, order.fill_cost_ticks) == (S.FILLED, 5, 89997)


def test_an_illegal_event_names_the_order_its_state_and_the_event_and_changes_nothing():
    order = walk(Order(init()), "submitted", "accepted", "canceled")
    before = order.snapshot()
    with pytest.raises(IllegalTransition) as err:
        order.apply(fill(1))
    assert str(err.value) == f"order {CID}: OrderFilled is illegal in state CANCELED"
    assert order.snapshot() == before


def test_a_fill_larger_than_what_is_left_is_refused():
    order = working(5)
    order.apply(fill(4, fill_id="a"))
    with pytest.raises(IllegalTransition, match="fill of 2 exceeds the 1 contracts left"):
        order.apply(fill(2, fill_id="b"))
    assert order.filled_qty == 4


def test_the_same_fill_id_twice_is_refused():
    order = working(5)
    order.apply(fill(1, fill_id="a"))
    with pytest.raises(IllegalTransition, match="fill a was already applied"):
        order.apply(fill(1, fill_id="a"))


def test_a_fill_through_the_limit_price_or_on_the_wrong_side_is_refused():
    order = working(5)
    with pytest.raises(IllegalTransition, match="through the limit 18000"):
        order.apply(fill(1, 18001))
    with pytest.raises(IllegalTransition, match="fill is SELL ES, order is BUY ES"):
        order.apply(fill(1, side=Side.SELL))


def test_only_a_stop_order_can_be_triggered():
    with pytest.raises(IllegalTransition, match="a LIMIT order has no trigger"):
        working(order_type=OrderType.LIMIT).apply(simple("triggered"))
    stop = working(order_type=OrderType.STOP)
    stop.apply(simple("triggered"))
    assert stop.status is S.TRIGGERED


def test_a_rejected_cancel_returns_the_order_to_the_state_it_works_in():
    order = working(5)
    order.apply(simple("pending_cancel", request=1))
    order.apply(fill(2, fill_id="a"))  # a fill that raced the cancel request
    assert order.status is S.PENDING_CANCEL and order.working_status is S.PARTIALLY_FILLED
    order.apply(simple("cancel_rejected", request=1))
    assert order.status is S.PARTIALLY_FILLED


def test_an_update_changes_the_order_when_the_venue_confirms_it():
    order = working(5)
    order.apply(simple("pending_update", request=1, qty=7))
    assert order.quantity == 5  # nothing changes until the venue says so
    order.apply(simple("updated", request=1, qty=7))
    assert (order.status, order.quantity) == (S.ACCEPTED, 7)


def test_requests_are_numbered_in_order():
    order = working(5)
    with pytest.raises(IllegalTransition, match="request 2 is not the next one"):
        order.apply(simple("pending_cancel", request=2))
    order.apply(simple("pending_cancel", request=1))
    with pytest.raises(IllegalTransition, match="no request 3 was sent"):
        order.apply(simple("cancel_rejected", request=3))


def test_an_update_cannot_shrink_the_order_below_what_has_filled():
    order = working(5)
    order.apply(fill(3))
    with pytest.raises(IllegalTransition, match="quantity 3 must exceed the 3 already filled"):
        order.apply(simple("pending_update", request=1, qty=3))


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_every_event_in_a_terminal_state_raises(status):
    path = {
        S.DENIED: ["denied"], S.REJECTED: ["submitted", "rejected"],
        S.CANCELED: ["submitted", "canceled"], S.EXPIRED: ["submitted", "accepted", "expired"],
    }  # fmt: skip
    order = Order(init(order_type=OrderType.STOP))
    if status is S.FILLED:
        walk(order, "submitted").apply(fill(5, fill_id="z"))
    else:
        walk(order, *path[status])
    for kind in ["denied", "submitted", "accepted", "rejected", "triggered", "pending_update",
                 "pending_cancel", "updated", "canceled", "expired"]:  # fmt: skip
        with pytest.raises(IllegalTransition):
            order.apply(simple(kind))
    with pytest.raises(IllegalTransition):
        order.apply(fill(1, fill_id="late"))
    assert order.status is status


# --- property tests -------------------------------------------------------------------------

KINDS = ["denied", "submitted", "accepted", "rejected", "triggered", "pending_update",
         "pending_cancel", "updated", "modify_rejected", "cancel_rejected", "canceled",
         "expired", "fill"]  # fmt: skip

steps = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(1, 4),  # request number
        st.integers(1, 7),  # fill or update quantity
        st.sampled_from(["a", "b", "c", "d", "e", "f"]),  # fill id (repeats on purpose)
    ),
    max_size=30,
)


def event_for(order: Order, kind: str, request: int, qty: int, fid: str):
    if kind == "fill":
        return fill(qty, price=order.limit_ticks or 18000, fill_id=fid, side=order.side)
    return simple(kind, request=request, qty=qty if kind.endswith("update") else None)


@settings(max_examples=400, deadline=None)
@given(steps, st.sampled_from(list(OrderType)), st.sampled_from(list(Side)))
def test_random_event_sequences_keep_every_invariant(seq, order_type, side):
    order = Order(init(5, side=side, order_type=order_type))
    booked = []
    for kind, request, qty, fid in seq:
        before = order.snapshot()
        event = event_for(order, kind, request, qty, fid)
        try:
            order.apply(event)
        except IllegalTransition:
            assert order.snapshot() == before  # an illegal event is never applied
            if before["status"] in TERMINAL:
                continue
        else:
            assert before["status"] not in TERMINAL  # a terminal state never changes
            if kind == "fill":
                booked.append(event)
        # invariants after every step, legal or not
        assert 0 <= order.filled_qty <= order.quantity
        assert (order.status is S.FILLED) == (order.filled_qty == order.quantity)
        assert order.status in set(OrderStatus)
        assert order.working_status not in (S.PENDING_CANCEL, S.PENDING_UPDATE)
        if order.status not in (S.PENDING_CANCEL, S.PENDING_UPDATE):
            assert order.working_status is order.status
        assert order.filled_qty == sum(f.quantity for f in booked)  # each fill booked once
        assert order.fill_cost_ticks == sum(f.quantity * f.price_ticks for f in booked)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_a_legal_step_is_exactly_what_the_table_says(seq):
    order = Order(init(5, order_type=OrderType.STOP))
    for kind, request, qty, fid in seq:
        status, working_status = order.status, order.working_status
        event = event_for(order, kind, request, qty, fid)
        try:
            order.apply(event)
        except IllegalTransition:
            continue
        if kind == "fill":
            trigger = Trigger.FILL if order.filled_qty == order.quantity else Trigger.PARTIAL_FILL
        else:
            trigger = event.TRIGGER
        target = TRANSITIONS[(status, trigger)]
        if target == RESTORE:
            assert order.status is working_status
        else:
            assert order.status is target
