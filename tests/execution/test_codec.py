"""The log's wire format: every event kind, its id and its JSON payload exactly as logs written
before hold them (kind names, sorted keys, no spaces, Decimals as strings, enums by value).
Each row decodes to an event with that id and encodes back to the same bytes. New kinds
register themselves; this table pins each one's format."""

from __future__ import annotations

import pytest

from foxhunt.events import EVENT_CLASSES, Event, event
from foxhunt.execution import EventCodec, EventCodecError
from foxhunt.orders import OrderInitialized, OrderType, Side, TimeInForce
from foxhunt.risk import Cause, TradingState

WIRE = [
    ('account_opened', 'account:paper:opened',
     '{"account":"paper","currency":"USD","starting_cash":"100000.00","ts_ns":0}'),
    ('order_initialized', 'A-1:order_initialized',
     ('{"client_order_id":"A-1","limit_ticks":null,"order_type":"STOP","quantity":3,'
      '"reduce_only":true,"requested_quantity":5,"side":"SELL","stop_ticks":-17996,'
      '"symbol":"ES","tag":"kill_switch","time_in_force":"GTC",'
      '"trim_reason":"max_position: \\"\\u00e9\\"","ts_ns":1}')),
    ('order_denied', 'B-2:order_denied',
     '{"check":"max_order_qty","client_order_id":"B-2","reason":"3 > 2","ts_ns":2}'),
    ('order_submitted', 'A-1:order_submitted',
     '{"client_order_id":"A-1","ts_ns":3}'),
    ('order_accepted', 'A-1:order_accepted',
     '{"client_order_id":"A-1","ts_ns":4,"venue_order_id":"v-9"}'),
    ('order_rejected', 'C-3:order_rejected',
     '{"client_order_id":"C-3","reason":"no margin","ts_ns":5}'),
    ('order_triggered', 'A-1:order_triggered',
     '{"client_order_id":"A-1","ts_ns":6}'),
    ('order_pending_update', 'A-1:order_pending_update:1',
     ('{"client_order_id":"A-1","limit_ticks":null,"quantity":2,"request":1,'
      '"stop_ticks":null,"ts_ns":7}')),
    ('order_pending_cancel', 'A-1:order_pending_cancel:2',
     '{"client_order_id":"A-1","request":2,"ts_ns":8}'),
    ('order_updated', 'A-1:order_updated:u1',
     ('{"client_order_id":"A-1","limit_ticks":null,"quantity":2,"stop_ticks":-17990,'
      '"ts_ns":9,"update_id":"u1"}')),
    ('order_modify_rejected', 'A-1:order_modify_rejected:1',
     '{"client_order_id":"A-1","reason":"too late","request":1,"ts_ns":10}'),
    ('order_cancel_rejected', 'A-1:order_cancel_rejected:2',
     '{"client_order_id":"A-1","reason":"filled","request":2,"ts_ns":11}'),
    ('order_filled', 'A-1:order_filled:X9',
     ('{"client_order_id":"A-1","commission":"2.25","fill_id":"X9","price_ticks":18001,'
      '"quantity":1,"side":"BUY","symbol":"ES","ts_ns":12}')),
    ('order_canceled', 'D-4:order_canceled',
     '{"client_order_id":"D-4","reason":"end of day","ts_ns":13}'),
    ('order_expired', 'E-5:order_expired',
     '{"client_order_id":"E-5","ts_ns":14}'),
    ('price_marked', 'mark:ES:15',
     '{"price_ticks":18002,"symbol":"ES","ts_ns":15}'),
    ('position_adopted', 'adopt:ES:19',
     '{"price_ticks":18004,"quantity":-2,"reason":"the venue is right","symbol":"ES","ts_ns":19}'),
    ('trading_state_changed', 'trading_state:1',
     ('{"cause":"BREAKER","change":1,"check":"max_drawdown","previous":"ACTIVE",'
      '"reason":"equity fell","state":"HALTED","ts_ns":16}')),
    ('trading_day_started', 'trading_day:2024-03-05',
     '{"day":"2024-03-05","ends_ns":18,"equity":"-1.50","ts_ns":17}'),
    ('drawdown_reset', 'drawdown_reset:1',
     '{"peak":"99000.5","reason":"new quarter","reset":1,"ts_ns":19}'),
    ('kill_switch_activated', 'kill_switch:1',
     '{"activation":1,"reason":"operator","ts_ns":20}'),
    ('modify_denied', 'A-1:modify_denied:21',
     '{"check":"price_collar_pct","client_order_id":"A-1","reason":"far","ts_ns":21}'),
    ('roll_started', 'roll:R-ESH24-ESM24:started',
     ('{"from_symbol":"ESH24","quantity":-3,"reason":"volume 150,000 > 30,000","roll_id":'
      '"R-ESH24-ESM24","root":"ES","to_symbol":"ESM24","ts_ns":22}')),
    ('roll_completed', 'roll:R-ESH24-ESM24:completed',
     '{"quantity":-3,"roll_id":"R-ESH24-ESM24","ts_ns":23}'),
    ('roll_failed', 'roll:R-ESM24-ESU24:failed',
     '{"reason":"out leg rejected","roll_id":"R-ESM24-ESU24","ts_ns":24}'),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "event_id", "payload"), WIRE, ids=[row[0] for row in WIRE])
