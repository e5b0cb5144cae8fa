"""Contract: prices become integer ticks, money stays exact decimal."""

from __future__ import annotations

from decimal import Decimal

import pytest

from foxhunt.data.instruments import InstrumentRegistry
from foxhunt.orders import Contract, OrderRequestError


@pytest.fixture(scope="module")
def registry():
    return InstrumentRegistry.load()


def test_contract_takes_the_decimals_the_spec_file_wrote(registry):
    c = Contract.from_instrument(registry.get("6E"))
    assert c.tick_size == Decimal("0.00005") and c.point_value == Decimal(125000)
    assert c.tick_value == Decimal("6.25")
    zn = Contract.from_instrument(registry.get("ZN"))
    assert zn.tick_value == zn.tick_size * zn.point_value  # 1/64 of a point: 15.625 USD, exact


def test_prices_round_to_the_nearest_tick_and_back_exactly(registry):
    es = Contract.from_instrument(registry.get("ES"))
    assert es.to_ticks("4500.25") == 18001
    assert es.to_ticks(4500.10) == 18000  # rounded to the grid, as every order price is
    assert es.to_ticks(4500.125) == 18000  # a tie goes to the even tick
    assert es.price(18001) == Decimal("4500.25")
    assert es.money(4) == Decimal(50)  # four ticks on one ES contract
    assert es.commission_for(-3) == Decimal("6.75")


def test_a_price_that_must_be_on_the_grid_says_so_when_it_is_not(registry):
    es = Contract.from_instrument(registry.get("ES"))
    assert es.ticks_exact("4500.50") == 18002
    with pytest.raises(OrderRequestError, match=r"ES: price 4500.1 is off the 0.25 tick grid"):
        es.ticks_exact(4500.1)
    with pytest.raises(OrderRequestError, match="not a number"):
        es.to_ticks("abc")


def test_ten_thousand_cent_moves_add_up_to_the_cent():
    cl = Contract("CL", Decimal("0.01"), Decimal(1000), Decimal("2.50"))
    total = sum((cl.money(1) for _ in range(10_000)), Decimal(0))
    assert total == Decimal("100000.00")  # 10,000 x $10.00, no float drift
