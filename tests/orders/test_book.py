"""The order book: orders by client order id and the contracts working orders could still trade."""

from __future__ import annotations

import pytest

from foxhunt.orders import DuplicateOrderError, OrderBook, Side, UnknownOrderError

from .builders import accepted, fill, init, simple, submitted


def test_working_exposure_follows_leaves_per_side_and_symbol():
    book = OrderBook()
    book.apply(init(5, cid="b1"))
    assert book.working_buy_qty("ES") == 0  # not sent yet: not exposure
    book.apply(submitted("b1"))
    book.apply(init(2, side=Side.SELL, cid="s1", limit=18010))
    book.apply(submitted("s1"))
    assert (book.working_buy_qty("ES"), book.working_sell_qty("ES")) == (5, 2)
    book.apply(fill(3, cid="b1"))
    assert book.working_buy_qty("ES") == 2
    book.apply(simple("canceled", cid="s1"))
    assert book.working_sell_qty("ES") == 0
    assert [o.client_order_id for o in book.working()] == ["b1"]
    book.apply(fill(2, fill_id="f2", cid="b1"))
    assert book.working() == [] and book.working_buy_qty("ES") == 0


def test_an_update_that_changes_the_quantity_changes_the_exposure():
    book = OrderBook()
    for event in (init(5), submitted(), accepted(), simple("pending_update", qty=8)):
        book.apply(event)
    assert book.working_buy_qty("ES") == 5
    book.apply(simple("updated", qty=8))
    assert book.working_buy_qty("ES") == 8


def test_a_client_order_id_is_used_once_and_an_unknown_one_is_named():
    book = OrderBook()
    book.apply(init(5, cid="x"))
    with pytest.raises(DuplicateOrderError, match="client order id 'x' is already used"):
        book.apply(init(1, cid="x"))
    with pytest.raises(UnknownOrderError, match="unknown client order id 'y'"):
        book.apply(submitted("y"))
