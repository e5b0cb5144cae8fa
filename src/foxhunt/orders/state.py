"""The order state machine, as one explicit table.

An order's status changes only through `TRANSITIONS[(status, trigger)]`; a pair missing from the
table is illegal, raises `IllegalTransition` and changes nothing. A trigger is what an order
event means to the state machine (an `OrderFilled` is `PARTIAL_FILL` or `FILL`, depending on
whether it completes the order).

Two pending states wait for the venue's answer to a request (cancel, update). While one is
pending, the order remembers the status it works in (`working_status`): an answer that ends the
wait without ending the order (cancel rejected, updated, modify rejected) returns it there
(`RESTORE` in the table), and an accept, trigger or partial fill that arrives while waiting
keeps the pending status but moves the remembered one (`WORKING_AFTER`).

Terminal statuses (DENIED, REJECTED, CANCELED, EXPIRED, FILLED) have no way out. A fill that a
venue reports after it confirmed a cancel is illegal here: a venue adapter reports an order's
fills before its cancel confirmation (FIX does, per order), and anything else is a
reconciliation problem, not a state change.
"""

from __future__ import annotations

from enum import StrEnum


class OrderStatus(StrEnum):
    INITIALIZED = "INITIALIZED"  # built by the OMS, not yet checked
    DENIED = "DENIED"  # refused by the risk engine; never left the process
    SUBMITTED = "SUBMITTED"  # passed risk, written, sent to the venue
    ACCEPTED = "ACCEPTED"  # working at the venue
    REJECTED = "REJECTED"  # refused by the venue
    TRIGGERED = "TRIGGERED"  # a stop order whose trigger price traded
    PENDING_UPDATE = "PENDING_UPDATE"  # an update was sent, no answer yet
    PENDING_CANCEL = "PENDING_CANCEL"  # a cancel was sent, no answer yet
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    CANCELED = "CANCELED"
    EXPIRED = "EXPIRED"  # time in force ran out (DAY at the session close)


class Trigger(StrEnum):
    """What an event asks of the state machine."""

    DENY = "DENY"
    SUBMIT = "SUBMIT"
    ACCEPT = "ACCEPT"
    REJECT = "REJECT"
    TRIGGER = "TRIGGER"
    PENDING_UPDATE = "PENDING_UPDATE"
    PENDING_CANCEL = "PENDING_CANCEL"
    UPDATE = "UPDATE"
    MODIFY_REJECT = "MODIFY_REJECT"
    CANCEL_REJECT = "CANCEL_REJECT"
    PARTIAL_FILL = "PARTIAL_FILL"
    FILL = "FILL"
    CANCEL = "CANCEL"
    EXPIRE = "EXPIRE"


S, T = OrderStatus, Trigger
RESTORE = "RESTORE"  # back to the remembered working status

TERMINAL = frozenset({S.DENIED, S.REJECTED, S.CANCELED, S.EXPIRED, S.FILLED})
PENDING = frozenset({S.PENDING_UPDATE, S.PENDING_CANCEL})
# Statuses in which the order can still fill at the venue (its quantity counts as exposure).
WORKING = frozenset(
    {S.SUBMITTED, S.ACCEPTED, S.TRIGGERED, S.PARTIALLY_FILLED, S.PENDING_UPDATE, S.PENDING_CANCEL}
)

# While pending, these triggers keep the pending status and move the remembered working status.
WORKING_AFTER = {T.ACCEPT: S.ACCEPTED, T.TRIGGER: S.TRIGGERED, T.PARTIAL_FILL: S.PARTIALLY_FILLED}

