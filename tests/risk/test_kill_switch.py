"""The kill switch: halt, cancel every working order, flatten every position, and keep at it."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.orders import OrderCanceled, OrderFilled, OrderStatus, OrderType, Side
from foxhunt.risk import KILL_SWITCH_TAG, Cause, KillSwitchActivated, TradingState

from .desk import CL_80, ES_4500, Desk


def kill(desk: Desk, ts: int = 5):
    plan = desk.risk.kill_plan(ts, "operator pressed it")
    for event in plan.events:
        desk.apply(event)
    return plan


def test_kill_halts_cancels_working_orders_and_flattens_each_position():
    desk = Desk()
    desk.mark("ES", ES_4500)
    desk.mark("CL", CL_80)
    desk.hold(2)
    desk.hold(-1, "CL", CL_80)
    resting = desk.send(1, Side.SELL, order_type=OrderType.LIMIT, limit=18010)
    plan = kill(desk)
    assert [type(e).__name__ for e in plan.events] == ["KillSwitchActivated", "TradingStateChanged"]
    assert plan.events[1].cause is Cause.KILL_SWITCH
    assert desk.risk.trading_state is TradingState.HALTED and desk.risk.state.kill_active
    assert plan.cancel == [resting]
    assert plan.flatten == {"CL": 1, "ES": -2}


def test_kill_work_counts_the_flatten_orders_already_working_and_what_raced_them():
    desk = Desk()
    desk.mark("ES", ES_4500)
    desk.hold(2)
    resting = desk.send(1, Side.SELL, order_type=OrderType.LIMIT, limit=18010)
    kill(desk)
    flat = desk.send(2, Side.SELL, reduce_only=True, tag=KILL_SWITCH_TAG, ts=6)
    assert desk.risk.kill_work() == ([resting], {})  # the cancel is not sent yet
    desk.apply(OrderFilled(  # the resting sell filled before its cancel arrived
        ts_ns=7, client_order_id=resting.client_order_id, fill_id="r", symbol="ES",
        side=Side.SELL, quantity=1, price_ticks=18010, commission=Decimal(0),
    ))  # fmt: skip
    assert desk.risk.kill_work() == ([], {"ES": 1})  # the flatten of 2 now overshoots by 1
    desk.apply(OrderCanceled(ts_ns=8, client_order_id=flat.client_order_id))
    assert desk.risk.kill_work() == ([], {"ES": -1})


def test_a_second_kill_while_halted_only_logs_its_activation():
    desk = Desk()
    kill(desk)
    plan = kill(desk, ts=9)
    assert [type(e) for e in plan.events] == [KillSwitchActivated]
    assert plan.events[0].activation == 2


def test_leaving_halted_by_hand_ends_the_kill_switch():
    desk = Desk()
    kill(desk)
    desk.apply(desk.risk.state_change(TradingState.REDUCING, Cause.MANUAL, 10, "reviewed"))
    assert not desk.risk.state.kill_active


def test_pending_cancels_are_not_canceled_twice():
    from foxhunt.orders import OrderPendingCancel

    desk = Desk()
    desk.mark("ES", ES_4500)
    o = desk.send(1, order_type=OrderType.LIMIT, limit=17990)
    desk.apply(OrderPendingCancel(ts_ns=3, client_order_id=o.client_order_id, request=1))
    assert o.status is OrderStatus.PENDING_CANCEL
    assert kill(desk).cancel == []