def test_a_stored_event_reads_back_and_encodes_to_the_same_bytes(kind, event_id, payload):
    codec = EventCodec()
    decoded = codec.decode(kind, payload)
    assert type(decoded) is EVENT_CLASSES[kind]
    assert decoded.event_id == event_id
    assert codec.encode(decoded) == (kind, payload)


def test_every_registered_kind_has_its_wire_format_pinned_here():
    assert sorted(EVENT_CLASSES) == sorted(kind for kind, _, _ in WIRE)


def test_a_field_added_later_with_a_default_reads_from_an_older_payload():
    older = ('{"client_order_id":"A-1","limit_ticks":18000,"order_type":"LIMIT","quantity":2,'
             '"reduce_only":false,"side":"BUY","stop_ticks":null,"symbol":"ES","tag":"",'
             '"time_in_force":"DAY","ts_ns":1}')  # fmt: skip
    init = EventCodec().decode("order_initialized", older)
    assert init == OrderInitialized(
        ts_ns=1, client_order_id="A-1", symbol="ES", side=Side.BUY, quantity=2,
        order_type=OrderType.LIMIT, time_in_force=TimeInForce.DAY, limit_ticks=18000,
    )  # fmt: skip
    assert init.requested_quantity is None and init.trim_reason == ""


def test_an_unknown_kind_or_a_payload_that_does_not_fit_is_one_codec_error():
    codec = EventCodec()
    with pytest.raises(EventCodecError, match="unknown event kind 'order_teleported'"):
        codec.decode("order_teleported", "{}")
    with pytest.raises(EventCodecError, match="price_marked: payload does not fit"):
        codec.decode("price_marked", '{"price_ticks":"18000","symbol":"ES","ts_ns":1}')
    with pytest.raises(EventCodecError, match="order_filled: payload does not fit"):
        codec.decode("order_filled", '{"client_order_id":"A-1","side":"SIDEWAYS","ts_ns":1}')


def test_an_event_class_of_a_taken_or_empty_kind_is_refused_and_registers_nothing():
    before = dict(EVENT_CLASSES)
    for kind in ("order_filled", ""):
        with pytest.raises(TypeError, match=f"Impostor: event kind {kind!r} is empty or taken"):
            @event(kind, "{KIND}:{ts_ns}")
            class Impostor(Event):
                pass
    assert dict(EVENT_CLASSES) == before


@pytest.mark.parametrize("enum", [Side, OrderType, TimeInForce, TradingState, Cause])
def test_an_event_enum_prints_as_its_value_the_form_it_is_stored_in(enum):
    for member in enum:
        assert str(member) == f"{member}" == member.value == member
        assert enum(member.value) is member