TRANSITIONS: dict[tuple[OrderStatus, Trigger], OrderStatus | str] = {
    (S.INITIALIZED, T.DENY): S.DENIED,
    (S.INITIALIZED, T.SUBMIT): S.SUBMITTED,
    (S.SUBMITTED, T.ACCEPT): S.ACCEPTED,
    (S.SUBMITTED, T.REJECT): S.REJECTED,
    (S.SUBMITTED, T.TRIGGER): S.TRIGGERED,
    (S.SUBMITTED, T.PENDING_UPDATE): S.PENDING_UPDATE,
    (S.SUBMITTED, T.PENDING_CANCEL): S.PENDING_CANCEL,
    (S.SUBMITTED, T.PARTIAL_FILL): S.PARTIALLY_FILLED,  # fills may beat the accept (IOC, market)
    (S.SUBMITTED, T.FILL): S.FILLED,
    (S.SUBMITTED, T.CANCEL): S.CANCELED,  # an IOC with nothing to meet
    (S.ACCEPTED, T.TRIGGER): S.TRIGGERED,
    (S.ACCEPTED, T.PENDING_UPDATE): S.PENDING_UPDATE,
    (S.ACCEPTED, T.PENDING_CANCEL): S.PENDING_CANCEL,
    (S.ACCEPTED, T.UPDATE): S.ACCEPTED,  # the venue changed it unasked
    (S.ACCEPTED, T.PARTIAL_FILL): S.PARTIALLY_FILLED,
    (S.ACCEPTED, T.FILL): S.FILLED,
    (S.ACCEPTED, T.CANCEL): S.CANCELED,
    (S.ACCEPTED, T.EXPIRE): S.EXPIRED,
    (S.TRIGGERED, T.REJECT): S.REJECTED,
    (S.TRIGGERED, T.PENDING_UPDATE): S.PENDING_UPDATE,
    (S.TRIGGERED, T.PENDING_CANCEL): S.PENDING_CANCEL,
    (S.TRIGGERED, T.UPDATE): S.TRIGGERED,
    (S.TRIGGERED, T.PARTIAL_FILL): S.PARTIALLY_FILLED,
    (S.TRIGGERED, T.FILL): S.FILLED,
    (S.TRIGGERED, T.CANCEL): S.CANCELED,
    (S.TRIGGERED, T.EXPIRE): S.EXPIRED,
    (S.PARTIALLY_FILLED, T.PENDING_UPDATE): S.PENDING_UPDATE,
    (S.PARTIALLY_FILLED, T.PENDING_CANCEL): S.PENDING_CANCEL,
    (S.PARTIALLY_FILLED, T.UPDATE): S.PARTIALLY_FILLED,
    (S.PARTIALLY_FILLED, T.PARTIAL_FILL): S.PARTIALLY_FILLED,
    (S.PARTIALLY_FILLED, T.FILL): S.FILLED,
    (S.PARTIALLY_FILLED, T.CANCEL): S.CANCELED,  # the rest canceled (IOC, or on request)
    (S.PARTIALLY_FILLED, T.EXPIRE): S.EXPIRED,
    (S.PENDING_UPDATE, T.UPDATE): RESTORE,
    (S.PENDING_UPDATE, T.MODIFY_REJECT): RESTORE,
    (S.PENDING_UPDATE, T.PENDING_CANCEL): S.PENDING_CANCEL,
    (S.PENDING_UPDATE, T.ACCEPT): S.PENDING_UPDATE,
    (S.PENDING_UPDATE, T.TRIGGER): S.PENDING_UPDATE,
    (S.PENDING_UPDATE, T.PARTIAL_FILL): S.PENDING_UPDATE,
    (S.PENDING_UPDATE, T.FILL): S.FILLED,
    (S.PENDING_UPDATE, T.REJECT): S.REJECTED,
    (S.PENDING_UPDATE, T.CANCEL): S.CANCELED,
    (S.PENDING_UPDATE, T.EXPIRE): S.EXPIRED,
    (S.PENDING_CANCEL, T.CANCEL_REJECT): RESTORE,
    (S.PENDING_CANCEL, T.UPDATE): S.PENDING_CANCEL,  # the answer to an earlier update request
    (S.PENDING_CANCEL, T.MODIFY_REJECT): S.PENDING_CANCEL,
    (S.PENDING_CANCEL, T.ACCEPT): S.PENDING_CANCEL,
    (S.PENDING_CANCEL, T.TRIGGER): S.PENDING_CANCEL,
    (S.PENDING_CANCEL, T.PARTIAL_FILL): S.PENDING_CANCEL,
    (S.PENDING_CANCEL, T.FILL): S.FILLED,
    (S.PENDING_CANCEL, T.REJECT): S.REJECTED,
    (S.PENDING_CANCEL, T.CANCEL): S.CANCELED,
    (S.PENDING_CANCEL, T.EXPIRE): S.EXPIRED,
}

assert not any(status in TERMINAL for status, _ in TRANSITIONS), "terminal states are final"


def next_status(
    status: OrderStatus, trigger: Trigger, working: OrderStatus
) -> tuple[OrderStatus, OrderStatus] | None:
    """(new status, new working status) for `trigger` in `status`, or None when illegal.

    `working` is the status the order works in (equal to `status` outside the pending states).
    """
    target = TRANSITIONS.get((status, trigger))
    if target is None:
        return None
    if target == RESTORE:
        return working, working
    assert isinstance(target, OrderStatus)
    if target in PENDING:
        if status in PENDING:  # still waiting: an accept/trigger/fill moves the working status
            return target, WORKING_AFTER.get(trigger, working)
        return target, status
    return target, target
